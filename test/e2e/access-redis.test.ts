import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer } from "../helpers/server.ts";

const hasRedis = spawnSync("redis-server", ["--version"]).status === 0;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, "127.0.0.1", () => {
        s.end();
        resolve(true);
      });
      s.on("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`redis did not listen on ${port}`);
}

describe.runIf(hasRedis)("request budget in Redis (REDIS_URL)", () => {
  let redis: ChildProcess;
  let url: string;
  beforeAll(async () => {
    const port = await freePort();
    redis = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      {
        stdio: "ignore",
      },
    );
    await waitForPort(port);
    url = `redis://127.0.0.1:${port}`;
  });
  afterAll(() => {
    redis?.kill("SIGTERM");
  });

  it("two servers with one Redis share one budget", async () => {
    const env = { REDIS_URL: url, NETMON_RATE_LIMIT_API_DEFAULT: "3/60s" };
    const a = await startTestServer({ env });
    const b = await startTestServer({ env });
    try {
      const ta = authHeaders(await tokenFor(a, "viewer"));
      const tb = authHeaders(await tokenFor(b, "viewer"));
      expect((await a.fetch("/api/v1/me", { headers: ta })).status).toBe(200);
      expect((await b.fetch("/api/v1/me", { headers: tb })).status).toBe(200);
      const third = await a.fetch("/api/v1/me", { headers: ta });
      expect(third.status).toBe(200);
      expect(third.headers.get("x-ratelimit-remaining")).toBe("0");
      const denied = await b.fetch("/api/v1/me", { headers: tb });
      expect(denied.status).toBe(429);
      expect(Number(denied.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      // 401s do not consume the Redis budget either.
      expect((await a.fetch("/api/v1/me")).status).toBe(401);
    } finally {
      await a.stop();
      await b.stop();
    }
  }, 120_000);
});
