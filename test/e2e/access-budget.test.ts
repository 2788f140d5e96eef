import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresRateStore } from "../../src/access/rate-limit.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { createPgDatabase, createTestDatabase, testBackend } from "../helpers/database.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

describe("request budget api_default", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      env: { NETMON_RATE_LIMIT_API_DEFAULT: "5/60s", NETMON_RATE_LIMIT_ADMIN: "3/60s" },
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("401s consume nothing; the budget is per IP across tokens and routes; 429 carries body and headers", async () => {
    for (let i = 0; i < 8; i++) {
      const res = await server.fetch("/api/v1/me");
      expect(res.status).toBe(401);
      expect(res.headers.get("x-ratelimit-remaining")).toBeNull();
    }
    const a = await tokenFor(server, "viewer");
    const b = await tokenFor(server, "admin");
    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) {
      const path = i % 2 === 0 ? "/api/v1/me" : "/api/v1/api-credentials";
      const res = await server.fetch(path, { headers: authHeaders(i < 3 ? a : b) });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit")).toBe("5");
      const reset = Number(res.headers.get("x-ratelimit-reset"));
      expect(reset).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000) + 50);
      expect(reset).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 61);
      remaining.push(res.headers.get("x-ratelimit-remaining") as string);
    }
    expect(remaining).toEqual(["4", "3", "2", "1", "0"]);

    const denied = await server.fetch("/api/v1/me", { headers: authHeaders(b) });
    expect(denied.status).toBe(429);
    expect(denied.headers.get("content-type")).toMatch(/^application\/json/);
    const body = (await denied.json()) as { error: string; retry_after: number };
    expect(body.error).toBe("rate_limited");
    expect(Number.isInteger(body.retry_after)).toBe(true);
    expect(body.retry_after).toBeGreaterThanOrEqual(1);
    expect(body.retry_after).toBeLessThanOrEqual(60);
    expect(denied.headers.get("retry-after")).toBe(String(body.retry_after));
    expect(denied.headers.get("x-ratelimit-remaining")).toBe("0");
    expect(denied.headers.get("x-ratelimit-limit")).toBe("5");

    // Still 401 (not 429) without credentials: authentication is checked first.
    expect((await server.fetch("/api/v1/me")).status).toBe(401);

    // /api/admin has its own budget.
    const admin = await server.fetch("/api/admin/users", { headers: authHeaders(b) });
    expect(admin.status).toBe(200);
    expect(admin.headers.get("x-ratelimit-limit")).toBe("3");
    expect(admin.headers.get("x-ratelimit-remaining")).toBe("2");

    // The window slides: a minute later the budget is back.
    const realNow = server.ctx.now;
    server.ctx.now = () => new Date(Date.now() + 61_000);
    try {
      const later = await server.fetch("/api/v1/me", { headers: authHeaders(a) });
      expect(later.status).toBe(200);
      expect(later.headers.get("x-ratelimit-remaining")).toBe("4");
    } finally {
      server.ctx.now = realNow;
    }
  });

  it("the admin budget is exhausted independently with 429", async () => {
    const b = await tokenFor(server, "admin");
    const statuses: number[] = [];
    let body: unknown = null;
    for (let i = 0; i < 4; i++) {
      const res = await server.fetch("/api/admin/role-profiles", { headers: authHeaders(b) });
      statuses.push(res.status);
      body = await res.json();
    }
    // The previous test used 1 of the admin budget (3): two more pass, then 429.
    expect(statuses).toEqual([200, 200, 429, 429]);
    expect((body as { error: string }).error).toBe("rate_limited");
  });
});

describe("request budget keyed by client IP behind a trusted proxy", () => {
  it("honours X-Forwarded-For only from configured proxies", async () => {
    const trusted = await startTestServer({
      env: { NETMON_RATE_LIMIT_API_DEFAULT: "2/60s", NETMON_TRUSTED_PROXIES: "127.0.0.1" },
    });
    const untrusted = await startTestServer({ env: { NETMON_RATE_LIMIT_API_DEFAULT: "2/60s" } });
    try {
      for (const server of [trusted, untrusted]) {
        const t = await tokenFor(server, "viewer");
        const call = (ip: string) =>
          server.fetch("/api/v1/me", { headers: { ...authHeaders(t), "x-forwarded-for": ip } });
        await call("203.0.113.1");
        await call("203.0.113.1");
        const other = await call("203.0.113.2");
        // Trusted: a different client IP has its own budget. Untrusted: the header is ignored.
        expect(other.status).toBe(server === trusted ? 200 : 429);
      }
    } finally {
      await trusted.stop();
      await untrusted.stop();
    }
  }, 120_000);
});

describe.runIf(testBackend() === "postgres")("request budget shared between replicas", () => {
  it("the PostgreSQL store is exact under concurrency (no overshoot)", async () => {
    const { db } = await createTestDatabase();
    try {
      const store = new PostgresRateStore(db);
      const now = Math.floor(Date.now() / 1000);
      const results = await Promise.all(
        Array.from({ length: 30 }, () => store.hit("race:k", 10, 60, now, true)),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(10);
      const row = await db.one<{ n: number }>(
        "SELECT sum(hits)::int AS n FROM rate_limit_counters WHERE key = 'race:k'",
      );
      expect(row?.n).toBe(10);
    } finally {
      await db.close();
    }
  });

  it("two servers on one PostgreSQL draw from one budget", async () => {
    const url = await createPgDatabase();
    // Replicas share the instance secret (tokens signed by one verify on the other).
    const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-key-"));
    const env = {
      DATABASE_URL: url,
      NETMON_RATE_LIMIT_API_DEFAULT: "4/60s",
      NETMON_SECRET_KEY_FILE: path.join(keyDir, "secret.key"),
    };
    const a = await startTestServer({ env });
    const b = await startTestServer({ env });
    try {
      const token = await tokenFor(a, "viewer");
      const h = { headers: authHeaders(token) };
      expect((await a.fetch("/api/v1/me", h)).status).toBe(200);
      expect((await b.fetch("/api/v1/me", h)).status).toBe(200);
      expect((await a.fetch("/api/v1/me", h)).status).toBe(200);
      const fourth = await b.fetch("/api/v1/me", h);
      expect(fourth.status).toBe(200);
      expect(fourth.headers.get("x-ratelimit-remaining")).toBe("0");
      expect((await a.fetch("/api/v1/me", h)).status).toBe(429);
      expect((await b.fetch("/api/v1/me", h)).status).toBe(429);
    } finally {
      await a.stop();
      await b.stop();
      fs.rmSync(keyDir, { recursive: true, force: true });
    }
  }, 120_000);
});
