import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, onTestFinished } from "vitest";
import { allFeatures } from "../../src/features.ts";
import { healthFeature } from "../../src/http/routes/health.ts";
import type { Feature } from "../../src/kernel/feature.ts";
import { createPgDatabase, testBackend } from "../helpers/database.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

/** Routes that exist only in these tests, to exercise the edge itself. */
function probeFeature(onSlowStarted?: () => void): Feature {
  const config = { access: { public: true }, rateLimit: "none" } as const;
  return {
    name: "probe",
    routes(app, ctx) {
      app.get("/test/slow", { config }, async () => {
        onSlowStarted?.();
        await new Promise((r) => setTimeout(r, 600));
        // The database must still be open for a request that started before shutdown.
        const row = await ctx.db.one<{ one: number }>("SELECT 1 AS one");
        return { finished: row?.one === 1 };
      });
      app.post("/api/test/echo", { config: { ...config, body: "validated" } }, async (req) => ({
        got: req.body,
      }));
      app.post("/api/v2/test/echo", { config: { ...config, body: "validated" } }, async (req) => ({
        got: req.body,
      }));
      app.get("/api/test/crash", { config }, async () => {
        throw new Error("secret internal detail at /srv/app.ts:42");
      });
    },
  };
}

const servers: TestServer[] = [];
afterEach(async () => {
  while (servers.length > 0) await servers.pop()?.stop();
});

async function start(features: Feature[], env?: Record<string, string>): Promise<TestServer> {
  const s = await startTestServer({ features, env });
  servers.push(s);
  return s;
}

describe("request handling at the edge", () => {
  it("answers malformed JSON with 400 in both error styles, never 500", async () => {
    const s = await start([...allFeatures(), probeFeature()]);
    const plain = await s.fetch("/api/test/echo", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"a": ',
    });
    expect(plain.status).toBe(400);
    expect(((await plain.json()) as { error: string }).error).toBe("malformed_json");

    const v2 = await s.fetch("/api/v2/test/echo", {
      method: "POST",
      headers: { "content-type": "application/vnd.api+json" },
      body: "{nope",
    });
    expect(v2.status).toBe(400);
    expect(v2.headers.get("content-type")).toMatch(/application\/vnd\.api\+json/);
    const doc = (await v2.json()) as { errors: { status: string; code: string }[] };
    expect(doc.errors[0]).toMatchObject({ status: "400", code: "malformed_json" });
  });

  it("answers an unexpected exception with 500, a request id and no internals", async () => {
    const s = await start([probeFeature()]);
    const res = await s.fetch("/api/test/crash");
    expect(res.status).toBe(500);
    const text = await res.text();
    const body = JSON.parse(text) as { error: string; request_id: string };
    expect(body.error).toBe("internal_error");
    expect(body.request_id).toBe(res.headers.get("x-request-id"));
    expect(text).not.toContain("secret internal detail");
    expect(text).not.toContain("app.ts");
  });

  it("refuses bodies over the configured limit with 413", async () => {
    const s = await start([probeFeature()], { NETMON_BODY_LIMIT: "2048" });
    const res = await s.fetch("/api/test/echo", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ pad: "x".repeat(5000) }),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: string }).error).toBe("payload_too_large");
  });
});

describe("health", () => {
  it("GET /health answers 503 when the database is gone, /health/live still 200", async () => {
    const s = await start([healthFeature]);
    expect((await s.fetch("/health")).status).toBe(200);
    await s.db.close();
    const res = await s.fetch("/health");
    expect(res.status).toBe(503);
    const body = (await res.json()) as { status: string; database: { status: string } };
    expect(body.status).toBe("unavailable");
    expect(body.database.status).toBe("error");
    expect((await s.fetch("/health/live")).status).toBe(200);
  });
});

describe("graceful shutdown", () => {
  it("finishes an in-flight request, then refuses new connections", async () => {
    let started!: () => void;
    const slowStarted = new Promise<void>((r) => {
      started = r;
    });
    const s = await start([healthFeature, probeFeature(() => started())]);
    const inflight = s.fetch("/test/slow");
    await slowStarted;
    const closing = s.close();
    const res = await inflight;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ finished: true });
    await closing;
    await expect(s.fetch("/health/live")).rejects.toThrow();
  });
});

const bin = path.resolve("bin/netmon.mjs");

function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("the netmon process", () => {
  it("stops at start-up with one line naming a bad variable", async () => {
    const r = await runCli(["serve"], { PORT: "eighty" });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain("PORT must be an integer");
  });

  it("serves /health, then drains and exits 0 on SIGTERM", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-proc-"));
    const env: Record<string, string> = {
      PORT: "0",
      HOST: "127.0.0.1",
      NETMON_DATA_DIR: dataDir,
      NETMON_EMBEDDED_AGENT: "false",
      NETMON_OTLP_GRPC_PORT: "0",
      NETMON_SYSLOG_PORT: "0",
      NETMON_SNMP_TRAP_PORT: "0",
    };
    if (process.env.NETMON_TEST_DATABASE_URL) env.DATABASE_URL = await createPgDatabase(false);
    const child = spawn(process.execPath, [bin, "serve"], { env: { ...process.env, ...env } });
    // A failing assertion must not leave the server running.
    onTestFinished(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    let out = "";
    const url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 45_000);
      child.stdout.on("data", (d) => {
        out += d;
        const m = /netmon listening on (http:\/\/[\d.:]+)/.exec(out);
        if (m) {
          clearTimeout(t);
          resolve(m[1] as string);
        }
      });
      child.stderr.on("data", (d) => {
        out += d;
      });
    });
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
    if (!env.DATABASE_URL) {
      // While the server holds the PGlite directory, a second server says so clearly; CLI
      // commands run inside the running server over its local channel instead.
      const locked = await runCli(["serve"], { ...env, PORT: "0" });
      expect(locked.code).toBe(1);
      expect(locked.stderr).toMatch(/in use by another netmon process/);
      await waitFor(
        async () => fs.existsSync(path.join(env.NETMON_DATA_DIR as string, "cli.sock")),
        "the local channel",
      );
      const migrated = await runCli(["migrate"], env);
      expect(migrated.code, migrated.stderr).toBe(0);
    }
    const exited = new Promise<number | null>((r) => child.on("exit", r));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(out).toContain("shutdown complete");
    if (!env.DATABASE_URL) {
      // The directory is released: migrate now works and finds nothing to do.
      const after = await runCli(["migrate"], env);
      expect(after.stdout).toContain("database is up to date");
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  }, 90_000);
});

describe.runIf(testBackend() === "postgres")("several replicas on one PostgreSQL", () => {
  it("two servers starting at once apply each migration exactly once", async () => {
    const url = await createPgDatabase(false);
    const [a, b] = await Promise.all([
      startTestServer({ env: { DATABASE_URL: url }, features: [healthFeature] }).catch((e) => e),
      startTestServer({ env: { DATABASE_URL: url }, features: [healthFeature] }).catch((e) => e),
    ]);
    expect(a).not.toBeInstanceOf(Error);
    expect(b).not.toBeInstanceOf(Error);
    servers.push(a as TestServer, b as TestServer);
    const rows = await (a as TestServer).db.many<{ version: number; n: number }>(
      "SELECT version, count(*)::int AS n FROM netmon_schema_migrations GROUP BY version",
    );
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.n === 1)).toBe(true);
    expect((await (a as TestServer).fetch("/health")).status).toBe(200);
    expect((await (b as TestServer).fetch("/health")).status).toBe(200);
  });

  it("give each replica its own embedded gateway, so one stopping never takes the other's offline", async () => {
    const url = await createPgDatabase(true);
    const env = { DATABASE_URL: url, NETMON_EMBEDDED_AGENT: "true" };
    const a = await startTestServer({ env });
    const b = await startTestServer({ env });
    servers.push(b);
    type Gw = { gateway_id: string; status: string };
    const gateways = () =>
      b.db.many<Gw>(
        "SELECT gateway_id, status FROM gateways WHERE gateway_id LIKE 'embedded-%' ORDER BY gateway_id",
      );
    const both = await waitFor(async () => {
      const rows = await gateways();
      return rows.length === 2 && rows.every((r) => r.status === "healthy") ? rows : null;
    }, "two healthy embedded gateways");
    // The same host, two instances: the id carries each data directory's instance id.
    expect(new Set(both.map((g) => g.gateway_id)).size).toBe(2);
    const idOf = (s: TestServer) =>
      `embedded-${os.hostname()}-${fs.readFileSync(path.join(s.ctx.config.dataDir, "instance-id"), "utf8").trim()}`;
    const [idA, idB] = [idOf(a), idOf(b)];
    expect(both.map((g) => g.gateway_id).sort()).toEqual([idA, idB].sort());

    await a.stop();
    const after = await gateways();
    expect(after.find((g) => g.gateway_id === idA)?.status).toBe("offline");
    expect(after.find((g) => g.gateway_id === idB)?.status).toBe("healthy");
  });
});
