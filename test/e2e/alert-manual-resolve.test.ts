import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Issue 13 (alert lifecycle): resolving an alert by hand while its check still fails does not
 * re-fire it on the next run; it fires again only after the check has recovered and fails anew.
 */
const J = "application/vnd.api+json";

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe("manual resolve of a still-failing check", () => {
  let server: TestServer;
  let operator: Record<string, string>;
  let port: number;

  beforeAll(async () => {
    port = await freePort();
    server = await startTestServer({
      env: { NETMON_EMBEDDED_AGENT: "true", NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" },
    });
    operator = authHeaders(await tokenFor(server, "operator"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  const openAlert = (checkId: string) =>
    server.db.one<{ id: string }>(
      sql`SELECT id FROM alerts WHERE service_check_id = ${checkId} AND status IN ('pending', 'acknowledged') LIMIT 1`,
    );
  const failures = async (checkId: string) =>
    (
      await server.db.one<{ n: number }>(
        sql`SELECT consecutive_failures AS n FROM service_checks WHERE id = ${checkId}`,
      )
    )?.n ?? 0;

  it("stays resolved while failing, and fires again after a recovery", async () => {
    const created = await server.fetch("/api/v2/service-checks", {
      method: "POST",
      headers: { ...operator, "content-type": J },
      body: JSON.stringify({
        data: {
          type: "service-check",
          attributes: { name: "flappy", check_type: "tcp", target: "127.0.0.1", port, interval_seconds: 1 },
        },
      }),
    });
    expect(created.status).toBe(201);
    const checkId = ((await created.json()) as { data: { id: string } }).data.id;

    const first = await waitFor(() => openAlert(checkId), "the first alert");
    const resolved = await server.fetch(`/api/v2/alerts/${first.id}/resolve`, {
      method: "PATCH",
      headers: { ...operator, "content-type": J },
      body: JSON.stringify({ data: { type: "alert", attributes: { resolution_note: "known, fixing" } } }),
    });
    expect(resolved.status).toBe(200);
    const at = await failures(checkId);
    await waitFor(async () => (await failures(checkId)) >= at + 3, "three more failing runs");
    expect(await openAlert(checkId)).toBeUndefined();

    // Recover, then fail again: a new alert.
    const listener = net.createServer((s) => s.end());
    await new Promise<void>((r) => listener.listen(port, "127.0.0.1", r));
    await waitFor(async () => (await failures(checkId)) === 0, "a successful run");
    await new Promise<void>((r) => listener.close(() => r()));
    const second = await waitFor(() => openAlert(checkId), "a new alert after the recovery");
    expect(second.id).not.toBe(first.id);
  }, 90_000);
});
