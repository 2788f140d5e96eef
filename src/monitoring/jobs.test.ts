import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createTestContext } from "../../test/helpers/context.ts";
import type { AppContext } from "../kernel/context.ts";
import { InvalidTransitionError, NotFoundError } from "../kernel/errors.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import {
  claimJobs,
  completeJob,
  FAILURE_ALERT_THRESHOLD,
  type JobPayload,
  resultWriterStats,
} from "./jobs.ts";
import { scheduleDue } from "./scheduler.ts";

describe("result recording (database)", () => {
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
  beforeEach(async () => {
    await db.query(sql`DELETE FROM poll_jobs`);
    await db.query(sql`DELETE FROM service_checks`);
    await db.query(sql`DELETE FROM service_status`);
    await db.query(sql`DELETE FROM timeseries_metrics`);
    await db.query(sql`DELETE FROM alerts`);
  });

  async function addChecks(n: number, extra: { critical_threshold_ms?: number } = {}): Promise<string[]> {
    const names = Array.from({ length: n }, (_, i) => `chk-${i}`);
    const rows = await db.many<{ id: string }>(sql`
      INSERT INTO service_checks (name, check_type, target, port, interval_seconds, critical_threshold_ms, next_run_at)
      SELECT v, 'tcp', '127.0.0.1', 80, 60, ${extra.critical_threshold_ms ?? null}, ${clock}
      FROM unnest(${names}::text[]) v ORDER BY v RETURNING id`);
    return rows.map((r) => r.id);
  }

  /** Advance one interval, schedule (batch checks per job), claim everything. Jobs stay "dispatching". */
  async function dueJobs(batch: number): Promise<JobPayload[]> {
    clock = new Date(clock.getTime() + 61_000);
    await scheduleDue(ctx, { batch });
    return claimJobs(ctx, { gatewayId: "gw", agentUids: ["agent-1"], max: 500 });
  }

  const ok = (id: string, ms = 5) => ({ check_id: id, status: "success", response_time_ms: ms });

  it("records submissions that arrive together once each, with their own answers", async () => {
    const ids = await addChecks(10);
    const jobs = await dueJobs(2);
    expect(jobs).toHaveLength(5);
    const before = resultWriterStats(ctx);
    const [j0, j1, j2, j3, j4] = jobs as [JobPayload, JobPayload, JobPayload, JobPayload, JobPayload];
    const submit = (job: JobPayload, results: unknown[]) =>
      completeJob(ctx, job.id, { agentId: "agent-1", gatewayId: "gw", results });
    const all = (job: JobPayload) => job.checks.map((c) => ok(c.id));
    const outcomes = await Promise.allSettled([
      submit(j0, all(j0)),
      // Two submissions for one job (the agent retried; here without results, like a sweep):
      // one completes it, the other is refused.
      submit(j1, []),
      submit(j1, []),
      submit(j2, [ok(j2.checks[0]?.id as string), ok(j0.checks[0]?.id as string)]), // one missing, one foreign
      submit(j3, [
        { check_id: j3.checks[0]?.id, status: "critical", response_time_ms: null, error: "refused" },
      ]),
      completeJob(ctx, "00000000-0000-4000-8000-000000000000", { agentId: "agent-1", results: [] }),
      completeJob(ctx, "not-a-job", { agentId: "agent-1", results: [] }),
      submit(j4, all(j4)),
    ]);
    const [r0, r1a, r1b, r2, r3, missing, bad, r4] = outcomes;
    expect(r0).toMatchObject({ status: "fulfilled", value: { recorded: 2, job: { status: "completed" } } });
    const j1Outcomes = [r1a, r1b].map((o) => o?.status).sort();
    expect(j1Outcomes).toEqual(["fulfilled", "rejected"]);
    const refused = [r1a, r1b].find((o) => o?.status === "rejected") as PromiseRejectedResult;
    expect(refused.reason).toBeInstanceOf(InvalidTransitionError);
    expect(r2).toMatchObject({ status: "fulfilled", value: { recorded: 1 } });
    expect(r3).toMatchObject({ status: "fulfilled", value: { recorded: 1 } });
    expect((missing as PromiseRejectedResult).reason).toBeInstanceOf(NotFoundError);
    expect((bad as PromiseRejectedResult).reason).toBeInstanceOf(NotFoundError);
    expect(r4).toMatchObject({ status: "fulfilled", value: { recorded: 2 } });
    // Written in fewer transactions than there were submissions.
    const after = resultWriterStats(ctx);
    expect(after.submissions - before.submissions).toBe(7); // "not-a-job" is refused before queueing
    expect(after.transactions - before.transactions).toBeLessThan(7);

    // Every job started (it was dispatching) and completed exactly once, with its counts.
    const rows = await db.many<{
      id: string;
      status: string;
      agent_id: string;
      started_at: Date | null;
      success_count: number;
      failure_count: number;
      results: unknown[];
    }>(sql`SELECT id, status, agent_id, started_at, success_count, failure_count, results FROM poll_jobs`);
    const byJob = new Map(rows.map((r) => [r.id, r]));
    for (const j of jobs) {
      expect(byJob.get(j.id)).toMatchObject({ status: "completed", agent_id: "agent-1" });
      expect(byJob.get(j.id)?.started_at).not.toBeNull();
    }
    expect(byJob.get(j1.id)?.results).toEqual([]);
    expect(byJob.get(j2.id)?.results).toHaveLength(1); // the foreign result is ignored
    expect(byJob.get(j3.id)).toMatchObject({ success_count: 0, failure_count: 1 });

    // One service_status row per recorded result; one response-time sample per timed result.
    const status = await db.many<{ service_check_id: string; n: number }>(sql`
      SELECT service_check_id, count(*)::int AS n FROM service_status GROUP BY 1`);
    expect(status.every((s) => s.n === 1)).toBe(true);
    expect(status).toHaveLength(2 + 0 + 1 + 1 + 2);
    const series = await db.one<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM timeseries_metrics WHERE metric_name = 'response_time_ms'`,
    );
    expect(series?.n).toBe(5);
    const row = await db.one<{ details: Record<string, unknown>; available: boolean; agent_id: string }>(
      sql`SELECT details, available, agent_id FROM service_status WHERE service_check_id = ${j0.checks[0]?.id}`,
    );
    expect(row).toMatchObject({ available: true, agent_id: "agent-1", details: { target: "127.0.0.1" } });

    // Checks: last_* set, consecutive failures counted, nothing left in flight.
    const checks = await db.many<{
      id: string;
      last_result: string | null;
      last_response_time_ms: number | null;
      last_error: string | null;
      consecutive_failures: number;
      inflight_job_id: string | null;
    }>(sql`SELECT id, last_result, last_response_time_ms, last_error, consecutive_failures, inflight_job_id
           FROM service_checks`);
    expect(checks).toHaveLength(ids.length);
    expect(checks.every((c) => c.inflight_job_id === null)).toBe(true);
    const c = new Map(checks.map((x) => [x.id, x]));
    expect(c.get(j0.checks[0]?.id as string)).toMatchObject({
      last_result: "success",
      last_response_time_ms: 5,
    });
    expect(c.get(j2.checks[1]?.id as string)).toMatchObject({ last_result: null }); // no result sent
    expect(c.get(j1.checks[0]?.id as string)).toMatchObject({ last_result: null });
    expect(c.get(j3.checks[0]?.id as string)).toMatchObject({
      last_result: "critical",
      last_error: "refused",
      last_response_time_ms: null,
      consecutive_failures: 1,
    });
  });

  it("falls back to one transaction per submission when a group fails, so only the bad one fails", async () => {
    await addChecks(6);
    const [first, good, poisoned] = await dueJobs(2);
    if (!first || !good || !poisoned) throw new Error("expected three jobs");
    const submit = (job: JobPayload, error?: string) =>
      completeJob(ctx, job.id, {
        agentId: "agent-1",
        results: job.checks.map((c) => ({ check_id: c.id, status: "error", response_time_ms: null, error })),
      });
    // A NUL character cannot be stored in PostgreSQL text: the database refuses the write.
    const [a, b, c] = await Promise.allSettled([
      submit(first),
      submit(good),
      submit(poisoned, "bad\u0000byte"),
    ]);
    expect(a.status).toBe("fulfilled");
    expect(b.status).toBe("fulfilled");
    expect(c.status).toBe("rejected");
    const jobs = new Map(
      (await db.many<{ id: string; status: string }>(sql`SELECT id, status FROM poll_jobs`)).map((j) => [
        j.id,
        j.status,
      ]),
    );
    expect(jobs.get(first.id)).toBe("completed");
    expect(jobs.get(good.id)).toBe("completed");
    expect(jobs.get(poisoned.id)).toBe("dispatching"); // untouched: it can be retried or reaped
    const n = await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM service_status`);
    expect(n?.n).toBe(4);
  });

  it("raises and clears the critical-threshold and consecutive-failure alerts", async () => {
    const [id] = await addChecks(1, { critical_threshold_ms: 100 });
    const round = async (result: Record<string, unknown>) => {
      const [job] = await dueJobs(100);
      await completeJob(ctx, job?.id as string, {
        agentId: "agent-1",
        results: [{ check_id: id, ...result }],
      });
    };
    const open = async () =>
      (
        await db.many<{ incident_key: string }>(sql`
          SELECT incident_key FROM alerts WHERE service_check_id = ${id} AND status <> 'resolved' ORDER BY 1`)
      ).map((a) => a.incident_key.split(":").at(-1));

    await round({ status: "warning", response_time_ms: 150 });
    expect(await open()).toEqual(["critical_threshold"]);
    for (let i = 1; i <= FAILURE_ALERT_THRESHOLD; i++) {
      await round({ status: "critical", response_time_ms: null, error: "timeout" });
      const expected = i >= FAILURE_ALERT_THRESHOLD ? ["consecutive_failures"] : [];
      // The slow result's alert clears once a result is no longer over the threshold.
      expect(await open()).toEqual(expected);
    }
    const check = await db.one<{ consecutive_failures: number }>(
      sql`SELECT consecutive_failures FROM service_checks WHERE id = ${id}`,
    );
    expect(check?.consecutive_failures).toBe(FAILURE_ALERT_THRESHOLD);
    await round({ status: "success", response_time_ms: 12 });
    expect(await open()).toEqual([]);
    const after = await db.one<{ consecutive_failures: number; last_result: string }>(
      sql`SELECT consecutive_failures, last_result FROM service_checks WHERE id = ${id}`,
    );
    expect(after).toEqual({ consecutive_failures: 0, last_result: "success" });
  });
});
