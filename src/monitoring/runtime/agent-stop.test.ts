import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../../test/helpers/context.ts";
import { waitFor } from "../../../test/helpers/wait.ts";
import type { AppContext } from "../../kernel/context.ts";
import { sql } from "../../storage/sql.ts";
import type { CheckResult, CheckSpec } from "../checks/types.ts";
import { jobSignal } from "../jobs.ts";
import { scheduleDue } from "../scheduler.ts";
import { TargetPolicy } from "../target-policy.ts";
import { Agent, inProcessGatewayLink } from "./agent.ts";
import { Gateway } from "./gateway.ts";
import { inProcessCoreLink } from "./links.ts";

/**
 * Graceful stop loses nothing (issue 13): an agent stopping with 50 jobs in flight delivers what
 * finishes within its grace and hands the rest back; another agent runs those at once.
 */
describe("an agent stopping with 50 jobs in flight", () => {
  let ctx: AppContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx?.db.close();
  });

  it("finishes or hands back every job, and every check gets its result", async () => {
    const gw = new Gateway({ id: "gw-stop", core: inProcessCoreLink(ctx), log: ctx.log, claimWaitMs: 500 });
    await gw.start();
    // The first agent's checks: half finish quickly, half would take 60 s (past any grace).
    let released = false;
    const slowRunner = async (spec: CheckSpec): Promise<CheckResult> => {
      if (spec.name?.endsWith("-slow")) {
        await new Promise((r) => setTimeout(r, 60_000).unref());
        return { status: "success", response_time_ms: 60_000 };
      }
      await new Promise((r) => setTimeout(r, 50));
      return { status: "success", response_time_ms: 50 };
    };
    const agentOpts = {
      gateway: inProcessGatewayLink(gw),
      policy: new TargetPolicy({ allowLinkLocal: false }),
      log: ctx.log,
      hostMetricsMs: 0,
      maxJobs: 64,
    };
    const first = new Agent({ ...agentOpts, uid: "agent-stopping", runner: slowRunner });
    await first.start();
    await ctx.db.query(sql`
      INSERT INTO service_checks (name, check_type, target, port, interval_seconds, timeout_seconds, next_run_at)
      SELECT 'c' || g || CASE WHEN g % 2 = 0 THEN '-slow' ELSE '-fast' END, 'tcp', '127.0.0.1', 80, 3600, 120,
             now() - interval '1 second'
      FROM generate_series(1, 50) g`);
    expect((await scheduleDue(ctx, { batch: 1 })).jobs).toBe(50);
    jobSignal(ctx).emit("jobs");
    await waitFor(async () => {
      const r = await ctx.db.one<{ n: number }>(
        sql`SELECT count(*)::int AS n FROM poll_jobs WHERE status = 'running' AND agent_id = 'agent-stopping'`,
      );
      return (r?.n ?? 0) >= 25 ? true : null;
    }, "the slow half running on the first agent");

    await first.stop(1000);
    released = true;
    const after = await ctx.db.many<{ status: string; n: number }>(
      sql`SELECT status, count(*)::int AS n FROM poll_jobs GROUP BY status ORDER BY status`,
    );
    // Nothing is left claimed by the stopped agent: done, or back in the queue for another.
    expect(after.filter((r) => r.status !== "completed" && r.status !== "pending")).toEqual([]);
    expect(after.find((r) => r.status === "pending")?.n).toBe(25);

    // A second agent takes the handed-back jobs; every one of the 50 checks has its result.
    const second = new Agent({
      ...agentOpts,
      uid: "agent-taking-over",
      runner: async () => ({ status: "success", response_time_ms: 1 }),
    });
    await second.start();
    await waitFor(
      async () => {
        const r = await ctx.db.one<{ n: number }>(
          sql`SELECT count(*)::int AS n FROM service_checks WHERE last_result = 'success'`,
        );
        return r?.n === 50 ? true : null;
      },
      "all 50 checks with a result",
      30_000,
    );
    const jobs = await ctx.db.many<{ status: string; n: number }>(
      sql`SELECT status, count(*)::int AS n FROM poll_jobs GROUP BY status`,
    );
    expect(jobs).toEqual([{ status: "completed", n: 50 }]);
    await second.stop(1000);
    await gw.stop();
    expect(released).toBe(true);
  }, 60_000);
});
