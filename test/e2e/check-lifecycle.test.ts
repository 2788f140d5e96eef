import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { raiseAlert } from "../../src/alerting/raise.ts";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * Issue 13 (alert lifecycle, first part): checks can be deleted, and a check that is disabled
 * or deleted resolves its open alerts with the reason instead of leaving them pending forever.
 */
const J = "application/vnd.api+json";

describe("check lifecycle and its alerts", () => {
  let server: TestServer;
  let operator: Record<string, string>;
  let viewer: Record<string, string>;

  beforeAll(async () => {
    server = await startTestServer();
    operator = authHeaders(await tokenFor(server, "operator"));
    viewer = authHeaders(await tokenFor(server, "viewer"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function createFailingCheck(name: string): Promise<string> {
    const res = await server.fetch("/api/v2/service-checks", {
      method: "POST",
      headers: { ...operator, "content-type": J },
      body: JSON.stringify({
        data: {
          type: "service-check",
          attributes: { name, check_type: "tcp", target: "127.0.0.1", port: 9 },
        },
      }),
    });
    expect(res.status).toBe(201);
    const id = ((await res.json()) as { data: { id: string } }).data.id;
    await raiseAlert(server.ctx, {
      service_check_id: id,
      reason: "consecutive_failures",
      title: `${name} is failing`,
      severity: "critical",
    });
    return id;
  }

  const alertOf = (id: string) =>
    server.db.one<{ status: string; resolution_note: string | null }>(
      sql`SELECT status, resolution_note FROM alerts WHERE service_check_id = ${id} ORDER BY triggered_at DESC LIMIT 1`,
    );

  it("resolves the open alert of a check that is disabled", async () => {
    const id = await createFailingCheck("to-disable");
    expect((await alertOf(id))?.status).toBe("pending");
    const res = await server.fetch(`/api/v2/service-checks/${id}`, {
      method: "PATCH",
      headers: { ...operator, "content-type": J },
      body: JSON.stringify({ data: { type: "service-check", id, attributes: { enabled: false } } }),
    });
    expect(res.status).toBe(200);
    expect(await alertOf(id)).toEqual({ status: "resolved", resolution_note: "service check disabled" });
  });

  it("deletes a check (operators only) and resolves its open alert; history stays", async () => {
    const id = await createFailingCheck("to-delete");
    const denied = await server.fetch(`/api/v2/service-checks/${id}`, { method: "DELETE", headers: viewer });
    expect(denied.status).toBe(403);
    const res = await server.fetch(`/api/v2/service-checks/${id}`, { method: "DELETE", headers: operator });
    expect([200, 204]).toContain(res.status);
    expect((await server.fetch(`/api/v2/service-checks/${id}`, { headers: operator })).status).toBe(404);
    expect(await alertOf(id)).toEqual({ status: "resolved", resolution_note: "service check deleted" });
  });
});
