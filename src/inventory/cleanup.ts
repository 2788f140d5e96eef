import type { AppContext } from "../kernel/context.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";

/** Only one replica purges at a time. */
export const CLEANUP_LOCK_KEY = 0x6e65746d6f6e0201n;
/** Upper bound of batches per run, so one run cannot hold the database forever. */
export const MAX_BATCHES_PER_RUN = 1000;

export interface CleanupSettings {
  id: string;
  retention_days: number;
  cleanup_interval_minutes: number;
  batch_size: number;
  enabled: boolean;
  last_run_at: Date | null;
  last_purged_count: number;
  inserted_at: Date;
  updated_at: Date;
  [k: string]: unknown;
}

/** The singleton, created with defaults on first read. */
export async function getCleanupSettings(db: Queryable): Promise<CleanupSettings> {
  const row = await db.one<CleanupSettings>(sql`SELECT * FROM device_cleanup_settings WHERE key = 'default'`);
  if (row) return row;
  await db.query(
    sql`INSERT INTO device_cleanup_settings (key) VALUES ('default') ON CONFLICT (key) DO NOTHING`,
  );
  return (await db.one<CleanupSettings>(
    sql`SELECT * FROM device_cleanup_settings WHERE key = 'default'`,
  )) as CleanupSettings;
}

export interface CleanupRun {
  ran: boolean;
  purged: number;
  batches: number;
  reason?: string;
}

/**
 * Purge devices soft-deleted longer than `retention_days`, `batch_size` at a time (each batch its
 * own transaction). Leader-only: returns `{ran:false}` when another replica holds the lock.
 */
export async function runDeviceCleanup(ctx: AppContext, opts: { force?: boolean } = {}): Promise<CleanupRun> {
  const release = await ctx.db.tryAdvisoryLock(CLEANUP_LOCK_KEY);
  if (!release) return { ran: false, purged: 0, batches: 0, reason: "not_leader" };
  try {
    const s = await getCleanupSettings(ctx.db);
    if (!s.enabled && !opts.force) return { ran: false, purged: 0, batches: 0, reason: "disabled" };
    const now = ctx.now();
    if (
      !opts.force &&
      s.last_run_at &&
      now.getTime() - s.last_run_at.getTime() < s.cleanup_interval_minutes * 60_000
    ) {
      return { ran: false, purged: 0, batches: 0, reason: "not_due" };
    }
    const cutoff = new Date(now.getTime() - s.retention_days * 86_400_000);
    let purged = 0;
    let batches = 0;
    for (; batches < MAX_BATCHES_PER_RUN; ) {
      const r = await ctx.db.query(
        sql`DELETE FROM devices WHERE uid IN (
              SELECT uid FROM devices WHERE deleted_at IS NOT NULL AND deleted_at < ${cutoff}
               ORDER BY deleted_at LIMIT ${s.batch_size})`,
      );
      batches++;
      purged += r.rowCount;
      if (r.rowCount < s.batch_size) break;
    }
    await ctx.db.query(
      sql`UPDATE device_cleanup_settings SET last_run_at = ${now}, last_purged_count = ${purged} WHERE id = ${s.id}::uuid`,
    );
    if (purged > 0) ctx.log.info({ purged, batches }, "device cleanup purged soft-deleted devices");
    return { ran: true, purged, batches };
  } finally {
    await release();
  }
}

/** Background loop: checks every minute whether a run is due (the interval lives in the settings row). */
export function startCleanupLoop(ctx: AppContext, tickMs = 60_000): () => Promise<void> {
  let stopped = false;
  let running: Promise<unknown> | null = null;
  const tick = () => {
    if (stopped || running) return;
    running = runDeviceCleanup(ctx)
      .catch((err) => ctx.log.error({ err }, "device cleanup failed"))
      .finally(() => {
        running = null;
      });
  };
  const timer = setInterval(tick, tickMs);
  timer.unref();
  setTimeout(tick, 1000).unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    if (running) await running;
  };
}
