-- Hosts a sweep discovers join this group (when in none yet), so its monitoring profiles
-- monitor them (issue 13).
ALTER TABLE network_sweeps ADD COLUMN IF NOT EXISTS group_id uuid REFERENCES device_groups (id) ON DELETE SET NULL;
