-- Monitoring profiles (issue 13): a device group (optionally narrowed by device type) carries
-- default checks, so devices that join it are monitored with no further step, as Zabbix
-- templates and LibreNMS auto-polling do. The leader reconciles profiles against devices:
-- it creates the missing checks, keeps them in step with the profile and the device's address,
-- and deletes them when the device leaves (decision 0600).
CREATE TABLE IF NOT EXISTS monitoring_profiles (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  description text,
  enabled boolean NOT NULL DEFAULT true,
  group_id uuid REFERENCES device_groups (id) ON DELETE CASCADE,
  device_type text,
  agent_uid text,
  checks jsonb NOT NULL DEFAULT '[]'::jsonb,
  -- What the last reconcile found (so a profile never fails silently).
  devices_matched integer NOT NULL DEFAULT 0,
  checks_managed integer NOT NULL DEFAULT 0,
  conflicts jsonb NOT NULL DEFAULT '[]'::jsonb,
  last_applied_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (group_id IS NOT NULL OR device_type IS NOT NULL)
);
CREATE UNIQUE INDEX IF NOT EXISTS monitoring_profiles_name_key ON monitoring_profiles (lower(name));

-- A managed check remembers its profile and which of the profile's checks it is. No foreign
-- key on purpose: when a profile goes, the reconcile deletes its checks (resolving their
-- alerts), which ON DELETE SET NULL would have orphaned and CASCADE would have done silently.
ALTER TABLE service_checks ADD COLUMN IF NOT EXISTS profile_id uuid;
ALTER TABLE service_checks ADD COLUMN IF NOT EXISTS profile_check text;
CREATE UNIQUE INDEX IF NOT EXISTS service_checks_profile_key
  ON service_checks (profile_id, device_uid, profile_check) WHERE profile_id IS NOT NULL;

CREATE INDEX IF NOT EXISTS devices_group_idx ON devices (group_id) WHERE group_id IS NOT NULL;
