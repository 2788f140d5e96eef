import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../test/helpers/context.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";
import { scheduleDue } from "./scheduler.ts";

describe("placement of checks", () => {
  let ctx: AppContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx?.db.close();
  });

  it("sends unassigned checks to the default (embedded) agent and pinned checks to their agent", async () => {
    const due = new Date(Date.now() - 1000);
    await ctx.db.query(sql`
      INSERT INTO service_checks (name, check_type, target, interval_seconds, agent_uid, next_run_at) VALUES
        ('unassigned', 'tcp', '127.0.0.1', 60, NULL, ${due}),
        ('pinned', 'tcp', '127.0.0.1', 60, 'remote-1', ${due})`);
    await scheduleDue(ctx, { defaultAgentUid: "embedded-core-a" });
    const jobs = await ctx.db.many<{ target_agent_uid: string | null; names: string[] }>(sql`
      SELECT j.target_agent_uid, array_agg(c.name ORDER BY c.name) AS names
      FROM poll_jobs j JOIN service_checks c ON c.id = ANY(j.check_ids)
      GROUP BY j.target_agent_uid ORDER BY j.target_agent_uid`);
    expect(jobs).toEqual([
      { target_agent_uid: "embedded-core-a", names: ["unassigned"] },
      { target_agent_uid: "remote-1", names: ["pinned"] },
    ]);
  });
});
