-- Telemetry tables (owned by src/telemetry, queried by SRQL in src/srql).
-- Column names follow the reference catalog (serviceradar-facts §1.8/§1.11 and §3.2).
-- Every table has a unique `id` so SRQL keyset cursors have a tie-breaker, and a
-- `partition` column so rows can be scoped to the partitions an actor may see.

-- OpenTelemetry log records.
CREATE TABLE IF NOT EXISTS logs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  observed_timestamp timestamptz,
  trace_id text,
  span_id text,
  severity_text text,
  severity_number integer,
  body text,
  event_name text,
  service_name text,
  service_version text,
  service_instance text,
  scope_name text,
  scope_version text,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  resource_attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  device_id text,
  gateway_id text,
  agent_id text,
  source text,
  source_ip text,
  host text,
  facility text,
  ingest_identity text,
  ingest_agent_id text,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS logs_timestamp_idx ON logs ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS logs_service_time_idx ON logs (service_name, "timestamp" DESC);
CREATE INDEX IF NOT EXISTS logs_severity_time_idx ON logs (severity_text, "timestamp" DESC);
CREATE INDEX IF NOT EXISTS logs_device_time_idx ON logs (device_id, "timestamp" DESC);
CREATE INDEX IF NOT EXISTS logs_trace_idx ON logs (trace_id);
CREATE INDEX IF NOT EXISTS logs_body_trgm_idx ON logs USING gin (body gin_trgm_ops);

-- OCSF events (promoted logs, internal events, state changes).
CREATE TABLE IF NOT EXISTS events (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "time" timestamptz NOT NULL,
  event_id text,
  class_uid integer NOT NULL DEFAULT 1008,
  category_uid integer NOT NULL DEFAULT 1,
  type_uid bigint NOT NULL DEFAULT 100801,
  activity_id integer NOT NULL DEFAULT 1,
  activity_name text,
  severity_id integer NOT NULL DEFAULT 1,
  severity text,
  message text,
  short_message text,
  status text,
  status_id integer,
  status_code text,
  status_detail text,
  log_level text,
  log_name text,
  log_provider text,
  source text,
  source_type text,
  addon_id text,
  trace_id text,
  span_id text,
  device_uid text,
  host text,
  log_id uuid,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  unmapped jsonb NOT NULL DEFAULT '{}'::jsonb,
  raw jsonb,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS events_time_idx ON events ("time" DESC, id DESC);
CREATE INDEX IF NOT EXISTS events_severity_time_idx ON events (severity_id, "time" DESC);
CREATE INDEX IF NOT EXISTS events_device_time_idx ON events (device_uid, "time" DESC);
CREATE INDEX IF NOT EXISTS events_log_id_idx ON events (log_id);
CREATE INDEX IF NOT EXISTS events_message_trgm_idx ON events USING gin (message gin_trgm_ops);

-- OpenTelemetry spans.
CREATE TABLE IF NOT EXISTS otel_traces (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  trace_id text NOT NULL,
  span_id text NOT NULL,
  parent_span_id text,
  name text,
  kind integer,
  start_time_unix_nano bigint,
  end_time_unix_nano bigint,
  duration_ms double precision,
  service_name text,
  service_version text,
  service_instance text,
  scope_name text,
  scope_version text,
  status_code integer,
  status_message text,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  resource_attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  events jsonb NOT NULL DEFAULT '[]'::jsonb,
  links jsonb NOT NULL DEFAULT '[]'::jsonb,
  ingest_identity text,
  ingest_agent_id text,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS otel_traces_timestamp_idx ON otel_traces ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS otel_traces_trace_idx ON otel_traces (trace_id, span_id);
CREATE INDEX IF NOT EXISTS otel_traces_service_time_idx ON otel_traces (service_name, "timestamp" DESC);

-- One row per trace, maintained by the span writer (src/telemetry/write.ts).
CREATE TABLE IF NOT EXISTS otel_trace_summaries (
  id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  trace_id text PRIMARY KEY,
  "timestamp" timestamptz NOT NULL,
  root_span_id text,
  root_span_name text,
  root_service_name text,
  root_span_kind integer,
  start_time_unix_nano bigint,
  end_time_unix_nano bigint,
  duration_ms double precision NOT NULL DEFAULT 0,
  status_code integer NOT NULL DEFAULT 0,
  service_set text[] NOT NULL DEFAULT '{}',
  span_count integer NOT NULL DEFAULT 0,
  error_count integer NOT NULL DEFAULT 0,
  "partition" text NOT NULL DEFAULT 'default',
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS otel_trace_summaries_timestamp_idx ON otel_trace_summaries ("timestamp" DESC, id DESC);

-- Span-derived request metrics.
CREATE TABLE IF NOT EXISTS otel_metrics (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  trace_id text,
  span_id text,
  service_name text,
  span_name text,
  span_kind text,
  metric_type text,
  component text,
  level text,
  duration_ms double precision,
  duration_seconds double precision,
  http_method text,
  http_route text,
  http_status_code text,
  grpc_service text,
  grpc_method text,
  grpc_status_code text,
  is_slow boolean NOT NULL DEFAULT false,
  unit text,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS otel_metrics_timestamp_idx ON otel_metrics ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS otel_metrics_service_time_idx ON otel_metrics (service_name, "timestamp" DESC);

-- OTLP metric data points.
CREATE TABLE IF NOT EXISTS otel_metric_points (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  metric_name text NOT NULL,
  metric_type text,
  description text,
  unit text,
  temporality text,
  is_monotonic boolean,
  service_name text,
  value double precision,
  count bigint,
  sum double precision,
  min double precision,
  max double precision,
  bucket_counts bigint[],
  explicit_bounds double precision[],
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  resource_attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  ingest_identity text,
  ingest_agent_id text,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS otel_metric_points_timestamp_idx ON otel_metric_points ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS otel_metric_points_name_time_idx ON otel_metric_points (metric_name, "timestamp" DESC);

-- Generic device time series (ICMP latency, SNMP counters, interface counters...).
CREATE TABLE IF NOT EXISTS timeseries_metrics (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  gateway_id text,
  agent_id text,
  metric_name text NOT NULL,
  metric_type text NOT NULL DEFAULT 'gauge',
  device_id text,
  target_device_ip text,
  if_index integer,
  value double precision NOT NULL,
  unit text,
  tags jsonb NOT NULL DEFAULT '{}'::jsonb,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS timeseries_metrics_timestamp_idx ON timeseries_metrics ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS timeseries_metrics_device_time_idx ON timeseries_metrics (device_id, metric_name, "timestamp" DESC);
CREATE INDEX IF NOT EXISTS timeseries_metrics_name_time_idx ON timeseries_metrics (metric_name, "timestamp" DESC);

-- Hourly rollups (filled by src/telemetry/rollup.ts; plain tables, no TimescaleDB).
CREATE TABLE IF NOT EXISTS timeseries_metrics_hourly (
  id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  bucket timestamptz NOT NULL,
  device_id text NOT NULL DEFAULT '',
  metric_name text NOT NULL,
  metric_type text NOT NULL DEFAULT 'gauge',
  gateway_id text,
  agent_id text,
  "partition" text NOT NULL DEFAULT 'default',
  avg_value double precision,
  min_value double precision,
  max_value double precision,
  sum_value double precision,
  sample_count bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (bucket, device_id, metric_name, metric_type)
);
CREATE INDEX IF NOT EXISTS timeseries_metrics_hourly_bucket_idx ON timeseries_metrics_hourly (bucket DESC, id DESC);

CREATE TABLE IF NOT EXISTS timeseries_metrics_interface_hourly (
  id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  bucket timestamptz NOT NULL,
  device_id text NOT NULL DEFAULT '',
  if_index integer NOT NULL DEFAULT 0,
  metric_name text NOT NULL,
  metric_type text NOT NULL DEFAULT 'gauge',
  gateway_id text,
  agent_id text,
  "partition" text NOT NULL DEFAULT 'default',
  avg_value double precision,
  min_value double precision,
  max_value double precision,
  sum_value double precision,
  sample_count bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (bucket, device_id, if_index, metric_name, metric_type)
);
CREATE INDEX IF NOT EXISTS timeseries_metrics_interface_hourly_bucket_idx ON timeseries_metrics_interface_hourly (bucket DESC, id DESC);

-- Host metrics (sysmon).
CREATE TABLE IF NOT EXISTS cpu_metrics (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  gateway_id text,
  agent_id text,
  host_id text,
  device_id text,
  cluster text,
  label text,
  core_id integer,
  usage_percent double precision,
  frequency_hz double precision,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS cpu_metrics_timestamp_idx ON cpu_metrics ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS cpu_metrics_device_time_idx ON cpu_metrics (device_id, "timestamp" DESC);

CREATE TABLE IF NOT EXISTS cpu_cluster_metrics (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  gateway_id text,
  agent_id text,
  host_id text,
  device_id text,
  cluster text NOT NULL,
  frequency_hz double precision,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS cpu_cluster_metrics_timestamp_idx ON cpu_cluster_metrics ("timestamp" DESC, id DESC);

CREATE TABLE IF NOT EXISTS memory_metrics (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  gateway_id text,
  agent_id text,
  host_id text,
  device_id text,
  usage_percent double precision,
  total_bytes bigint,
  used_bytes bigint,
  available_bytes bigint,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS memory_metrics_timestamp_idx ON memory_metrics ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS memory_metrics_device_time_idx ON memory_metrics (device_id, "timestamp" DESC);

CREATE TABLE IF NOT EXISTS disk_metrics (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  gateway_id text,
  agent_id text,
  host_id text,
  device_id text,
  mount_point text,
  device_name text,
  usage_percent double precision,
  total_bytes bigint,
  used_bytes bigint,
  available_bytes bigint,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS disk_metrics_timestamp_idx ON disk_metrics ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS disk_metrics_device_time_idx ON disk_metrics (device_id, "timestamp" DESC);

CREATE TABLE IF NOT EXISTS process_metrics (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  gateway_id text,
  agent_id text,
  host_id text,
  device_id text,
  pid integer,
  name text,
  command_line text,
  status text,
  cpu_usage double precision,
  memory_usage bigint,
  start_time text,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS process_metrics_timestamp_idx ON process_metrics ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS process_metrics_device_time_idx ON process_metrics (device_id, "timestamp" DESC);

-- Hourly host-metric rollups.
CREATE TABLE IF NOT EXISTS cpu_metrics_hourly (
  id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  bucket timestamptz NOT NULL,
  device_id text NOT NULL DEFAULT '',
  host_id text NOT NULL DEFAULT '',
  core_id integer NOT NULL DEFAULT -1,
  gateway_id text,
  agent_id text,
  "partition" text NOT NULL DEFAULT 'default',
  avg_usage double precision,
  max_usage double precision,
  min_usage double precision,
  avg_frequency_hz double precision,
  sample_count bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (bucket, device_id, host_id, core_id)
);
CREATE INDEX IF NOT EXISTS cpu_metrics_hourly_bucket_idx ON cpu_metrics_hourly (bucket DESC, id DESC);

CREATE TABLE IF NOT EXISTS memory_metrics_hourly (
  id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  bucket timestamptz NOT NULL,
  device_id text NOT NULL DEFAULT '',
  host_id text NOT NULL DEFAULT '',
  gateway_id text,
  agent_id text,
  "partition" text NOT NULL DEFAULT 'default',
  avg_usage double precision,
  max_usage double precision,
  avg_used_bytes double precision,
  max_used_bytes bigint,
  total_bytes bigint,
  sample_count bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (bucket, device_id, host_id)
);
CREATE INDEX IF NOT EXISTS memory_metrics_hourly_bucket_idx ON memory_metrics_hourly (bucket DESC, id DESC);

CREATE TABLE IF NOT EXISTS disk_metrics_hourly (
  id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  bucket timestamptz NOT NULL,
  device_id text NOT NULL DEFAULT '',
  host_id text NOT NULL DEFAULT '',
  mount_point text NOT NULL DEFAULT '',
  gateway_id text,
  agent_id text,
  "partition" text NOT NULL DEFAULT 'default',
  avg_usage double precision,
  max_usage double precision,
  avg_used_bytes double precision,
  max_used_bytes bigint,
  total_bytes bigint,
  sample_count bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (bucket, device_id, host_id, mount_point)
);
CREATE INDEX IF NOT EXISTS disk_metrics_hourly_bucket_idx ON disk_metrics_hourly (bucket DESC, id DESC);

CREATE TABLE IF NOT EXISTS process_metrics_hourly (
  id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  bucket timestamptz NOT NULL,
  device_id text NOT NULL DEFAULT '',
  host_id text NOT NULL DEFAULT '',
  name text NOT NULL DEFAULT '',
  gateway_id text,
  agent_id text,
  "partition" text NOT NULL DEFAULT 'default',
  avg_cpu_usage double precision,
  max_cpu_usage double precision,
  avg_memory_usage double precision,
  max_memory_usage bigint,
  sample_count bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (bucket, device_id, host_id, name)
);
CREATE INDEX IF NOT EXISTS process_metrics_hourly_bucket_idx ON process_metrics_hourly (bucket DESC, id DESC);

-- Service check results (one row per execution). SRQL entity `services`.
CREATE TABLE IF NOT EXISTS service_status (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  "timestamp" timestamptz NOT NULL,
  service_check_id uuid,
  device_uid text,
  agent_id text,
  gateway_id text,
  service_name text NOT NULL,
  service_type text NOT NULL,
  available boolean NOT NULL,
  status text NOT NULL,
  response_time_ms double precision,
  message text,
  details jsonb NOT NULL DEFAULT '{}'::jsonb,
  port integer,
  protocol text,
  "partition" text NOT NULL DEFAULT 'default',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS service_status_timestamp_idx ON service_status ("timestamp" DESC, id DESC);
CREATE INDEX IF NOT EXISTS service_status_check_time_idx ON service_status (service_check_id, "timestamp" DESC);
CREATE INDEX IF NOT EXISTS service_status_device_time_idx ON service_status (device_uid, "timestamp" DESC);
CREATE INDEX IF NOT EXISTS service_status_type_time_idx ON service_status (service_type, "timestamp" DESC);

-- Capacity forecasts (one row per resource/metric/horizon per forecast run).
CREATE TABLE IF NOT EXISTS capacity_forecasts (
  id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  forecasted_at timestamptz NOT NULL,
  resource_key text NOT NULL,
  metric_name text NOT NULL,
  horizon_seconds bigint NOT NULL,
  resource_type text,
  resource_id text,
  resource_label text,
  metric_class text,
  horizon_ends_at timestamptz,
  window_started_at timestamptz,
  window_ended_at timestamptz,
  sample_count integer NOT NULL DEFAULT 0,
  model text NOT NULL DEFAULT 'linear',
  status text NOT NULL DEFAULT 'projected',
  skip_reason text,
  current_value double precision,
  slope_per_second double precision,
  intercept double precision,
  projected_value double precision,
  projected_exhaustion_at timestamptz,
  exhaustion_threshold double precision,
  confidence double precision,
  lower_bound double precision,
  upper_bound double precision,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  "partition" text NOT NULL DEFAULT 'default',
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (forecasted_at, resource_key, metric_name, horizon_seconds)
);
CREATE INDEX IF NOT EXISTS capacity_forecasts_exhaustion_idx ON capacity_forecasts (projected_exhaustion_at ASC, id);
CREATE INDEX IF NOT EXISTS capacity_forecasts_forecasted_idx ON capacity_forecasts (forecasted_at DESC, id DESC);
