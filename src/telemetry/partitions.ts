import type { Queryable } from "../storage/db.ts";
import { DbError } from "../storage/db-error.ts";
import { ident, sql } from "../storage/sql.ts";

/**
 * Daily partitions of the raw telemetry tables (decision 0320). Migration 0320 made each table
 * PARTITION BY RANGE on its time column with a DEFAULT partition; this keeps partitions for
 * the coming days in place so new rows land in a droppable daily partition, never in DEFAULT.
 * Partition days are UTC days.
 */
export const PARTITIONED_TABLES: readonly { table: string; column: string }[] = [
  { table: "logs", column: "timestamp" },
  { table: "events", column: "time" },
  { table: "otel_traces", column: "timestamp" },
  { table: "otel_metrics", column: "timestamp" },
  { table: "otel_metric_points", column: "timestamp" },
  { table: "timeseries_metrics", column: "timestamp" },
  { table: "cpu_metrics", column: "timestamp" },
  { table: "cpu_cluster_metrics", column: "timestamp" },
  { table: "memory_metrics", column: "timestamp" },
  { table: "disk_metrics", column: "timestamp" },
  { table: "process_metrics", column: "timestamp" },
  { table: "service_status", column: "timestamp" },
];

/**
 * Days ahead kept ready. The job runs at start and hourly, so with three days ahead a partition
 * exists at least two days before its first row even if the job fails for a day.
 */
export const PARTITION_DAYS_AHEAD = 3;

const DAY_MS = 86_400_000;
/**
 * How long creating or dropping a partition waits for its table's lock before leaving it to the
 * next pass: the request, queued behind a long query, would hold up every later one.
 */
export const LOCK_TIMEOUT_MS = 5_000;
const LOCK_NOT_AVAILABLE = "55P03";

/** The UTC day of `t` as YYYY-MM-DD (a `date` literal). */
function utcDay(t: Date): string {
  return t.toISOString().slice(0, 10);
}

export interface EnsureResult {
  /** Partitions created, by name. */
  created: string[];
  /** Rows moved out of DEFAULT into a partition created for their day, by partition. */
  moved: Record<string, number>;
  /** Tables whose lock was not had within the timeout (busy); the next pass tries again. */
  busy: string[];
}

/**
 * Create the daily partitions from yesterday through `daysAhead` days after `now` (UTC) that
 * do not exist yet. Yesterday too, so a late row of a day the job missed (the server was down
 * at midnight) still finds its day. Each partition is its own statement: rows of its day
 * already in DEFAULT are moved into it atomically (netmon_ensure_daily_partition, migration
 * 0320), and reported, since they mean rows arrived for a day no partition covered.
 */
export async function ensureTelemetryPartitions(
  db: Queryable,
  now: Date,
  opts: { daysAhead?: number; lockTimeoutMs?: number } = {},
): Promise<EnsureResult> {
  const daysAhead = opts.daysAhead ?? PARTITION_DAYS_AHEAD;
  const wait = opts.lockTimeoutMs ?? LOCK_TIMEOUT_MS;
  const out: EnsureResult = { created: [], moved: {}, busy: [] };
  for (const t of PARTITIONED_TABLES) {
    for (let d = -1; d <= daysAhead; d++) {
      const day = utcDay(new Date(now.getTime() + d * DAY_MS));
      let r: { moved: string | null } | undefined;
      try {
        r = await db.one<{ moved: string | null }>(
          sql`SELECT netmon_ensure_daily_partition(${t.table}, ${day}::date, ${wait}::int)::text AS moved`,
        );
      } catch (err) {
        if (!(err instanceof DbError) || err.code !== LOCK_NOT_AVAILABLE) throw err;
        out.busy.push(t.table);
        break;
      }
      if (r?.moved == null) continue;
      const name = `${t.table}_p${day.replaceAll("-", "")}`;
      out.created.push(name);
      if (Number(r.moved) > 0) out.moved[name] = Number(r.moved);
    }
  }
  return out;
}

export interface TablePartition {
  name: string;
  /** Null for the DEFAULT partition (and for any partition not bounded by a timestamp). */
  from: Date | null;
  to: Date | null;
  isDefault: boolean;
}

/** The partitions of `table` with their ranges, oldest first; empty for a plain table. */
export async function listPartitions(db: Queryable, table: string): Promise<TablePartition[]> {
  // The bound's text uses the session's own timestamp format, so casting it back is exact.
  const rows = await db.many<{ name: string; bound: string; from: Date | null; to: Date | null }>(sql`
    SELECT c.relname AS name, b.bound,
      substring(b.bound FROM 'FROM \\(''([^'']+)''\\)')::timestamptz AS "from",
      substring(b.bound FROM 'TO \\(''([^'']+)''\\)')::timestamptz AS "to"
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
    JOIN pg_namespace n ON n.oid = p.relnamespace
    CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS bound) b
    WHERE n.nspname = current_schema() AND p.relname = ${table} AND p.relkind = 'p'
    ORDER BY "from" NULLS FIRST, c.relname`);
  return rows.map((r) => ({ name: r.name, from: r.from, to: r.to, isDefault: r.bound === "DEFAULT" }));
}

/**
 * Drop every daily partition of `table` whose whole range ends at or before `cutoff`; returns
 * the rows they held. Rows are counted before the drop (one read of a settled day, far
 * cheaper than deleting it) so retention keeps reporting rows per table. A partition whose parent is busy for more than
 * `lockTimeoutMs` is left for the next pass; the caller's batched delete covers its rows.
 */
export async function dropExpiredPartitions(
  db: Queryable,
  table: string,
  cutoff: Date,
  opts: { lockTimeoutMs?: number } = {},
): Promise<number> {
  const wait = opts.lockTimeoutMs ?? LOCK_TIMEOUT_MS;
  let rows = 0;
  for (const p of await listPartitions(db, table)) {
    if (p.isDefault || p.to === null || p.to.getTime() > cutoff.getTime()) continue;
    const n = await db.one<{ n: string }>(sql`SELECT count(*)::text AS n FROM ${ident(p.name)}`);
    const dropped = await db.one<{ ok: boolean }>(
      sql`SELECT netmon_drop_partition(${p.name}, ${wait}::int) AS ok`,
    );
    if (dropped?.ok) rows += Number(n?.n ?? 0);
  }
  return rows;
}
