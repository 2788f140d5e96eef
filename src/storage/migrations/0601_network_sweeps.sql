-- Network sweeps: ICMP + TCP port probes over configured CIDRs, run by agents as poll jobs
-- (metadata.kind = 'sweep'); live hosts are reported through device ingestion.
CREATE TABLE IF NOT EXISTS network_sweeps (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  cidrs text[] NOT NULL,
  ports integer[] NOT NULL DEFAULT '{}',
  interval_seconds integer NOT NULL DEFAULT 3600 CHECK (interval_seconds > 0),
  rate_per_second integer NOT NULL DEFAULT 500 CHECK (rate_per_second > 0 AND rate_per_second <= 100000),
  "partition" text NOT NULL DEFAULT 'default',
  agent_uid text,
  enabled boolean NOT NULL DEFAULT true,
  next_run_at timestamptz,
  last_run_at timestamptz,
  last_summary jsonb NOT NULL DEFAULT '{}'::jsonb,
  inflight_job_id uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
