-- OTLP ingest (issue 15, decision 0310): the type-specific part of a metric data point that
-- has no column of its own — exponential-histogram scale/zero count/positive and negative
-- buckets, summary quantiles — plus the point's start time, flags and instrumentation scope.
ALTER TABLE otel_metric_points ADD COLUMN IF NOT EXISTS details jsonb NOT NULL DEFAULT '{}'::jsonb;
