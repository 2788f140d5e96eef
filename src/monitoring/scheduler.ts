/**
 * The scheduler: turns due service checks into poll jobs. Leader-only (one replica holds the
 * advisory lock), idempotent per tick. Every check carries `next_run_at`, first set to a
 * random point within one interval of its creation (jitter), then advanced by whole intervals
 * so checks keep their phase: 10,000 checks on one interval spread over the whole interval.
 */
import { randomUUID } from "node:crypto";
import type { AppContext } from "../kernel/context.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { expandCidrs } from "./sweep.ts";

export const SCHEDULER_LOCK_KEY = 0x6e65746d6f6e0600n;

/** Checks per poll job (one job is one unit of work for one agent). */
export const DEFAULT_BATCH = 100;

/** A random start within one interval: where a new (or re-enabled) check first runs. */
export function initialRunAt(now: Date, intervalSeconds: number, rand = Math.random): Date {
  return new Date(now.getTime() + Math.floor(rand() * intervalSeconds * 1000));
}

/**
 * The next due time after a run that was due at `due`: whole intervals later, skipping any
 * the scheduler missed (a core outage does not cause a burst of catch-up runs).
 */
export function advance(due: Date, intervalSeconds: number, now: Date): Date {
  const step = intervalSeconds * 1000;
  let next = due.getTime() + step;
  if (next <= now.getTime()) next += Math.ceil((now.getTime() - next + 1) / step) * step;
  return new Date(next);
}

interface DueRow {
  [k: string]: unknown;
  id: string;
  interval_seconds: number;
  timeout_seconds: number;
  schedule_id: string | null;
  agent_uid: string | null;
  gateway_id: string | null;
  agent_labels: Record<string, string> | null;
  next_run_at: Date | null;
}

/** Same selector, same text: `{"b":"2","a":"1"}` and `{"a":"1","b":"2"}` share a job. */
function canonicalJson(o: Record<string, string>): string {
  return JSON.stringify(Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1))));
}

async function autoSchedule(
  tx: Queryable,
  intervalSeconds: number,
): Promise<{ id: string; name: string; priority: number }> {
  const name = `auto:${intervalSeconds}s`;
  const existing = await tx.one<{ id: string; name: string; priority: number }>(
    sql`SELECT id, name, priority FROM polling_schedules WHERE name = ${name}`,
  );
  if (existing) return existing;
  const row = await tx.one<{ id: string; name: string; priority: number }>(sql`
    INSERT INTO polling_schedules (name, description, schedule_type, interval_seconds, is_automatic)
    VALUES (${name}, ${`Checks every ${intervalSeconds}s without an explicit schedule`}, 'interval', ${intervalSeconds}, true)
    ON CONFLICT (name) DO UPDATE SET updated_at = polling_schedules.updated_at
    RETURNING id, name, priority`);
  return row as { id: string; name: string; priority: number };
}

export interface TickResult {
  jobs: number;
  checks: number;
}

/** How often the scheduler vacuums its tables on PGlite (see maintainSchedulerTables). */
export const PGLITE_VACUUM_INTERVAL_MS = 60_000;
const lastVacuum = new WeakMap<object, number>();

/**
 * PGlite runs PostgreSQL as a single-user backend: there is no autovacuum, so nothing ever
 * reclaims dead row versions or collects planner statistics. The scheduler's tables are the
 * most rewritten in the system (every check is updated twice per interval, every poll job
 * four times): without this, 10,000 checks made service_checks 17× larger in 30 intervals,
 * still growing (bench/monitoring/RESULTS.md §3); and without statistics the planner answers
 * `id = ANY(…)` lookups on service_checks with sequential scans. poll_jobs is vacuumed but
 * not analyzed: it keeps days of finished jobs, and sampling it took ~300 ms at 300,000 jobs
 * (the vacuum itself a few ms), while its queries go through partial indexes anyway.
 * Runs at most once per PGLITE_VACUUM_INTERVAL_MS (unless `force`), outside any transaction
 * (VACUUM cannot run in one). PostgreSQL's autovacuum does this itself: a no-op there.
 */
export async function maintainSchedulerTables(
  ctx: AppContext,
  opts: { force?: boolean } = {},
): Promise<boolean> {
  if (ctx.db.kind !== "pglite") return false;
  const last = lastVacuum.get(ctx.db);
  if (!opts.force && last !== undefined && Date.now() - last < PGLITE_VACUUM_INTERVAL_MS) return false;
  lastVacuum.set(ctx.db, Date.now());
  try {
    await ctx.db.query("VACUUM (ANALYZE) service_checks");
    await ctx.db.query("VACUUM poll_jobs");
    return true;
  } catch (err) {
    ctx.log.warn({ err }, "could not vacuum the scheduler's tables");
    return false;
  }
}

/**
 * Create poll jobs for every due check. Runs in one transaction; safe to call concurrently.
 * On PGlite it first vacuums the scheduler's tables when that is due (maintainSchedulerTables;
 * `maintain: false` skips it), so call it outside any transaction.
 */
export async function scheduleDue(
  ctx: AppContext,
  opts: { batch?: number; limit?: number; maintain?: boolean; defaultAgentUid?: string } = {},
): Promise<TickResult> {
  if (opts.maintain !== false) await maintainSchedulerTables(ctx);
  const now = ctx.now();
  const batch = opts.batch ?? DEFAULT_BATCH;
  // Bounded per tick: one tick is one transaction, and on PGlite it holds the only connection.
  const limit = opts.limit ?? 2000;
  return ctx.db.transaction(async (tx) => {
    // Checks never scheduled (created outside the API, or just enabled): give them a phase.
    const fresh = await tx.many<{ id: string; interval_seconds: number }>(sql`
      SELECT id, interval_seconds FROM service_checks
      WHERE enabled AND next_run_at IS NULL LIMIT ${limit} FOR UPDATE SKIP LOCKED`);
    if (fresh.length > 0) {
      // A random phase within one interval (the same spread as initialRunAt()).
      await tx.query(sql`
        UPDATE service_checks SET next_run_at = ${now}::timestamptz + make_interval(secs => floor(random() * interval_seconds * 1000) / 1000)
        WHERE id = ANY(${fresh.map((f) => f.id)}::uuid[])`);
    }
    const sweepJobs = await scheduleSweeps(tx, now);
    // Read without locking: the UPDATE below takes each check only if it is still due and
    // free (a concurrent scheduler's claim makes it skip the row), and jobs are built from
    // the checks it actually took. One pass over the rows instead of a lock pass and a write pass.
    const due = await tx.many<DueRow>(sql`
      SELECT id, interval_seconds, timeout_seconds, schedule_id, agent_uid, gateway_id, agent_labels, next_run_at FROM service_checks
      WHERE enabled AND inflight_job_id IS NULL AND next_run_at <= ${now}
      ORDER BY next_run_at LIMIT ${limit}`);
    if (due.length === 0) return { jobs: sweepJobs, checks: 0 };

    const schedules = new Map<string, { id: string; name: string; priority: number; timeout: number }>();
    const explicitIds = [...new Set(due.map((d) => d.schedule_id).filter((s): s is string => !!s))];
    if (explicitIds.length > 0) {
      const rows = await tx.many<{
        id: string;
        name: string;
        priority: number;
        timeout_seconds: number;
        enabled: boolean;
      }>(
        sql`SELECT id, name, priority, timeout_seconds, enabled FROM polling_schedules WHERE id = ANY(${explicitIds}::uuid[])`,
      );
      for (const r of rows)
        if (r.enabled)
          schedules.set(r.id, { id: r.id, name: r.name, priority: r.priority, timeout: r.timeout_seconds });
    }
    // Group: (schedule, pinned agent) → checks, then split into batches.
    const autoCache = new Map<
      number,
      { id: string; name: string; priority: number; timeout: number | null }
    >();
    const groups = new Map<
      string,
      {
        schedule: { id: string; name: string; priority: number; timeout: number | null };
        agent: string | null;
        /** The agent is the default placement (the check names none), not a pin. */
        byDefault: boolean;
        gateway: string | null;
        labels: string | null;
        checks: DueRow[];
      }
    >();
    const skipped: { id: string; next: string }[] = [];
    for (const d of due) {
      let schedule: { id: string; name: string; priority: number; timeout: number | null } | undefined =
        d.schedule_id ? schedules.get(d.schedule_id) : undefined;
      if (d.schedule_id && !schedule) {
        // Disabled schedule: skip this round, keep the phase.
        skipped.push({
          id: d.id,
          next: advance(d.next_run_at ?? now, d.interval_seconds, now).toISOString(),
        });
        continue;
      }
      if (!schedule) {
        let auto = autoCache.get(d.interval_seconds);
        if (!auto) {
          auto = { ...(await autoSchedule(tx, d.interval_seconds)), timeout: null };
          autoCache.set(d.interval_seconds, auto);
        }
        schedule = auto;
      }
      // An agent pin wins; a gateway or a label pool keeps the check off the default (embedded) agent.
      const pooled = d.agent_labels !== null && Object.keys(d.agent_labels).length > 0;
      const agent = d.agent_uid ?? (d.gateway_id || pooled ? null : (opts.defaultAgentUid ?? null));
      const byDefault = !d.agent_uid && agent !== null;
      const gateway = d.agent_uid ? null : d.gateway_id;
      const labels = !d.agent_uid && pooled && d.agent_labels ? canonicalJson(d.agent_labels) : null;
      const key = `${schedule.id}|${agent ?? ""}|${byDefault ? "default" : ""}|${gateway ?? ""}|${labels ?? ""}`;
      const g = groups.get(key) ?? { schedule, agent, byDefault, gateway, labels, checks: [] };
      g.checks.push(d);
      groups.set(key, g);
    }
    if (skipped.length > 0) {
      await tx.query(sql`
        UPDATE service_checks s SET next_run_at = v.next
        FROM unnest(${skipped.map((k) => k.id)}::uuid[], ${skipped.map((k) => k.next)}::timestamptz[]) AS v(id, next)
        WHERE s.id = v.id`);
    }
    // All jobs of the tick and all their checks in one statement.
    const job = {
      id: [] as string[],
      schedule: [] as string[],
      name: [] as string[],
      priority: [] as number[],
      timeout: [] as number[],
      agent: [] as (string | null)[],
      gateway: [] as (string | null)[],
      labels: [] as (string | null)[],
      meta: [] as string[],
    };
    const flat = { check: [] as string[], job: [] as string[] };
    for (const g of groups.values()) {
      for (let i = 0; i < g.checks.length; i += batch) {
        const part = g.checks.slice(i, i + batch);
        const id = randomUUID();
        const maxTimeout = Math.max(...part.map((p) => p.timeout_seconds));
        const dueAt = part.reduce(
          (m, p) => Math.min(m, (p.next_run_at ?? now).getTime()),
          Number.POSITIVE_INFINITY,
        );
        job.id.push(id);
        job.schedule.push(g.schedule.id);
        job.name.push(g.schedule.name);
        job.priority.push(g.schedule.priority);
        job.timeout.push(Math.max(g.schedule.timeout ?? 0, maxTimeout + 5));
        job.agent.push(g.agent);
        job.gateway.push(g.gateway);
        job.labels.push(g.labels);
        // `default_placement`: the job went to the leader's embedded agent only because its
        // checks name no agent. If that agent dies, the job may run elsewhere (gone-agents.ts).
        job.meta.push(
          JSON.stringify({
            due_at: new Date(dueAt).toISOString(),
            ...(g.byDefault ? { default_placement: true } : {}),
          }),
        );
        for (const p of part) {
          flat.check.push(p.id);
          flat.job.push(id);
        }
      }
    }
    let jobs = 0;
    let checks = 0;
    if (job.id.length > 0) {
      // Advance each check by whole intervals from its own due time (keeps the spread).
      // Same rule as advance(): whole intervals after the due time, strictly after now.
      const made = await tx.one<{ jobs: number; checks: number }>(sql`
        WITH taken AS (
          UPDATE service_checks s SET inflight_job_id = v.job,
            next_run_at = s.next_run_at + make_interval(secs => s.interval_seconds *
              (floor(extract(epoch FROM (${now}::timestamptz - s.next_run_at)) / s.interval_seconds) + 1))
          FROM unnest(${flat.check}::uuid[], ${flat.job}::uuid[]) WITH ORDINALITY AS v(id, job, ord)
          WHERE s.id = ANY(${flat.check}::uuid[]) AND s.id = v.id
            AND s.enabled AND s.inflight_job_id IS NULL AND s.next_run_at <= ${now}
          RETURNING s.id, v.job, v.ord
        ),
        per_job AS (
          SELECT job, array_agg(id ORDER BY ord) AS ids, count(*)::int AS n FROM taken GROUP BY job
        ),
        inserted AS (
          INSERT INTO poll_jobs (id, schedule_id, schedule_name, status, check_count, check_ids, priority,
                                 timeout_seconds, target_agent_uid, target_gateway_id, target_agent_labels,
                                 available_at, inserted_at, updated_at, metadata)
          SELECT j.id, j.schedule, j.name, 'pending', p.n, p.ids, j.priority, j.timeout, j.agent, j.gateway,
                 j.labels::jsonb, ${now}, ${now}, ${now}, j.meta::jsonb
          FROM unnest(${job.id}::uuid[], ${job.schedule}::uuid[], ${job.name}::text[], ${job.priority}::int[],
                      ${job.timeout}::int[], ${job.agent}::text[], ${job.gateway}::text[], ${job.labels}::text[],
                      ${job.meta}::text[])
                 AS j(id, schedule, name, priority, timeout, agent, gateway, labels, meta)
          JOIN per_job p ON p.job = j.id
          RETURNING check_count
        )
        SELECT count(*)::int AS jobs, coalesce(sum(check_count), 0)::int AS checks FROM inserted`);
      jobs = made?.jobs ?? 0;
      checks = made?.checks ?? 0;
    }
    const touched = [...new Set([...groups.values()].map((g) => g.schedule.id))];
    if (touched.length > 0) {
      await tx.query(
        sql`UPDATE polling_schedules SET last_executed_at = ${now} WHERE id = ANY(${touched}::uuid[])`,
      );
    }
    return { jobs: jobs + sweepJobs, checks };
  });
}

/** Due network sweeps become poll jobs of kind "sweep" (no checks; the sweep travels in metadata). */
async function scheduleSweeps(tx: Queryable, now: Date): Promise<number> {
  const sweeps = await tx.many<{
    id: string;
    name: string;
    cidrs: string[];
    ports: number[];
    interval_seconds: number;
    rate_per_second: number;
    partition: string;
    agent_uid: string | null;
  }>(sql`
    SELECT id, name, cidrs, ports, interval_seconds, rate_per_second, "partition", agent_uid FROM network_sweeps
    WHERE enabled AND inflight_job_id IS NULL AND (next_run_at IS NULL OR next_run_at <= ${now})
    LIMIT 100 FOR UPDATE SKIP LOCKED`);
  if (sweeps.length === 0) return 0;
  const name = "auto:sweeps";
  const schedule =
    (await tx.one<{ id: string }>(sql`SELECT id FROM polling_schedules WHERE name = ${name}`)) ??
    (await tx.one<{ id: string }>(sql`
      INSERT INTO polling_schedules (name, description, schedule_type, is_automatic) VALUES (${name}, 'Network sweeps', 'manual', true)
      ON CONFLICT (name) DO UPDATE SET updated_at = polling_schedules.updated_at RETURNING id`));
  for (const w of sweeps) {
    let addresses = 0;
    try {
      addresses = expandCidrs(w.cidrs).length;
    } catch {
      await tx.query(
        sql`UPDATE network_sweeps SET enabled = false, last_summary = ${JSON.stringify({ error: "invalid CIDRs" })}::jsonb WHERE id = ${w.id}`,
      );
      continue;
    }
    const seconds = Math.ceil((addresses * (1 + w.ports.length)) / w.rate_per_second) + 30;
    const id = randomUUID();
    const sweep = {
      id: w.id,
      name: w.name,
      cidrs: w.cidrs,
      ports: w.ports,
      rate_per_second: w.rate_per_second,
      partition: w.partition,
    };
    await tx.query(sql`
      INSERT INTO poll_jobs (id, schedule_id, schedule_name, status, check_count, check_ids, timeout_seconds, target_agent_uid,
                             available_at, inserted_at, updated_at, metadata)
      VALUES (${id}, ${schedule?.id}, ${name}, 'pending', 0, '{}', ${seconds}, ${w.agent_uid}, ${now}, ${now}, ${now},
              ${JSON.stringify({ kind: "sweep", sweep, due_at: now.toISOString() })}::jsonb)`);
    await tx.query(sql`UPDATE network_sweeps SET inflight_job_id = ${id},
      next_run_at = ${new Date(now.getTime() + w.interval_seconds * 1000)} WHERE id = ${w.id}`);
  }
  return sweeps.length;
}
