import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../test/helpers/context.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";
import { isStale, overdueAfterSeconds, sweepOverdueChecks } from "./overdue.ts";

describe("overdue checks", () => {
  let ctx: AppContext;
  const clock = Date.parse("2026-11-24T12:00:00Z");
  beforeAll(async () => {
    ctx = await createTestContext();
    ctx.now = () => new Date(clock);
  });
  afterAll(async () => {
    await ctx?.db.close();
  });

  it("are stale after three intervals, and at least the interval plus two minutes", () => {
    expect(overdueAfterSeconds(60)).toBe(180);
    expect(overdueAfterSeconds(10)).toBe(130);
    const now = Date.parse("2026-11-24T12:10:00Z");
    const row = { enabled: true, interval_seconds: 60, created_at: "2026-11-24T11:00:00Z" };
    expect(isStale({ ...row, last_check_at: "2026-11-24T12:07:30Z" }, now)).toBe(false);
    expect(isStale({ ...row, last_check_at: "2026-11-24T12:06:30Z" }, now)).toBe(true);
    expect(isStale({ ...row, last_check_at: null }, now)).toBe(true);
    expect(isStale({ ...row, enabled: false, last_check_at: null }, now)).toBe(false);
  });

  it("open a warning naming why, once, and resolve it when results flow again", async () => {
    const created = new Date(clock - 3_600_000);
    const check = await ctx.db.one<{ id: string }>(sql`
      INSERT INTO service_checks (name, check_type, target, interval_seconds, agent_uid, created_at)
      VALUES ('pinned to a ghost', 'tcp', '127.0.0.1', 60, 'ghost-agent', ${created}) RETURNING id`);
    await ctx.db.query(sql`
      INSERT INTO service_checks (name, check_type, target, interval_seconds, created_at, last_check_at)
      VALUES ('fresh', 'tcp', '127.0.0.1', 60, ${created}, ${new Date(clock - 30_000)})`);
    expect(await sweepOverdueChecks(ctx)).toEqual({ raised: 1, cleared: 0 });
    expect(await sweepOverdueChecks(ctx)).toEqual({ raised: 0, cleared: 0 });
    const alert = await ctx.db.one<{
      title: string;
      description: string;
      severity: string;
      service_check_id: string;
    }>(sql`SELECT title, description, severity, service_check_id FROM alerts WHERE status = 'pending'`);
    expect(alert).toMatchObject({
      severity: "warning",
      service_check_id: check?.id,
      title: "pinned to a ghost: no result yet",
    });
    expect(alert?.description).toContain("pinned to agent ghost-agent, which is not registered");

    await ctx.db.query(
      sql`UPDATE service_checks SET last_check_at = ${new Date(clock)} WHERE id = ${check?.id}`,
    );
    expect(await sweepOverdueChecks(ctx)).toEqual({ raised: 0, cleared: 1 });
    const after = await ctx.db.one<{ status: string; resolution_note: string }>(
      sql`SELECT status, resolution_note FROM alerts WHERE service_check_id = ${check?.id}`,
    );
    expect(after).toEqual({ status: "resolved", resolution_note: "results arrive again" });
  });
});
