-- Device availability derived from its checks (issue 13, decision 0600): when it last changed
-- and why, so an operator sees "down since 10:42: ping core-sw-1 critical (timeout)".
ALTER TABLE devices ADD COLUMN IF NOT EXISTS availability_changed_at timestamptz;
ALTER TABLE devices ADD COLUMN IF NOT EXISTS availability_reason text;
