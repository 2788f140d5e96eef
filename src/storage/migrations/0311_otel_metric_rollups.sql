-- Hourly rollups of OTLP metric points (issue 15 item 4, decision 0310), so long-range charts
-- read one row per series and hour. A series is (metric, type, service, attribute set); the
-- attribute set is kept whole and keyed by its md5. For gauge/sum points: avg/min/max/sum/last
-- of `value`; for histograms and summaries: count and sum over the hour (delta points are
-- added, cumulative points keep the hour's highest, i.e. latest, total).
CREATE TABLE IF NOT EXISTS otel_metric_points_hourly (
  id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  bucket timestamptz NOT NULL,
  metric_name text NOT NULL,
  metric_type text NOT NULL DEFAULT '',
  service_name text NOT NULL DEFAULT '',
  attributes_hash text NOT NULL,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  temporality text,
  unit text,
  "partition" text NOT NULL DEFAULT 'default',
  avg_value double precision,
  min_value double precision,
  max_value double precision,
  sum_value double precision,
  last_value double precision,
  count_total bigint,
  sum_total double precision,
  sample_count bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (bucket, metric_name, metric_type, service_name, attributes_hash)
);
CREATE INDEX IF NOT EXISTS otel_metric_points_hourly_bucket_idx ON otel_metric_points_hourly (bucket DESC, id DESC);
CREATE INDEX IF NOT EXISTS otel_metric_points_hourly_name_idx ON otel_metric_points_hourly (metric_name, bucket DESC);
