import type { AppContext } from "../kernel/context.ts";
import type { Feature } from "../kernel/feature.ts";
import type { Db } from "./db.ts";
import { ident, sql } from "./sql.ts";

/**
 * Autovacuum for the embedded database (issue 14). PGlite runs PostgreSQL as one single-user
 * backend with no autovacuum launcher: nothing ever collects planner statistics or reclaims
 * dead rows. Right after a bulk import the planner believed `devices` held 53 rows (it held
 * 50,000) and sorted the whole table for every page instead of walking an index.
 *
 * This loop applies autovacuum's own rule, with its default thresholds, to every user table:
 * ANALYZE when rows changed since the last analyze exceed 50 + 10 % of the table, VACUUM when
 * dead rows exceed 50 + 20 %. Table names come from the catalog, never from input. On
 * PostgreSQL the server's autovacuum does this; `analyzeNow` is still called after bulk writes
 * there so the first reads after an import are planned with true numbers.
 */
const ANALYZE_BASE = 50;
const ANALYZE_SCALE = 0.1;
const VACUUM_BASE = 50;
const VACUUM_SCALE = 0.2;
export const PGLITE_MAINTENANCE_INTERVAL_MS = 60_000;

export interface MaintenanceResult {
  analyzed: string[];
  vacuumed: string[];
}

export async function autoMaintain(db: Db, opts: { max?: number } = {}): Promise<MaintenanceResult> {
  const due = await db.many<{ schema: string; name: string; analyze: boolean; vacuum: boolean }>(sql`
    SELECT s.schemaname AS schema, s.relname AS name,
      s.n_mod_since_analyze > ${ANALYZE_BASE} + ${ANALYZE_SCALE} * GREATEST(c.reltuples, 0) AS analyze,
      s.n_dead_tup > ${VACUUM_BASE} + ${VACUUM_SCALE} * GREATEST(c.reltuples, 0) AS vacuum
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE s.n_mod_since_analyze > ${ANALYZE_BASE} + ${ANALYZE_SCALE} * GREATEST(c.reltuples, 0)
       OR s.n_dead_tup > ${VACUUM_BASE} + ${VACUUM_SCALE} * GREATEST(c.reltuples, 0)
    ORDER BY s.n_mod_since_analyze + s.n_dead_tup DESC
    LIMIT ${opts.max ?? 20}`);
  const out: MaintenanceResult = { analyzed: [], vacuumed: [] };
  for (const t of due) {
    const table = ident(t.schema, t.name);
    // VACUUM cannot run inside a transaction: these go straight to the connection.
    if (t.vacuum) {
      await db.query(t.analyze ? sql`VACUUM (ANALYZE) ${table}` : sql`VACUUM ${table}`);
      out.vacuumed.push(t.name);
      if (t.analyze) out.analyzed.push(t.name);
    } else {
      await db.query(sql`ANALYZE ${table}`);
      out.analyzed.push(t.name);
    }
  }
  return out;
}

/** Collect statistics for tables just written in bulk (both backends; cheap: a sample). */
export async function analyzeNow(db: Db, tables: readonly string[]): Promise<void> {
  for (const t of tables) await db.query(sql`ANALYZE ${ident(t)}`);
}

/** The loop, on PGlite only; a run never overlaps the previous one. */
export function createStorageMaintenanceFeature(intervalMs = PGLITE_MAINTENANCE_INTERVAL_MS): Feature {
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  return {
    name: "storage-maintenance",
    start(ctx: AppContext) {
      if (ctx.db.kind !== "pglite") return;
      const run = () => {
        if (running) return;
        running = autoMaintain(ctx.db)
          .then((r) => {
            if (r.analyzed.length + r.vacuumed.length > 0) ctx.log.debug(r, "embedded database maintenance");
          })
          .catch((err) => ctx.log.warn({ err }, "embedded database maintenance failed"))
          .finally(() => {
            running = null;
          });
      };
      timer = setInterval(run, intervalMs);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      await running;
    },
  };
}
