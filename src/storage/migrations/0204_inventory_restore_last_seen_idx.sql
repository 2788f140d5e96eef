-- An earlier revision of 0202 dropped devices_last_seen_idx; 0202 was then edited to keep it,
-- so a database migrated in between has no index for the default device order (40x slower
-- lists at 1M devices). Recreate it where it is missing (a no-op everywhere else).
CREATE INDEX IF NOT EXISTS devices_last_seen_idx ON devices (last_seen_time DESC);
