import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../test/helpers/context.ts";
import type { AppContext } from "../kernel/context.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { claimJobs, completeJob, reapStaleJobs, startJob } from "./jobs.ts";
import { advance, initialRunAt, maintainSchedulerTables, scheduleDue } from "./scheduler.ts";

describe("schedule arithmetic", () => {
  it("starts within one interval and advances by whole intervals, skipping missed runs", () => {
    const now = new Date("2026-01-01T00:00:00Z");
    for (let i = 0; i < 100; i++) {
      const t = initialRunAt(now, 60).getTime() - now.getTime();
      expect(t).toBeGreaterThanOrEqual(0);
      expect(t).toBeLessThan(60_000);
    }
    const due = new Date("2026-01-01T00:00:10Z");
    expect(advance(due, 60, new Date("2026-01-01T00:00:11Z")).toISOString()).toBe("2026-01-01T00:01:10.000Z");
    // Down for 5 minutes: the next run keeps the phase and lies in the future.
    expect(advance(due, 60, new Date("2026-01-01T00:05:30Z")).toISOString()).toBe("2026-01-01T00:06:10.000Z");
  });
});

describe("scheduler and dispatch (database)", () => {
  let db: Db;
  let clock = new Date("2026-01-01T00:00:00Z");
  let ctx: AppContext;
  beforeAll(async () => {
    ctx = await createTestContext({ now: () => clock });
    db = ctx.db;
  });
  afterAll(async () => {
    await db?.close();
  });

  it("spreads 1,000 new checks over the interval, then batches the due ones into jobs once", async () => {
    const names = Array.from({ length: 1000 }, (_, i) => `c${i}`);
    await db.query(sql`INSERT INTO service_checks (name, check_type, target, port, interval_seconds)
      SELECT n, 'tcp', '127.0.0.1', 80, 60 FROM unnest(${names}::text[]) n`);
    // New checks are spread over the next interval; one whose random offset is 0 ms is due at
    // once (p = 1/60,000 per check), so the first tick may take a few, never many.
    const first = await scheduleDue(ctx);
    expect(first.checks).toBeLessThan(5);
    // The spread of the checks still waiting: one already taken (offset 0) was advanced by a
    // whole interval, to exactly now + 60 s (p ≈ 1.6 % per run with 1,000 checks).
    const spread = await db.one<{ lo: Date; hi: Date; seconds: number }>(sql`
      SELECT min(next_run_at) AS lo, max(next_run_at) AS hi,
             count(DISTINCT date_trunc('second', next_run_at))::int AS seconds FROM service_checks
      WHERE inflight_job_id IS NULL`);
    expect(spread?.lo.getTime()).toBeGreaterThanOrEqual(clock.getTime());
    expect(spread?.hi.getTime()).toBeLessThan(clock.getTime() + 60_000);
    expect(spread?.seconds).toBeGreaterThan(50); // not all in the same instant

    clock = new Date(clock.getTime() + 30_000);
    const half = await scheduleDue(ctx);
    expect(half.checks).toBeGreaterThan(300);
    expect(half.checks).toBeLessThan(700);
    clock = new Date(clock.getTime() + 30_001);
    const rest = await scheduleDue(ctx);
    expect(first.checks + half.checks + rest.checks).toBe(1000);
    const jobs = await db.many<{ check_count: number; status: string }>(
      sql`SELECT check_count, status FROM poll_jobs`,
    );
    expect(jobs.every((j) => j.check_count <= 100 && j.status === "pending")).toBe(true);
    expect(jobs.reduce((a, j) => a + j.check_count, 0)).toBe(1000);
    // In flight: nothing is scheduled twice.
    expect(await scheduleDue(ctx)).toEqual({ jobs: 0, checks: 0 });
    const next = await db.one<{ lo: Date }>(sql`SELECT min(next_run_at) AS lo FROM service_checks`);
    // Every check's next run is no earlier than its due time plus one interval: at least the
    // first tick + 60 s (a check taken at the first tick, offset 0, sits exactly there:
    // p ≈ 1.6 % per run, which once failed a strict "greater than").
    expect(next?.lo.getTime()).toBeGreaterThanOrEqual(clock.getTime() - 1);
  });

  it("vacuums and analyzes its tables on PGlite, which has no autovacuum", async () => {
    // Rewrite every check a few times: dead row versions only VACUUM can reclaim.
    for (let i = 0; i < 3; i++)
      await db.query(sql`UPDATE service_checks SET next_run_at = next_run_at + interval '1 s'`);
    // The UPDATEs' dead-row counts wait in this backend's pending statistics (flushed at most
    // once a second): flush them now, or a flush landing after the VACUUM's report would add
    // them back and the count below would never reach 0 (seen on a loaded machine).
    if (db.kind === "pglite") {
      await db.query(sql`SELECT pg_stat_force_next_flush()`);
      await db.query(sql`SELECT 1`);
    }
    const ran = await maintainSchedulerTables(ctx, { force: true });
    if (db.kind !== "pglite") {
      expect(ran).toBe(false); // PostgreSQL's autovacuum does it
      return;
    }
    expect(ran).toBe(true);
    // Statistics are reported asynchronously: read until they reflect the vacuum (bounded).
    let stats: { vacuumed: boolean; analyzed: boolean; dead: number } | undefined;
    for (let i = 0; i < 30; i++) {
      await db.query(sql`SELECT pg_stat_clear_snapshot()`);
      stats = await db.one<{ vacuumed: boolean; analyzed: boolean; dead: number }>(sql`
        SELECT last_vacuum IS NOT NULL AS vacuumed, last_analyze IS NOT NULL AS analyzed, n_dead_tup::int AS dead
        FROM pg_stat_user_tables WHERE relname = 'service_checks'`);
      if (stats?.dead === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(stats).toEqual({ vacuumed: true, analyzed: true, dead: 0 });
    // Throttled: a second call right after does nothing.
    expect(await maintainSchedulerTables(ctx)).toBe(false);
  });

  it("never puts a check in two jobs when two schedulers run at once", async () => {
    await db.query(sql`DELETE FROM poll_jobs`);
    await db.query(sql`DELETE FROM service_checks`);
    const names = Array.from({ length: 300 }, (_, i) => `dup${i}`);
    await db.query(sql`INSERT INTO service_checks (name, check_type, target, port, interval_seconds, next_run_at)
      SELECT n, 'tcp', '127.0.0.1', 80, 60, ${clock} FROM unnest(${names}::text[]) n`);
    const [a, b] = await Promise.all([scheduleDue(ctx, { batch: 50 }), scheduleDue(ctx, { batch: 50 })]);
    expect((a?.checks ?? 0) + (b?.checks ?? 0)).toBe(300);
    const placed = await db.many<{ check_id: string; job_id: string; inflight: string | null }>(sql`
      SELECT c.id AS check_id, j.id AS job_id, c.inflight_job_id AS inflight
      FROM poll_jobs j CROSS JOIN LATERAL unnest(j.check_ids) AS x(id) JOIN service_checks c ON c.id = x.id`);
    expect(placed).toHaveLength(300);
    expect(new Set(placed.map((p) => p.check_id)).size).toBe(300);
    expect(placed.every((p) => p.inflight === p.job_id)).toBe(true);
    const counts = await db.many<{ check_count: number; n: number }>(
      sql`SELECT check_count, cardinality(check_ids) AS n FROM poll_jobs`,
    );
    expect(counts.every((c) => c.check_count === c.n && c.n > 0)).toBe(true);
  });

  it("claims by priority, respects agent pinning, and retries a timed-out job", async () => {
    await db.query(sql`DELETE FROM poll_jobs`);
    await db.query(sql`UPDATE service_checks SET inflight_job_id = NULL, enabled = false`);
    const [pinned] = await db.many<{ id: string }>(sql`
      INSERT INTO service_checks (name, check_type, target, port, agent_uid, next_run_at)
      VALUES ('pinned', 'tcp', '127.0.0.1', 80, 'agent-x', ${clock}) RETURNING id`);
    expect((await scheduleDue(ctx)).jobs).toBe(1);
    expect(await claimJobs(ctx, { gatewayId: "gw", agentUids: ["agent-y"], max: 10 })).toEqual([]);
    const [job] = await claimJobs(ctx, { gatewayId: "gw", agentUids: ["agent-x"], max: 10 });
    expect(job?.checks.map((c) => c.id)).toEqual([pinned?.id]);
    await startJob(ctx, job?.id as string, "agent-x");
    clock = new Date(clock.getTime() + 3600_000);
    expect((await reapStaleJobs(ctx)).timedOut).toBe(1);
    const retried = await db.one<{ status: string; retry_count: number; agent_id: string | null }>(
      sql`SELECT status, retry_count, agent_id FROM poll_jobs WHERE id = ${job?.id}`,
    );
    expect(retried).toEqual({ status: "pending", retry_count: 1, agent_id: null });
    clock = new Date(clock.getTime() + 60_000);
    const [again] = await claimJobs(ctx, { gatewayId: "gw", agentUids: ["agent-x"], max: 10 });
    expect(again?.id).toBe(job?.id);
    await completeJob(ctx, again?.id as string, {
      agentId: "agent-x",
      results: [{ check_id: pinned?.id, status: "critical", response_time_ms: null, error: "boom" }],
    });
    const check = await db.one<{
      last_result: string;
      consecutive_failures: number;
      inflight_job_id: string | null;
    }>(
      sql`SELECT last_result, consecutive_failures, inflight_job_id FROM service_checks WHERE id = ${pinned?.id}`,
    );
    expect(check).toEqual({ last_result: "critical", consecutive_failures: 1, inflight_job_id: null });
  });
});
