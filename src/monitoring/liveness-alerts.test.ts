import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../test/helpers/context.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";
import { agentOperation, gatewayOperation, markSilent, registerAgent, registerGateway } from "./fleet.ts";
import { clearRecoveredSilenceAlerts, raiseSilenceAlerts } from "./liveness-alerts.ts";

describe("gateways and agents that stop heartbeating", () => {
  let ctx: AppContext;
  let clock = Date.parse("2026-11-24T12:00:00Z");
  beforeAll(async () => {
    ctx = await createTestContext();
    ctx.now = () => new Date(clock);
  });
  afterAll(async () => {
    await ctx?.db.close();
  });

  const openAlerts = () =>
    ctx.db.many<{ title: string; source_type: string; source_id: string; severity: string }>(
      sql`SELECT title, source_type, source_id, severity FROM alerts
          WHERE status IN ('pending', 'acknowledged', 'escalated') ORDER BY source_type`,
    );

  it("raise one critical alert each, once, and resolve them when heartbeats resume", async () => {
    await registerGateway(ctx, "gw-silent", {});
    await registerAgent(ctx, "ag-silent", {});
    await agentOperation(ctx, "ag-silent", "establish_connection", { gateway_id: "gw-silent" });
    // A drained gateway is offline on purpose and must not alert.
    await registerGateway(ctx, "gw-drained", {});
    await gatewayOperation(ctx, "gw-drained", "start_draining");
    await gatewayOperation(ctx, "gw-drained", "finish_draining");

    clock += 120_000;
    const silent = await markSilent(ctx, 60);
    expect(silent).toEqual({ gateways: ["gw-silent"], agents: ["ag-silent"] });
    await raiseSilenceAlerts(ctx, silent, 60);
    await raiseSilenceAlerts(ctx, silent, 60); // a second sweep opens nothing new
    expect(await openAlerts()).toEqual([
      {
        title: "Agent ag-silent stopped heartbeating",
        source_type: "agent",
        source_id: "ag-silent",
        severity: "critical",
      },
      {
        title: "Gateway gw-silent stopped heartbeating",
        source_type: "gateway",
        source_id: "gw-silent",
        severity: "critical",
      },
    ]);
    expect(await clearRecoveredSilenceAlerts(ctx)).toBe(0);

    // The gateway comes back (re-registration walks it to healthy); the agent does not.
    await registerGateway(ctx, "gw-silent", {});
    expect(await clearRecoveredSilenceAlerts(ctx)).toBe(1);
    expect((await openAlerts()).map((a) => a.source_id)).toEqual(["ag-silent"]);
    const resolved = await ctx.db.one<{ resolved_by: string; resolution_note: string }>(
      sql`SELECT resolved_by, resolution_note FROM alerts WHERE source_id = 'gw-silent'`,
    );
    expect(resolved).toEqual({ resolved_by: "system", resolution_note: "heartbeats resumed" });
  });
});
