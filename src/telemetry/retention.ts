import type { Queryable } from "../storage/db.ts";
import { ident, sql } from "../storage/sql.ts";
import { dropExpiredPartitions, PARTITIONED_TABLES } from "./partitions.ts";

/**
 * Telemetry retention: rows older than their class's retention are removed by the leader's
 * hourly pass. On the time-partitioned raw tables (decision 0320) every daily partition that
 * lies wholly before the cutoff is dropped; what remains expired (the day the cutoff falls in,
 * and old rows in the DEFAULT partition) and the plain tables are deleted in bounded batches
 * (each a short statement, so ingest and queries on PGlite's single connection are never
 * blocked for long). The hourly rollups outlive the raw rows, so charts over long ranges keep
 * working after the raw points are gone.
 */
export type RetentionClass = "metrics" | "rollups" | "logs";

export interface RetentionDays {
  metricsDays: number;
  rollupDays: number;
  logDays: number;
}

/** Every retained telemetry table (partitioned or not), its time column and retention class. */
export const RETAINED_TABLES: readonly { table: string; column: string; class: RetentionClass }[] = [
  { table: "timeseries_metrics", column: "timestamp", class: "metrics" },
  { table: "cpu_metrics", column: "timestamp", class: "metrics" },
  { table: "cpu_cluster_metrics", column: "timestamp", class: "metrics" },
  { table: "memory_metrics", column: "timestamp", class: "metrics" },
  { table: "disk_metrics", column: "timestamp", class: "metrics" },
  { table: "process_metrics", column: "timestamp", class: "metrics" },
  { table: "otel_metrics", column: "timestamp", class: "metrics" },
  { table: "otel_metric_points", column: "timestamp", class: "metrics" },
  { table: "service_status", column: "timestamp", class: "metrics" },
  { table: "timeseries_metrics_hourly", column: "bucket", class: "rollups" },
  { table: "timeseries_metrics_interface_hourly", column: "bucket", class: "rollups" },
  { table: "cpu_metrics_hourly", column: "bucket", class: "rollups" },
  { table: "memory_metrics_hourly", column: "bucket", class: "rollups" },
  { table: "disk_metrics_hourly", column: "bucket", class: "rollups" },
  { table: "process_metrics_hourly", column: "bucket", class: "rollups" },
  { table: "otel_metric_points_hourly", column: "bucket", class: "rollups" },
  { table: "logs", column: "timestamp", class: "logs" },
  { table: "events", column: "time", class: "logs" },
  { table: "otel_traces", column: "timestamp", class: "logs" },
  { table: "otel_trace_summaries", column: "timestamp", class: "logs" },
];

const DAY_MS = 86_400_000;

function days(r: RetentionDays, c: RetentionClass): number {
  return c === "metrics" ? r.metricsDays : c === "rollups" ? r.rollupDays : r.logDays;
}

/**
 * Remove expired rows of every retained table; returns the number removed per table (rows of
 * dropped partitions included; tables with nothing to remove are omitted). Stops a table's
 * batched delete after `maxBatches` batches so one pass is bounded; the next pass continues.
 */
export async function purgeExpiredTelemetry(
  db: Queryable,
  now: Date,
  retention: RetentionDays,
  opts: { batchSize?: number; maxBatches?: number; lockTimeoutMs?: number } = {},
): Promise<Record<string, number>> {
  const batch = opts.batchSize ?? 5_000;
  const maxBatches = opts.maxBatches ?? 200;
  const out: Record<string, number> = {};
  const partitioned = new Set(PARTITIONED_TABLES.map((p) => p.table));
  for (const t of RETAINED_TABLES) {
    const cutoff = new Date(now.getTime() - days(retention, t.class) * DAY_MS);
    let total = partitioned.has(t.table) ? await dropExpiredPartitions(db, t.table, cutoff, opts) : 0;
    for (let i = 0; i < maxBatches; i++) {
      // The oldest rows first through the time index; (id, time) is unique on every retained
      // table, and the time bound on the outer DELETE prunes it to the expired partitions.
      const r = await db.query(sql`
        DELETE FROM ${ident(t.table)} WHERE ${ident(t.column)} < ${cutoff} AND (id, ${ident(t.column)}) IN (
          SELECT id, ${ident(t.column)} FROM ${ident(t.table)} WHERE ${ident(t.column)} < ${cutoff}
          ORDER BY ${ident(t.column)} LIMIT ${batch})`);
      total += r.rowCount;
      if (r.rowCount < batch) break;
    }
    if (total > 0) out[t.table] = total;
  }
  return out;
}
