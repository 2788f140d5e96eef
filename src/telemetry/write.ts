import { randomUUID } from "node:crypto";
import { type BulkLoad, canBulkLoad, type Queryable } from "../storage/db.ts";
import { ident, join, raw, type SqlFragment, sql } from "../storage/sql.ts";

/**
 * Write helpers for the telemetry tables (migration 0300). Monitoring, alerting and ingest call
 * these instead of writing INSERTs of their own. Each takes a Queryable (the Db or an open
 * transaction) and plain row objects whose keys are column names; unknown keys are a
 * programming error and throw. Batches of COPY_MIN_ROWS or more rows of tables with an `id` are
 * bulk-loaded with COPY, their ids generated here (promotion needs them, and COPY returns
 * none); the rest go in batches of multi-row INSERTs.
 */

type Json = "jsonb";
type ColumnSpec = Record<string, Json | "text[]" | "bigint[]" | "double precision[]" | null>;

const TABLES = {
  logs: {
    id: null,
    timestamp: null,
    observed_timestamp: null,
    trace_id: null,
    span_id: null,
    severity_text: null,
    severity_number: null,
    body: null,
    event_name: null,
    service_name: null,
    service_version: null,
    service_instance: null,
    scope_name: null,
    scope_version: null,
    attributes: "jsonb",
    resource_attributes: "jsonb",
    device_id: null,
    gateway_id: null,
    agent_id: null,
    source: null,
    source_ip: null,
    host: null,
    facility: null,
    ingest_identity: null,
    ingest_agent_id: null,
    partition: null,
  },
  events: {
    id: null,
    time: null,
    event_id: null,
    class_uid: null,
    category_uid: null,
    type_uid: null,
    activity_id: null,
    activity_name: null,
    severity_id: null,
    severity: null,
    message: null,
    short_message: null,
    status: null,
    status_id: null,
    status_code: null,
    status_detail: null,
    log_level: null,
    log_name: null,
    log_provider: null,
    source: null,
    source_type: null,
    addon_id: null,
    trace_id: null,
    span_id: null,
    device_uid: null,
    host: null,
    log_id: null,
    metadata: "jsonb",
    unmapped: "jsonb",
    raw: "jsonb",
    partition: null,
  },
  otel_traces: {
    id: null,
    timestamp: null,
    trace_id: null,
    span_id: null,
    parent_span_id: null,
    name: null,
    kind: null,
    start_time_unix_nano: null,
    end_time_unix_nano: null,
    duration_ms: null,
    service_name: null,
    service_version: null,
    service_instance: null,
    scope_name: null,
    scope_version: null,
    status_code: null,
    status_message: null,
    attributes: "jsonb",
    resource_attributes: "jsonb",
    events: "jsonb",
    links: "jsonb",
    ingest_identity: null,
    ingest_agent_id: null,
    partition: null,
  },
  otel_metrics: {
    id: null,
    timestamp: null,
    trace_id: null,
    span_id: null,
    service_name: null,
    span_name: null,
    span_kind: null,
    metric_type: null,
    component: null,
    level: null,
    duration_ms: null,
    duration_seconds: null,
    http_method: null,
    http_route: null,
    http_status_code: null,
    grpc_service: null,
    grpc_method: null,
    grpc_status_code: null,
    is_slow: null,
    unit: null,
    partition: null,
  },
  otel_metric_points: {
    id: null,
    timestamp: null,
    metric_name: null,
    metric_type: null,
    description: null,
    unit: null,
    temporality: null,
    is_monotonic: null,
    service_name: null,
    value: null,
    count: null,
    sum: null,
    min: null,
    max: null,
    bucket_counts: "bigint[]",
    explicit_bounds: "double precision[]",
    details: "jsonb",
    attributes: "jsonb",
    resource_attributes: "jsonb",
    ingest_identity: null,
    ingest_agent_id: null,
    partition: null,
  },
  timeseries_metrics: {
    id: null,
    timestamp: null,
    gateway_id: null,
    agent_id: null,
    metric_name: null,
    metric_type: null,
    device_id: null,
    target_device_ip: null,
    if_index: null,
    value: null,
    unit: null,
    tags: "jsonb",
    metadata: "jsonb",
    partition: null,
  },
  cpu_metrics: {
    id: null,
    timestamp: null,
    gateway_id: null,
    agent_id: null,
    host_id: null,
    device_id: null,
    cluster: null,
    label: null,
    core_id: null,
    usage_percent: null,
    frequency_hz: null,
    partition: null,
  },
  cpu_cluster_metrics: {
    id: null,
    timestamp: null,
    gateway_id: null,
    agent_id: null,
    host_id: null,
    device_id: null,
    cluster: null,
    frequency_hz: null,
    partition: null,
  },
  memory_metrics: {
    id: null,
    timestamp: null,
    gateway_id: null,
    agent_id: null,
    host_id: null,
    device_id: null,
    usage_percent: null,
    total_bytes: null,
    used_bytes: null,
    available_bytes: null,
    partition: null,
  },
  disk_metrics: {
    id: null,
    timestamp: null,
    gateway_id: null,
    agent_id: null,
    host_id: null,
    device_id: null,
    mount_point: null,
    device_name: null,
    usage_percent: null,
    total_bytes: null,
    used_bytes: null,
    available_bytes: null,
    partition: null,
  },
  process_metrics: {
    id: null,
    timestamp: null,
    gateway_id: null,
    agent_id: null,
    host_id: null,
    device_id: null,
    pid: null,
    name: null,
    command_line: null,
    status: null,
    cpu_usage: null,
    memory_usage: null,
    start_time: null,
    partition: null,
  },
  service_status: {
    id: null,
    timestamp: null,
    service_check_id: null,
    device_uid: null,
    agent_id: null,
    gateway_id: null,
    service_name: null,
    service_type: null,
    available: null,
    status: null,
    response_time_ms: null,
    message: null,
    details: "jsonb",
    port: null,
    protocol: null,
    partition: null,
  },
  capacity_forecasts: {
    forecasted_at: null,
    resource_key: null,
    metric_name: null,
    horizon_seconds: null,
    resource_type: null,
    resource_id: null,
    resource_label: null,
    metric_class: null,
    horizon_ends_at: null,
    window_started_at: null,
    window_ended_at: null,
    sample_count: null,
    model: null,
    status: null,
    skip_reason: null,
    current_value: null,
    slope_per_second: null,
    intercept: null,
    projected_value: null,
    projected_exhaustion_at: null,
    exhaustion_threshold: null,
    confidence: null,
    lower_bound: null,
    upper_bound: null,
    metadata: "jsonb",
    partition: null,
  },
} satisfies Record<string, ColumnSpec>;

export type TelemetryTable = keyof typeof TABLES;
type Value = string | number | boolean | Date | null | undefined | unknown[] | Record<string, unknown>;
export type TelemetryRow<T extends TelemetryTable> = Partial<Record<keyof (typeof TABLES)[T], Value>>;

/** PostgreSQL allows 65535 parameters per statement. */
const MAX_PARAMS = 60_000;

function valueSql(cast: ColumnSpec[string], v: unknown): SqlFragment {
  if (cast === "jsonb") return sql`${v === undefined || v === null ? null : JSON.stringify(v)}::jsonb`;
  if (cast) return sql`${v ?? null}::${raw(cast)}`;
  return sql`${v ?? null}`;
}

/**
 * Insert rows into a telemetry table; returns the generated ids (in row order) for tables with
 * an id column. Columns missing from a row take their default (NOT NULL defaults included).
 */
export async function insertTelemetry<T extends TelemetryTable>(
  db: Queryable,
  table: T,
  rows: readonly TelemetryRow<T>[],
): Promise<string[]> {
  if (rows.length === 0) return [];
  const spec = TABLES[table] as ColumnSpec;
  const used = new Set<string>();
  for (const r of rows) {
    for (const [k, v] of Object.entries(r)) {
      if (!(k in spec)) throw new Error(`insertTelemetry: ${table} has no column '${k}'`);
      if (v !== undefined) used.add(k);
    }
  }
  if ("id" in spec && rows.length >= COPY_MIN_ROWS && canBulkLoad(db)) {
    return copyTelemetry(db, table, rows, used);
  }
  const columns = [...used];
  const ids: string[] = [];
  if (columns.length === 0) {
    for (const _ of rows) {
      const r = await db.one<{ id: string }>(
        sql`INSERT INTO ${ident(table)} DEFAULT VALUES RETURNING id::text AS id`,
      );
      if (r) ids.push(r.id);
    }
    return ids;
  }
  const perBatch = Math.max(1, Math.floor(MAX_PARAMS / columns.length));
  for (let i = 0; i < rows.length; i += perBatch) {
    const batch = rows.slice(i, i + perBatch);
    const values = batch.map((r) => {
      const rec = r as Record<string, unknown>;
      return sql`(${join(
        columns.map((c) => (rec[c] === undefined ? raw("DEFAULT") : valueSql(spec[c] ?? null, rec[c]))),
      )})`;
    });
    const res = await db.many<{ id: string }>(
      sql`INSERT INTO ${ident(table)} (${join(columns.map((c) => ident(c)))}) VALUES ${join(values)} RETURNING id::text AS id`,
    );
    ids.push(...res.map((r) => r.id));
  }
  return ids;
}

/**
 * Batches at least this large go by COPY. A COPY costs a fixed extra round trip over an INSERT:
 * on PostgreSQL 1 row took 1.27 ms by COPY vs 0.81 ms by INSERT, 10 rows 1.38 vs 1.06, 100 rows
 * 2.2 vs 5.6 (on PGlite: 0.80 vs 0.78, 0.78 vs 1.39, 2.8 vs 6.9), so the monitoring pipeline's
 * small batches stay on INSERT.
 */
export const COPY_MIN_ROWS = 32;

/**
 * COPY path. A column a row leaves undefined takes its default under INSERT; COPY has no
 * per-row DEFAULT, so rows are grouped by the columns they set and each group is one COPY
 * (mapped batches are uniform, so this is nearly always one group). Measured against the
 * multi-row INSERT in bench/telemetry/otlp-ingest.ts (BENCHMARKS.md, "Telemetry ingest").
 */
async function copyTelemetry(
  db: BulkLoad,
  table: TelemetryTable,
  rows: readonly Record<string, unknown>[],
  used: ReadonlySet<string>,
): Promise<string[]> {
  const spec = TABLES[table] as ColumnSpec;
  const ids = rows.map((r) => (typeof r.id === "string" ? r.id : randomUUID()));
  const groups = new Map<string, { columns: string[]; rows: unknown[][] }>();
  rows.forEach((r, i) => {
    const columns = ["id", ...[...used].filter((c) => c !== "id" && r[c] !== undefined)];
    const key = columns.join(",");
    let group = groups.get(key);
    if (!group) {
      group = { columns, rows: [] };
      groups.set(key, group);
    }
    group.rows.push(
      columns.map((c) => {
        if (c === "id") return ids[i];
        const v = r[c];
        return spec[c] === "jsonb" && v !== null ? JSON.stringify(v) : v;
      }),
    );
  });
  for (const group of groups.values()) await db.copyIn(table, group.columns, group.rows);
  return ids;
}

export type LogRow = TelemetryRow<"logs">;
export type EventRow = TelemetryRow<"events">;
export type ServiceStatusRow = TelemetryRow<"service_status">;
export type TimeseriesRow = TelemetryRow<"timeseries_metrics">;
export type SpanRow = TelemetryRow<"otel_traces">;

export const insertLogs = (db: Queryable, rows: readonly LogRow[]) => insertTelemetry(db, "logs", rows);
export const insertEvents = (db: Queryable, rows: readonly EventRow[]) => insertTelemetry(db, "events", rows);
export const insertServiceStatus = (db: Queryable, rows: readonly ServiceStatusRow[]) =>
  insertTelemetry(db, "service_status", rows);
export const insertTimeseries = (db: Queryable, rows: readonly TimeseriesRow[]) =>
  insertTelemetry(db, "timeseries_metrics", rows);
export const insertCpuMetrics = (db: Queryable, rows: readonly TelemetryRow<"cpu_metrics">[]) =>
  insertTelemetry(db, "cpu_metrics", rows);
export const insertMemoryMetrics = (db: Queryable, rows: readonly TelemetryRow<"memory_metrics">[]) =>
  insertTelemetry(db, "memory_metrics", rows);
export const insertDiskMetrics = (db: Queryable, rows: readonly TelemetryRow<"disk_metrics">[]) =>
  insertTelemetry(db, "disk_metrics", rows);
export const insertProcessMetrics = (db: Queryable, rows: readonly TelemetryRow<"process_metrics">[]) =>
  insertTelemetry(db, "process_metrics", rows);
export const insertOtelMetrics = (db: Queryable, rows: readonly TelemetryRow<"otel_metrics">[]) =>
  insertTelemetry(db, "otel_metrics", rows);
export const insertMetricPoints = (db: Queryable, rows: readonly TelemetryRow<"otel_metric_points">[]) =>
  insertTelemetry(db, "otel_metric_points", rows);
export const insertCapacityForecasts = (db: Queryable, rows: readonly TelemetryRow<"capacity_forecasts">[]) =>
  insertTelemetry(db, "capacity_forecasts", rows);

/** First key of the per-trace advisory locks taken while a trace's summary is recomputed. */
const TRACE_LOCK_SPACE = 7310;

/**
 * Insert spans and keep otel_trace_summaries current: one summary row per trace (root span,
 * duration from the earliest start to the latest end, span and error counts, services).
 */
export async function insertSpans(db: Queryable, rows: readonly SpanRow[]): Promise<string[]> {
  const ids = await insertTelemetry(db, "otel_traces", rows);
  const traceIds = [
    ...new Set(rows.map((r) => r.trace_id).filter((t): t is string => typeof t === "string")),
  ].sort();
  if (traceIds.length > 0) {
    // Spans of one trace arrive in concurrent requests (an SDK exports each span as it ends).
    // Without this lock two transactions each recount the trace without the other's
    // uncommitted span and the later summary misses one. Inside a transaction the lock is held
    // to commit, so the later refresh (a new READ COMMITTED snapshot) sees both; taken in
    // sorted order so two multi-trace batches cannot deadlock.
    await db.query(sql`
      SELECT pg_advisory_xact_lock(${TRACE_LOCK_SPACE}::int, hashtext(s.t))
      FROM (SELECT t FROM unnest(${traceIds}::text[]) AS t ORDER BY t) AS s`);
    await refreshTraceSummaries(db, traceIds);
  }
  return ids;
}

/** Recompute the summary rows of the given traces from their spans. */
export async function refreshTraceSummaries(db: Queryable, traceIds: readonly string[]): Promise<void> {
  await db.query(sql`
    INSERT INTO otel_trace_summaries AS s (
      trace_id, "timestamp", root_span_id, root_span_name, root_service_name, root_span_kind,
      start_time_unix_nano, end_time_unix_nano, duration_ms, status_code, service_set,
      span_count, error_count, "partition", updated_at)
    SELECT t.trace_id,
      min(t."timestamp"),
      (array_agg(t.span_id ORDER BY (t.parent_span_id IS NULL OR t.parent_span_id = '') DESC, t."timestamp"))[1],
      (array_agg(t.name ORDER BY (t.parent_span_id IS NULL OR t.parent_span_id = '') DESC, t."timestamp"))[1],
      (array_agg(t.service_name ORDER BY (t.parent_span_id IS NULL OR t.parent_span_id = '') DESC, t."timestamp"))[1],
      (array_agg(t.kind ORDER BY (t.parent_span_id IS NULL OR t.parent_span_id = '') DESC, t."timestamp"))[1],
      min(t.start_time_unix_nano),
      max(t.end_time_unix_nano),
      COALESCE(
        (max(t.end_time_unix_nano) - min(t.start_time_unix_nano))::double precision / 1e6,
        max(t.duration_ms),
        0),
      COALESCE(max(t.status_code), 0),
      COALESCE(array_agg(DISTINCT t.service_name) FILTER (WHERE t.service_name IS NOT NULL), '{}'),
      count(*)::int,
      (count(*) FILTER (WHERE t.status_code = 2))::int,
      min(t."partition"),
      now()
    FROM otel_traces t
    WHERE t.trace_id = ANY(${[...traceIds]}::text[])
    GROUP BY t.trace_id
    ON CONFLICT (trace_id) DO UPDATE SET
      "timestamp" = EXCLUDED."timestamp",
      root_span_id = EXCLUDED.root_span_id,
      root_span_name = EXCLUDED.root_span_name,
      root_service_name = EXCLUDED.root_service_name,
      root_span_kind = EXCLUDED.root_span_kind,
      start_time_unix_nano = EXCLUDED.start_time_unix_nano,
      end_time_unix_nano = EXCLUDED.end_time_unix_nano,
      duration_ms = EXCLUDED.duration_ms,
      status_code = EXCLUDED.status_code,
      service_set = EXCLUDED.service_set,
      span_count = EXCLUDED.span_count,
      error_count = EXCLUDED.error_count,
      "partition" = EXCLUDED."partition",
      updated_at = now()`);
}
