-- Silences and maintenance windows (issue 13, decision 0500): while a silence is active, the
-- notifications of the alerts it matches are recorded as suppressed instead of sent.
CREATE TABLE IF NOT EXISTS alert_silences (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- A route match expression over alert.* and device.* (never empty: see the resource).
  matchers jsonb NOT NULL,
  starts_at timestamptz NOT NULL DEFAULT now(),
  ends_at timestamptz NOT NULL,
  comment text NOT NULL,
  created_by text,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (ends_at > starts_at)
);
CREATE INDEX IF NOT EXISTS alert_silences_ends_idx ON alert_silences (ends_at);
