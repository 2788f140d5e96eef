-- Kernel tables shared by every domain.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Leader leases and small key/value state for background jobs (scheduler, cleanup).
CREATE TABLE IF NOT EXISTS netmon_kv (
  key text PRIMARY KEY,
  value jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
