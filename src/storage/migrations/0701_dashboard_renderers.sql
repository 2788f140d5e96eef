-- Renderer bytes in the database, content-addressed (decision 0710): every replica can serve a
-- renderer another one received, and backups and `netmon db copy` carry them. The file under
-- the data directory is now only a local cache, rebuilt from here when missing.
CREATE TABLE IF NOT EXISTS dashboard_renderers (
  content_hash text PRIMARY KEY,
  bytes bytea NOT NULL,
  size bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
