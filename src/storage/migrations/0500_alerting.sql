-- Alerting: alerts (lifecycle state machine in src/alerting/lifecycle.ts), stateful alert
-- rules with their engine state, event rules (log promotion), and the notification model
-- (channels, escalation policies/steps/step channels, routes, deliveries).

CREATE TABLE IF NOT EXISTS alerts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  title text NOT NULL,
  description text,
  severity text NOT NULL DEFAULT 'warning'
    CHECK (severity IN ('info', 'warning', 'critical', 'emergency')),
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'acknowledged', 'escalated', 'suppressed', 'resolved')),
  source_type text
    CHECK (source_type IN ('service_check', 'device', 'gateway', 'agent', 'event', 'system', 'external')),
  source_id text,
  service_check_id uuid,
  device_uid text,
  agent_uid text,
  event_id uuid,
  event_time timestamptz,
  metric_name text,
  metric_value double precision,
  threshold_value double precision,
  comparison text CHECK (comparison IN ('greater_than', 'less_than', 'equals', 'not_equals')),
  triggered_at timestamptz NOT NULL DEFAULT now(),
  acknowledged_at timestamptz,
  acknowledged_by text,
  acknowledged_by_user_id uuid,
  acknowledge_note text,
  resolved_at timestamptz,
  resolved_by text,
  resolution_note text,
  escalated_at timestamptz,
  escalation_level integer NOT NULL DEFAULT 0,
  escalation_reason text,
  suppressed_until timestamptz,
  snooze_until timestamptz,
  last_notification_at timestamptz,
  notification_count integer NOT NULL DEFAULT 0,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  tags text[] NOT NULL DEFAULT '{}'::text[],
  -- Identity of an incident opened by a rule ("<rule>|<group key>"); at most one open alert
  -- per key, so concurrent promotions of the same condition collapse into one alert.
  incident_key text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- List by severity (the JSON:API benchmark filters severity on 1M rows) in id or time order.
CREATE INDEX IF NOT EXISTS alerts_severity_id_idx ON alerts (severity, id);
CREATE INDEX IF NOT EXISTS alerts_severity_triggered_idx ON alerts (severity, triggered_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS alerts_triggered_idx ON alerts (triggered_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS alerts_status_triggered_idx ON alerts (status, triggered_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS alerts_service_check_idx ON alerts (service_check_id)
  WHERE service_check_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS alerts_device_uid_idx ON alerts (device_uid) WHERE device_uid IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS alerts_open_incident_key_idx ON alerts (incident_key)
  WHERE incident_key IS NOT NULL AND status IN ('pending', 'acknowledged', 'escalated');

-- Stateful alert rules: threshold of matching records over a sliding window (reference 7.1).
CREATE TABLE IF NOT EXISTS stateful_alert_rules (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  description text,
  enabled boolean NOT NULL DEFAULT true,
  priority integer NOT NULL DEFAULT 100,
  signal text NOT NULL DEFAULT 'log' CHECK (signal IN ('log', 'event')),
  match jsonb NOT NULL DEFAULT '{}'::jsonb,
  group_by text[] NOT NULL DEFAULT '{}'::text[],
  threshold integer NOT NULL DEFAULT 5 CHECK (threshold > 0),
  window_seconds integer NOT NULL DEFAULT 600 CHECK (window_seconds > 0),
  bucket_seconds integer NOT NULL DEFAULT 60 CHECK (bucket_seconds > 0),
  cooldown_seconds integer NOT NULL DEFAULT 300 CHECK (cooldown_seconds >= 0),
  renotify_seconds integer NOT NULL DEFAULT 21600 CHECK (renotify_seconds >= 0),
  event jsonb NOT NULL DEFAULT '{}'::jsonb,
  alert jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- Managed (seeded) rules such as k8s_node_not_ready.
  managed boolean NOT NULL DEFAULT false,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (window_seconds % bucket_seconds = 0)
);
CREATE INDEX IF NOT EXISTS stateful_alert_rules_active_idx ON stateful_alert_rules (priority, inserted_at)
  WHERE enabled;

-- Engine state per (rule, group key); never exposed over the API (spec 4.1 rule behaviour 5).
CREATE TABLE IF NOT EXISTS stateful_alert_rule_states (
  rule_id uuid NOT NULL REFERENCES stateful_alert_rules (id) ON DELETE CASCADE,
  group_key text NOT NULL,
  -- {"<bucket_start_unix>": count, ...}
  buckets jsonb NOT NULL DEFAULT '{}'::jsonb,
  alert_id uuid REFERENCES alerts (id) ON DELETE SET NULL,
  last_seen_at timestamptz,
  last_fired_at timestamptz,
  cooldown_until timestamptz,
  last_notification_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (rule_id, group_key)
);

CREATE TABLE IF NOT EXISTS stateful_alert_rule_history (
  id bigserial PRIMARY KEY,
  rule_id uuid NOT NULL REFERENCES stateful_alert_rules (id) ON DELETE CASCADE,
  group_key text NOT NULL,
  event_type text NOT NULL CHECK (event_type IN ('fire', 'resolve', 'cooldown', 'renotify', 'rollover', 'recover')),
  alert_id uuid,
  window_count integer,
  details jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS stateful_alert_rule_history_rule_idx
  ON stateful_alert_rule_history (rule_id, group_key, created_at DESC);

-- Event rules: promote matching logs to OCSF events (reference 7.2).
CREATE TABLE IF NOT EXISTS event_rules (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  description text,
  enabled boolean NOT NULL DEFAULT true,
  priority integer NOT NULL DEFAULT 100,
  source_type text NOT NULL DEFAULT 'log' CHECK (source_type IN ('log', 'metric')),
  source jsonb NOT NULL DEFAULT '{}'::jsonb,
  match jsonb NOT NULL DEFAULT '{}'::jsonb,
  event jsonb NOT NULL DEFAULT '{}'::jsonb,
  managed boolean NOT NULL DEFAULT false,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS event_rules_active_idx ON event_rules (priority, inserted_at) WHERE enabled;

-- Bumped on every event-rule change so other replicas drop their rule caches.
CREATE TABLE IF NOT EXISTS alerting_rule_versions (
  kind text PRIMARY KEY,
  version bigint NOT NULL DEFAULT 0
);
INSERT INTO alerting_rule_versions (kind, version) VALUES ('event_rules', 0), ('stateful_alert_rules', 0)
  ON CONFLICT (kind) DO NOTHING;

-- Notification channels: where a notification goes (webhook or email).
CREATE TABLE IF NOT EXISTS notification_channels (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  description text,
  provider text NOT NULL CHECK (provider IN ('webhook', 'email')),
  enabled boolean NOT NULL DEFAULT true,
  -- Provider settings without credentials (webhook: url, headers; email: to, from, smtp host/port).
  config jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- Credentials (never exposed): e.g. {"smtp_user": ..., "smtp_password": ..., "webhook_secret": ...}.
  secret_refs jsonb NOT NULL DEFAULT '{}'::jsonb,
  execution_route text NOT NULL DEFAULT 'control_plane' CHECK (execution_route IN ('control_plane', 'edge_agent')),
  agent_uid text,
  fallback_channel_id uuid REFERENCES notification_channels (id) ON DELETE SET NULL,
  fail_closed boolean NOT NULL DEFAULT false,
  rate_limit_per_minute integer CHECK (rate_limit_per_minute >= 1),
  max_attempts integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  health text NOT NULL DEFAULT 'unknown' CHECK (health IN ('unknown', 'healthy', 'degraded', 'failing')),
  last_success_at timestamptz,
  last_failure_at timestamptz,
  last_error text,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (execution_route <> 'edge_agent' OR agent_uid IS NOT NULL)
);

CREATE TABLE IF NOT EXISTS notification_escalation_policies (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  description text,
  enabled boolean NOT NULL DEFAULT true,
  repeat_count integer NOT NULL DEFAULT 0 CHECK (repeat_count >= 0),
  repeat_interval_seconds integer CHECK (repeat_interval_seconds >= 1),
  resolve_notifies boolean NOT NULL DEFAULT true,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (repeat_count = 0 OR repeat_interval_seconds IS NOT NULL)
);

CREATE TABLE IF NOT EXISTS notification_escalation_steps (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  policy_id uuid NOT NULL REFERENCES notification_escalation_policies (id) ON DELETE CASCADE,
  step_number integer NOT NULL CHECK (step_number >= 1),
  delay_seconds integer NOT NULL DEFAULT 0 CHECK (delay_seconds >= 0),
  condition text NOT NULL DEFAULT 'if_unacknowledged' CHECK (condition IN ('always', 'if_unacknowledged')),
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (policy_id, step_number)
);

CREATE TABLE IF NOT EXISTS notification_escalation_step_channels (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  step_id uuid NOT NULL REFERENCES notification_escalation_steps (id) ON DELETE CASCADE,
  channel_id uuid NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (step_id, channel_id)
);

CREATE TABLE IF NOT EXISTS notification_routes (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  description text,
  enabled boolean NOT NULL DEFAULT true,
  priority integer NOT NULL DEFAULT 100,
  match_expression jsonb NOT NULL DEFAULT '{}'::jsonb,
  escalation_policy_id uuid NOT NULL REFERENCES notification_escalation_policies (id) ON DELETE RESTRICT,
  schedule_id uuid,
  dedupe_key_template text,
  throttle_seconds integer CHECK (throttle_seconds >= 0),
  group_wait_seconds integer NOT NULL DEFAULT 0 CHECK (group_wait_seconds >= 0),
  group_interval_seconds integer CHECK (group_interval_seconds >= 0),
  "continue" boolean NOT NULL DEFAULT false,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS notification_routes_priority_idx ON notification_routes (priority, id) WHERE enabled;

-- One row per (alert, route) once the alert has been routed: the clock escalation steps run on.
CREATE TABLE IF NOT EXISTS notification_alert_routings (
  alert_id uuid NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
  route_id uuid NOT NULL REFERENCES notification_routes (id) ON DELETE CASCADE,
  policy_id uuid NOT NULL REFERENCES notification_escalation_policies (id) ON DELETE CASCADE,
  fired_at timestamptz NOT NULL,
  completed boolean NOT NULL DEFAULT false,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (alert_id, route_id)
);
CREATE INDEX IF NOT EXISTS notification_alert_routings_open_idx ON notification_alert_routings (fired_at)
  WHERE NOT completed;

-- Exactly one delivery per (alert, lifecycle reason, step, repeat, channel): routing is idempotent.
CREATE TABLE IF NOT EXISTS notification_deliveries (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  alert_id uuid NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
  route_id uuid REFERENCES notification_routes (id) ON DELETE SET NULL,
  policy_id uuid REFERENCES notification_escalation_policies (id) ON DELETE SET NULL,
  step_number integer NOT NULL DEFAULT 0,
  repeat_number integer NOT NULL DEFAULT 0,
  channel_id uuid REFERENCES notification_channels (id) ON DELETE SET NULL,
  originating_delivery_id uuid REFERENCES notification_deliveries (id) ON DELETE SET NULL,
  lifecycle_reason text NOT NULL CHECK (lifecycle_reason IN ('fire', 'renotify', 'escalate', 'resolve', 'failover')),
  dedupe_key text NOT NULL DEFAULT '',
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'dispatching', 'sent', 'failed', 'expired', 'cancelled', 'suppressed', 'skipped')),
  suppression_reason text,
  provider text,
  payload_format text,
  payload jsonb,
  alert_snapshot jsonb,
  attempts integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL DEFAULT 3,
  next_attempt_at timestamptz,
  last_error text,
  response_status integer,
  is_test boolean NOT NULL DEFAULT false,
  sent_at timestamptz,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS notification_deliveries_identity_idx
  ON notification_deliveries (alert_id, lifecycle_reason, step_number, repeat_number, channel_id, dedupe_key);
CREATE INDEX IF NOT EXISTS notification_deliveries_due_idx ON notification_deliveries (next_attempt_at)
  WHERE status IN ('pending', 'dispatching');
CREATE INDEX IF NOT EXISTS notification_deliveries_alert_idx ON notification_deliveries (alert_id);
