import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * Issue 10 item 8: an unreachable Redis costs requests nothing (fail fast, breaker, per-process
 * fallback), /health says degraded, and the breaker closes when Redis answers again.
 */
const REAL_REDIS = 6379;

describe("degraded Redis", () => {
  let proxy: net.Server;
  let mode: "blackhole" | "forward" = "blackhole";
  const sockets = new Set<net.Socket>();
  let server: TestServer;
  let token: string;

  beforeAll(async () => {
    // A listener that accepts and never answers (the worst case: no RST, just silence), and
    // later forwards to the real Redis.
    proxy = net.createServer((client) => {
      sockets.add(client);
      client.on("close", () => sockets.delete(client));
      client.on("error", () => undefined);
      if (mode === "forward") {
        const upstream = net.connect(REAL_REDIS, "127.0.0.1");
        upstream.on("error", () => client.destroy());
        client.pipe(upstream).pipe(client);
      }
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
    const port = (proxy.address() as net.AddressInfo).port;
    server = await startTestServer({ env: { REDIS_URL: `redis://127.0.0.1:${port}` } });
    token = await tokenFor(server, "viewer");
  });
  afterAll(async () => {
    await server?.stop();
    for (const s of sockets) s.destroy();
    proxy?.close();
  });

  it("serves requests at once while Redis is silent, and reports it in /health", async () => {
    // Budgets still apply (from the per-process fallback), answers come without waiting on Redis.
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        const controller = new AbortController();
        const t = setTimeout(() => controller.abort(), 8000);
        try {
          const res = await server.fetch("/api/v2/devices", {
            headers: authHeaders(token),
            signal: controller.signal,
          });
          statuses.push(res.status);
        } finally {
          clearTimeout(t);
        }
      }),
    );
    expect(statuses.filter((s) => s === 200).length).toBe(10);
    const health = (await (await server.fetch("/health")).json()) as {
      status: string;
      rate_limit_store: { backend: string; status: string };
    };
    expect(health.status).toBe("degraded");
    expect(health.rate_limit_store).toMatchObject({ backend: "redis", status: "degraded" });
  });

  it("closes the breaker when Redis answers again", async () => {
    mode = "forward";
    for (const s of sockets) s.destroy(); // ioredis reconnects, now through to the real Redis
    const deadline = Date.now() + 20_000;
    let status = "degraded";
    while (Date.now() < deadline && status !== "ok") {
      await server.fetch("/api/v2/devices", { headers: authHeaders(token) });
      status = ((await (await server.fetch("/health")).json()) as { status: string }).status;
      if (status !== "ok") await new Promise((r) => setTimeout(r, 500));
    }
    expect(status).toBe("ok");
  });
});
