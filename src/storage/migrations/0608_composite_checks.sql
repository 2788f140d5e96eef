-- Composite checks (docs/decisions/0610-composite-checks.md): one verdict over other checks and metric thresholds,
-- evaluated by the leader on an interval and on demand. Each evaluation is one row of
-- composite_results (SRQL entity `composite_results`); the inputs' states travel with it.

CREATE TABLE IF NOT EXISTS composite_checks (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  slug text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  name text NOT NULL,
  description text,
  device_uid text,
  -- [{key, kind: check|metric, ...}] validated by src/monitoring/composite-inputs.ts.
  inputs jsonb NOT NULL DEFAULT '[]'::jsonb,
  rule text NOT NULL DEFAULT 'all_healthy' CHECK (rule IN ('all_healthy', 'any_healthy')),
  interval_seconds integer NOT NULL DEFAULT 60 CHECK (interval_seconds > 0),
  enabled boolean NOT NULL DEFAULT true,
  last_evaluated_at timestamptz,
  last_verdict text CHECK (last_verdict IN ('healthy', 'degraded', 'down', 'unknown')),
  next_run_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS composite_checks_slug_idx ON composite_checks (slug);
CREATE INDEX IF NOT EXISTS composite_checks_due_idx ON composite_checks (next_run_at) WHERE enabled;

CREATE TABLE IF NOT EXISTS composite_results (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  composite_id uuid NOT NULL REFERENCES composite_checks (id) ON DELETE CASCADE,
  check_slug text NOT NULL,
  check_name text NOT NULL,
  -- verdict: the rule over the inputs, a stale input counting as unknown;
  -- status: the same rule over the inputs' last known states, staleness ignored.
  verdict text NOT NULL CHECK (verdict IN ('healthy', 'degraded', 'down', 'unknown')),
  status text NOT NULL CHECK (status IN ('healthy', 'degraded', 'down', 'unknown')),
  message text,
  device_uid text,
  stale_inputs integer NOT NULL DEFAULT 0,
  inputs jsonb NOT NULL DEFAULT '[]'::jsonb,
  evaluated_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS composite_results_time_idx ON composite_results (evaluated_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS composite_results_check_idx ON composite_results (composite_id, evaluated_at DESC);
-- The device filter `composite.<slug>` reads the latest result of a slug for a device.
CREATE INDEX IF NOT EXISTS composite_results_device_idx
  ON composite_results (check_slug, device_uid, evaluated_at DESC);

-- One row per input of each result: what `stats:"count() as n by input_key"` groups.
CREATE OR REPLACE VIEW composite_result_inputs AS
  SELECT r.id, r.composite_id, r.check_slug, r.check_name, r.verdict, r.status, r.message,
         r.device_uid, r.stale_inputs, r.inputs, r.evaluated_at,
         i.value ->> 'key' AS input_key,
         i.value ->> 'status' AS input_value,
         COALESCE((i.value ->> 'stale')::boolean, false) AS input_stale
  FROM composite_results r CROSS JOIN LATERAL jsonb_array_elements(r.inputs) AS i(value);
