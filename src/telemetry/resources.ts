/**
 * Read-only telemetry collections over the tables of migration 0300 (src/telemetry owns the
 * writes). Bounded offset pagination is always applied (default 100, max 1000) with links to
 * later pages. Attributes the serving table does not store (hourly rollups keep no unit,
 * tags…) are declared `stored: false`: serialised as null, and a filter or sort on them is a
 * 400 naming the field. Rows are scoped to the caller's partitions.
 */

import type { AttributeDecl, AttributeType, QueryHelpers } from "../jsonapi/define.ts";
import { defineResource } from "../jsonapi/define.ts";
import { registerResource } from "../jsonapi/registry.ts";
import { join, type SqlFragment, sql } from "../storage/sql.ts";

type Spec = Record<string, AttributeType | AttributeDecl>;

function attrs(spec: Spec, unstored: readonly string[] = []): Record<string, AttributeDecl> {
  const out: Record<string, AttributeDecl> = {};
  for (const [name, t] of Object.entries(spec)) out[name] = typeof t === "string" ? { type: t } : t;
  for (const name of unstored) out[name] = { ...(out[name] ?? { type: "string" }), stored: false };
  return out;
}

function partitionScope(q: QueryHelpers): SqlFragment | null {
  const parts = q.actor?.partitions;
  if (!parts) return null;
  if (parts.length === 0) return sql`FALSE`;
  return sql`${q.col("partition")} IN (${join(parts.map((p) => sql`${p}`))})`;
}

function telemetry(opts: {
  type: string;
  base: string;
  table: string;
  permission: string;
  attributes: Record<string, AttributeDecl>;
  defaultSort: string;
  id?: readonly string[];
  description: string;
}) {
  return registerResource(
    defineResource({
      type: opts.type,
      base: opts.base,
      table: opts.table,
      tag: opts.type,
      description: opts.description,
      id: opts.id ? { column: opts.id, type: "string" } : { column: "id", type: "uuid" },
      attributes: opts.attributes,
      defaultSort: opts.defaultSort,
      readOnly: true,
      pagination: { styles: ["offset"], defaultLimit: 100, maxLimit: 1000, required: true },
      routes: { index: true, read: false },
      scope: partitionScope,
      policies: { read: { access: { permission: opts.permission } } },
    }),
  );
}

const json = { type: "object" } as const satisfies AttributeDecl;

export const logResource = telemetry({
  type: "log",
  base: "/logs",
  table: "logs",
  permission: "observability.logs.view",
  description: "OpenTelemetry log records (read-only)",
  defaultSort: "-timestamp",
  attributes: attrs({
    timestamp: "datetime",
    observed_timestamp: "datetime",
    trace_id: "string",
    span_id: "string",
    severity_text: "string",
    severity_number: "integer",
    body: "string",
    event_name: "string",
    service_name: "string",
    service_version: "string",
    service_instance: "string",
    scope_name: "string",
    scope_version: "string",
    attributes: json,
    resource_attributes: json,
    device_id: "string",
    gateway_id: "string",
    agent_id: "string",
    source: "string",
    source_ip: "string",
    host: "string",
    facility: "string",
    partition: "string",
    created_at: "datetime",
  }),
});

export const otelTraceResource = telemetry({
  type: "otel_trace",
  base: "/otel_traces",
  table: "otel_traces",
  permission: "observability.traces.view",
  description: "OpenTelemetry spans (read-only)",
  defaultSort: "-timestamp",
  attributes: attrs({
    timestamp: "datetime",
    trace_id: "string",
    span_id: "string",
    parent_span_id: "string",
    name: "string",
    kind: "integer",
    start_time_unix_nano: "integer",
    end_time_unix_nano: "integer",
    duration_ms: "float",
    service_name: "string",
    service_version: "string",
    service_instance: "string",
    scope_name: "string",
    scope_version: "string",
    status_code: "integer",
    status_message: "string",
    attributes: json,
    resource_attributes: json,
    events: { type: "array", items: "object" },
    links: { type: "array", items: "object" },
    partition: "string",
    created_at: "datetime",
  }),
});

export const otelTraceSummaryResource = telemetry({
  type: "otel_trace_summary",
  base: "/otel_trace_summaries",
  table: "otel_trace_summaries",
  permission: "observability.traces.view",
  description: "One row per trace (read-only)",
  defaultSort: "-timestamp",
  attributes: attrs(
    {
      timestamp: "datetime",
      trace_id: "string",
      root_span_id: "string",
      root_span_name: "string",
      root_service_name: "string",
      root_span_kind: "integer",
      start_time_unix_nano: "integer",
      end_time_unix_nano: "integer",
      duration_ms: "float",
      status_code: "integer",
      service_set: { type: "array", items: "string", filterable: false },
      span_count: "integer",
      error_count: "integer",
      partition: "string",
      updated_at: "datetime",
      root_span_status_message: "string",
    },
    ["root_span_status_message"],
  ),
});

export const otelMetricResource = telemetry({
  type: "otel_metric",
  base: "/otel_metrics",
  table: "otel_metrics",
  permission: "observability.metrics.view",
  description: "Span-derived request metrics (read-only)",
  defaultSort: "-timestamp",
  attributes: attrs({
    timestamp: "datetime",
    trace_id: "string",
    span_id: "string",
    service_name: "string",
    span_name: "string",
    span_kind: "string",
    metric_type: "string",
    component: "string",
    level: "string",
    duration_ms: "float",
    duration_seconds: "float",
    http_method: "string",
    http_route: "string",
    http_status_code: "string",
    grpc_service: "string",
    grpc_method: "string",
    grpc_status_code: "string",
    is_slow: "boolean",
    unit: "string",
    partition: "string",
    created_at: "datetime",
  }),
});

export const otelMetricPointResource = telemetry({
  type: "otel_metric_point",
  base: "/otel_metric_points",
  table: "otel_metric_points",
  permission: "observability.metrics.view",
  description: "OTLP metric data points (read-only)",
  defaultSort: "-timestamp",
  attributes: attrs({
    timestamp: "datetime",
    metric_name: "string",
    metric_type: "string",
    description: "string",
    unit: "string",
    temporality: "string",
    is_monotonic: "boolean",
    service_name: "string",
    value: "float",
    count: "integer",
    sum: "float",
    min: "float",
    max: "float",
    bucket_counts: { type: "array", items: "integer", filterable: false },
    explicit_bounds: { type: "array", items: "float", filterable: false },
    details: json,
    attributes: json,
    resource_attributes: json,
    partition: "string",
    created_at: "datetime",
  }),
});

export const serviceStatusResource = telemetry({
  type: "service_status",
  base: "/service_status",
  table: "service_status",
  permission: "services.view",
  description: "Service check results (read-only)",
  defaultSort: "-timestamp",
  attributes: attrs({
    timestamp: "datetime",
    service_check_id: "uuid",
    device_uid: "string",
    agent_id: "string",
    gateway_id: "string",
    service_name: "string",
    service_type: "string",
    available: "boolean",
    status: "string",
    response_time_ms: "float",
    message: "string",
    details: json,
    port: "integer",
    protocol: "string",
    partition: "string",
    created_at: "datetime",
  }),
});

const TIMESERIES = {
  timestamp: "datetime",
  gateway_id: "string",
  agent_id: "string",
  metric_name: "string",
  metric_type: "string",
  device_id: "string",
  target_device_ip: "string",
  if_index: "integer",
  value: "float",
  unit: "string",
  tags: json,
  metadata: json,
  partition: "string",
  created_at: "datetime",
} as const satisfies Spec;

export const timeseriesMetricResource = telemetry({
  type: "timeseries_metric",
  base: "/timeseries_metrics",
  table: "timeseries_metrics",
  permission: "observability.metrics.view",
  description: "Device time series (read-only)",
  defaultSort: "-timestamp",
  attributes: attrs(TIMESERIES),
});

const HOURLY = {
  bucket: "datetime",
  device_id: "string",
  metric_name: "string",
  metric_type: "string",
  gateway_id: "string",
  agent_id: "string",
  partition: "string",
  avg_value: "float",
  min_value: "float",
  max_value: "float",
  sum_value: "float",
  sample_count: "integer",
  // Kept by the raw series, not by the hourly rollup:
  unit: "string",
  target_device_ip: "string",
  tags: json,
} as const satisfies Spec;

export const timeseriesHourlyResource = telemetry({
  type: "timeseries_metric_hourly",
  base: "/timeseries_metrics_hourly",
  table: "timeseries_metrics_hourly",
  permission: "observability.metrics.view",
  description: "Hourly rollup of device time series (read-only)",
  defaultSort: "-bucket",
  attributes: attrs(HOURLY, ["unit", "target_device_ip", "tags"]),
});

export const timeseriesInterfaceHourlyResource = telemetry({
  type: "timeseries_metric_interface_hourly",
  base: "/timeseries_metrics_interface_hourly",
  table: "timeseries_metrics_interface_hourly",
  permission: "observability.metrics.view",
  description: "Hourly rollup of interface counters (read-only)",
  defaultSort: "-bucket",
  attributes: attrs({ ...HOURLY, if_index: "integer" }, ["unit", "target_device_ip", "tags"]),
});

export const otelMetricPointHourlyResource = telemetry({
  type: "otel_metric_point_hourly",
  base: "/otel_metric_points_hourly",
  table: "otel_metric_points_hourly",
  permission: "observability.metrics.view",
  description: "Hourly rollup of OTLP metric points per series (read-only)",
  defaultSort: "-bucket",
  attributes: attrs({
    bucket: "datetime",
    metric_name: "string",
    metric_type: "string",
    service_name: "string",
    attributes: json,
    temporality: "string",
    unit: "string",
    avg_value: "float",
    min_value: "float",
    max_value: "float",
    sum_value: "float",
    last_value: "float",
    count_total: "integer",
    sum_total: "float",
    sample_count: "integer",
    partition: "string",
  }),
});

export const capacityForecastResource = telemetry({
  type: "capacity_forecast",
  base: "/capacity_forecasts",
  table: "capacity_forecasts",
  permission: "observability.metrics.view",
  description: "Capacity forecasts; composite opaque id (read-only)",
  defaultSort: "-forecasted_at",
  id: ["forecasted_at", "resource_key", "metric_name", "horizon_seconds"],
  attributes: attrs({
    forecasted_at: "datetime",
    resource_key: "string",
    metric_name: "string",
    horizon_seconds: "integer",
    resource_type: "string",
    resource_id: "string",
    resource_label: "string",
    metric_class: "string",
    horizon_ends_at: "datetime",
    window_started_at: "datetime",
    window_ended_at: "datetime",
    sample_count: "integer",
    model: "string",
    status: { type: "enum", values: ["projected", "skipped"] },
    skip_reason: "string",
    current_value: "float",
    slope_per_second: "float",
    intercept: "float",
    projected_value: "float",
    projected_exhaustion_at: "datetime",
    exhaustion_threshold: "float",
    confidence: "float",
    lower_bound: "float",
    upper_bound: "float",
    metadata: json,
    partition: "string",
    inserted_at: "datetime",
    updated_at: "datetime",
  }),
});
