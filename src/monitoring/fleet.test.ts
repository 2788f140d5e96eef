import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../test/helpers/context.ts";
import type { AppContext } from "../kernel/context.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { gatewayOperation, registerGateway } from "./fleet.ts";

describe("gateway fleet operations", () => {
  let db: Db;
  let ctx: AppContext;
  beforeAll(async () => {
    ctx = await createTestContext();
    db = ctx.db;
  });
  afterAll(async () => {
    await db?.close();
  });

  it("a heartbeat delivered after drain/finish does not mark the offline gateway healthy", async () => {
    await registerGateway(ctx, "gw-late", {});
    await gatewayOperation(ctx, "gw-late", "start_draining");
    await gatewayOperation(ctx, "gw-late", "finish_draining");
    await gatewayOperation(ctx, "gw-late", "heartbeat", { is_healthy: true, agent_count: 1 });
    const row = await db.one<{ status: string; is_healthy: boolean }>(
      sql`SELECT status, is_healthy FROM gateways WHERE gateway_id = ${"gw-late"}`,
    );
    expect(row).toEqual({ status: "offline", is_healthy: false });
  });

  it("a heartbeat from a healthy gateway still reports its health", async () => {
    await registerGateway(ctx, "gw-ok", {});
    await gatewayOperation(ctx, "gw-ok", "heartbeat", { is_healthy: false });
    await gatewayOperation(ctx, "gw-ok", "heartbeat", { is_healthy: true });
    const row = await db.one<{ is_healthy: boolean }>(
      sql`SELECT is_healthy FROM gateways WHERE gateway_id = ${"gw-ok"}`,
    );
    expect(row?.is_healthy).toBe(true);
  });
});
