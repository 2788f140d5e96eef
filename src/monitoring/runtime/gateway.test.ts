import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../../test/helpers/context.ts";
import type { AppContext } from "../../kernel/context.ts";
import type { Db } from "../../storage/db.ts";
import { sql } from "../../storage/sql.ts";
import { jobSignal } from "../jobs.ts";
import { scheduleDue } from "../scheduler.ts";
import { Gateway } from "./gateway.ts";
import { type CoreLink, inProcessCoreLink } from "./links.ts";

/** The real in-process link, counting how many claims are open at the core at once. */
function countingLink(ctx: AppContext) {
  const link = inProcessCoreLink(ctx);
  const stats = { open: 0, maxOpen: 0, calls: 0 };
  const counted: CoreLink = {
    ...link,
    claim: async (req, signal) => {
      stats.calls++;
      stats.open++;
      stats.maxOpen = Math.max(stats.maxOpen, stats.open);
      try {
        return await link.claim(req, signal);
      } finally {
        stats.open--;
      }
    },
  };
  return { link: counted, stats };
}

describe("gateway claim multiplexing (database)", () => {
  let db: Db;
  let ctx: AppContext;
  beforeAll(async () => {
    ctx = await createTestContext();
    db = ctx.db;
  });
  afterAll(async () => {
    await db?.close();
  });

  async function dueChecks(n: number, agentUid: string | null): Promise<void> {
    await db.query(sql`
      INSERT INTO service_checks (name, check_type, target, port, agent_uid, next_run_at)
      SELECT 'c' || gen_random_uuid() || '-' || g, 'tcp', '127.0.0.1', 80, ${agentUid}, now() - interval '1 second'
      FROM generate_series(1, ${n}::int) g`);
  }

  it("keeps one claim open at the core for 40 waiting agents and hands pinned jobs to their agent", async () => {
    const { link, stats } = countingLink(ctx);
    const gw = new Gateway({ id: "gw-mux", core: link, log: ctx.log, claimWaitMs: 5_000 });
    await gw.start();
    const agents = Array.from({ length: 40 }, (_, i) => `agent-${i}`);
    const got = new Map<string, string[]>();
    let agentClaims = 0;
    const deadline = Date.now() + 30_000;
    // Every agent long-polls for one job at a time until all 25 jobs are handed out.
    const loops = agents.map(async (uid) => {
      while (Date.now() < deadline && [...got.values()].flat().length < 25) {
        agentClaims++;
        for (const j of await gw.agentClaim(uid, 1, 500)) got.set(uid, [...(got.get(uid) ?? []), j.id]);
      }
    });
    await new Promise((r) => setTimeout(r, 200));
    await dueChecks(5, "agent-3");
    await dueChecks(20, null);
    expect((await scheduleDue(ctx, { batch: 1 })).jobs).toBe(25);
    jobSignal(ctx).emit("jobs");
    await Promise.all(loops);

    const handed = [...got.values()].flat();
    expect(handed).toHaveLength(25);
    expect(new Set(handed).size).toBe(25);
    const rows = await db.many<{
      id: string;
      status: string;
      agent_id: string;
      target_agent_uid: string | null;
    }>(sql`SELECT id, status, agent_id, target_agent_uid FROM poll_jobs`);
    for (const r of rows) {
      expect(r.status).toBe("running");
      expect(got.get(r.agent_id)).toContain(r.id);
      if (r.target_agent_uid) expect(r.agent_id).toBe(r.target_agent_uid);
    }
    expect(rows.filter((r) => r.target_agent_uid === "agent-3")).toHaveLength(5);
    // One claim at a time, whatever the number of agents waiting.
    expect(stats.maxOpen).toBe(1);
    expect(stats.calls).toBeLessThan(agentClaims);
    await gw.stop();
  });

  it("hands pooled jobs only to waiting agents that carry the pool's labels", async () => {
    await db.query(sql`DELETE FROM poll_jobs`);
    await db.query(sql`UPDATE service_checks SET enabled = false`);
    const agents = Array.from({ length: 10 }, (_, i) => `pool-agent-${i}`);
    for (const [i, uid] of agents.entries()) {
      await db.query(sql`INSERT INTO agents (uid, status, labels) VALUES (${uid}, 'connected',
        ${JSON.stringify(i >= 7 ? { pool: "b", site: "x" } : { pool: "a" })}::jsonb)`);
    }
    const gw = new Gateway({ id: "gw-pool", core: inProcessCoreLink(ctx), log: ctx.log, claimWaitMs: 5_000 });
    await gw.start();
    const got = new Map<string, string[]>();
    const deadline = Date.now() + 30_000;
    const loops = agents.map(async (uid) => {
      while (Date.now() < deadline && [...got.values()].flat().length < 8) {
        for (const j of await gw.agentClaim(uid, 1, 500)) got.set(uid, [...(got.get(uid) ?? []), j.id]);
      }
    });
    await new Promise((r) => setTimeout(r, 200));
    await db.query(sql`
      INSERT INTO service_checks (name, check_type, target, port, agent_labels, next_run_at)
      SELECT 'pooled-' || g, 'tcp', '127.0.0.1', 80, '{"pool": "b"}', now() - interval '1 second'
      FROM generate_series(1, 8) g`);
    expect((await scheduleDue(ctx, { batch: 1, defaultAgentUid: "pool-agent-0" })).jobs).toBe(8);
    jobSignal(ctx).emit("jobs");
    await Promise.all(loops);
    const ran = await db.many<{ agent_id: string }>(
      sql`SELECT agent_id FROM poll_jobs WHERE status = 'running'`,
    );
    expect(ran).toHaveLength(8);
    for (const r of ran) expect(["pool-agent-7", "pool-agent-8", "pool-agent-9"]).toContain(r.agent_id);
    await gw.stop();
  });

  it("gives jobs claimed for an agent that left back to the core when it drains", async () => {
    await db.query(sql`DELETE FROM poll_jobs`);
    await db.query(sql`UPDATE service_checks SET enabled = false, inflight_job_id = NULL`);
    const gw = new Gateway({ id: "gw-drain", core: inProcessCoreLink(ctx), log: ctx.log });
    await gw.start();
    // The agent gives up after 50 ms; the shared core claim (1 s) is still open for it.
    expect(await gw.agentClaim("agent-late", 1, 50)).toEqual([]);
    await dueChecks(1, null);
    expect((await scheduleDue(ctx, { batch: 1 })).jobs).toBe(1);
    jobSignal(ctx).emit("jobs");
    const until = Date.now() + 5_000;
    while (gw.backlogSize === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(gw.backlogSize).toBe(1);
    await gw.stop();
    const job = await db.one<{ status: string; retry_count: number; error_message: string | null }>(
      sql`SELECT status, retry_count, error_message FROM poll_jobs`,
    );
    expect(job).toMatchObject({ status: "pending", retry_count: 1 });
    const g = await db.one<{ status: string }>(
      sql`SELECT status FROM gateways WHERE gateway_id = 'gw-drain'`,
    );
    expect(g?.status).toBe("offline");
  });
});
