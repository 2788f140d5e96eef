-- Monitoring: polling schedules, service checks, poll jobs (reference §2.3, §8.1, §8.2; spec §2.2).

CREATE TABLE IF NOT EXISTS polling_schedules (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  description text,
  schedule_type text NOT NULL DEFAULT 'interval'
    CHECK (schedule_type IN ('interval', 'cron', 'manual')),
  interval_seconds integer,
  cron_expression text,
  assignment_mode text NOT NULL DEFAULT 'any'
    CHECK (assignment_mode IN ('any', 'partition', 'domain', 'specific')),
  assigned_gateway_id text,
  assigned_partition_id uuid,
  assigned_domain text,
  enabled boolean NOT NULL DEFAULT true,
  priority integer NOT NULL DEFAULT 0,
  max_concurrent integer NOT NULL DEFAULT 10,
  timeout_seconds integer NOT NULL DEFAULT 60,
  last_executed_at timestamptz,
  last_result text CHECK (last_result IN ('success', 'partial', 'failed', 'timeout')),
  last_check_count integer,
  last_success_count integer,
  last_failure_count integer,
  -- Schedules the scheduler creates for checks without an explicit schedule ("auto:60s").
  is_automatic boolean NOT NULL DEFAULT false,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT polling_schedules_interval_positive
    CHECK (schedule_type <> 'interval' OR (interval_seconds IS NOT NULL AND interval_seconds > 0))
);
CREATE UNIQUE INDEX IF NOT EXISTS polling_schedules_name_idx ON polling_schedules (name);

CREATE TABLE IF NOT EXISTS service_checks (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  description text,
  check_type text NOT NULL
    CHECK (check_type IN ('ping', 'http', 'tcp', 'snmp', 'grpc', 'dns', 'mtr', 'custom')),
  target text NOT NULL,
  port integer CHECK (port IS NULL OR (port >= 0 AND port <= 65535)),
  interval_seconds integer NOT NULL DEFAULT 60 CHECK (interval_seconds > 0),
  timeout_seconds integer NOT NULL DEFAULT 10 CHECK (timeout_seconds > 0),
  retries integer NOT NULL DEFAULT 3 CHECK (retries >= 0),
  config jsonb NOT NULL DEFAULT '{}'::jsonb,
  warning_threshold_ms integer,
  critical_threshold_ms integer,
  agent_uid text,
  device_uid text,
  enabled boolean NOT NULL DEFAULT true,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  schedule_id uuid REFERENCES polling_schedules (id) ON DELETE SET NULL,
  last_check_at timestamptz,
  last_result text CHECK (last_result IN ('success', 'warning', 'critical', 'unknown', 'error')),
  last_response_time_ms integer,
  last_error text,
  consecutive_failures integer NOT NULL DEFAULT 0,
  -- Scheduler bookkeeping (not API attributes): the next due time, spread with jitter, and
  -- the poll job currently carrying the check (a check is never in two jobs at once).
  next_run_at timestamptz,
  inflight_job_id uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS service_checks_due_idx ON service_checks (next_run_at) WHERE enabled;
CREATE INDEX IF NOT EXISTS service_checks_failing_idx ON service_checks (consecutive_failures)
  WHERE consecutive_failures > 0;
CREATE INDEX IF NOT EXISTS service_checks_schedule_idx ON service_checks (schedule_id);

CREATE TABLE IF NOT EXISTS poll_jobs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  schedule_id uuid NOT NULL REFERENCES polling_schedules (id) ON DELETE CASCADE,
  schedule_name text,
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'dispatching', 'running', 'completed', 'failed', 'timeout', 'cancelled')),
  agent_id text,
  gateway_id text,
  check_count integer DEFAULT 0,
  check_ids uuid[] DEFAULT '{}',
  success_count integer DEFAULT 0,
  failure_count integer DEFAULT 0,
  priority integer DEFAULT 0,
  retry_count integer DEFAULT 0,
  max_retries integer DEFAULT 3,
  timeout_seconds integer DEFAULT 60,
  duration_ms integer,
  dispatched_at timestamptz,
  started_at timestamptz,
  completed_at timestamptz,
  error_code text,
  error_message text,
  results jsonb DEFAULT '[]'::jsonb,
  metadata jsonb DEFAULT '{}'::jsonb,
  -- Internal: the agent the job's checks are pinned to (null = any agent), and the earliest
  -- time a (retried) job may be claimed (backoff).
  target_agent_uid text,
  available_at timestamptz NOT NULL DEFAULT now(),
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS poll_jobs_claim_idx ON poll_jobs (priority DESC, available_at)
  WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS poll_jobs_active_idx ON poll_jobs (status, started_at)
  WHERE status IN ('dispatching', 'running');
CREATE INDEX IF NOT EXISTS poll_jobs_schedule_idx ON poll_jobs (schedule_id, inserted_at DESC);
CREATE INDEX IF NOT EXISTS poll_jobs_completed_idx ON poll_jobs (completed_at)
  WHERE completed_at IS NOT NULL;
