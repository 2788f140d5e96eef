import { execFile, execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { SCHEDULER_LOCK_KEY } from "../../src/monitoring/scheduler.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { testBackend } from "../helpers/database.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * Issue 19: PostgreSQL restarted under load. A private PostgreSQL instance (its own data
 * directory and port, so the shared test server is never touched) is restarted with
 * `pg_ctl restart -m fast` while clients ingest devices and a probe reads /health. Clients
 * get errors (503 database_unavailable, Retry-After) or success — never a wrong answer, never
 * a hang; every acknowledged write is there afterwards; /health says 503 while the database
 * is away; the server recovers without a restart.
 */
function pgBin(): string | null {
  try {
    const versions = fs.readdirSync("/usr/lib/postgresql").sort((a, b) => Number(b) - Number(a));
    for (const v of versions) {
      const bin = `/usr/lib/postgresql/${v}/bin`;
      if (fs.existsSync(`${bin}/pg_ctl`)) return bin;
    }
  } catch {
    // no PostgreSQL installed
  }
  return null;
}

function postgresUser(): { uid: number; gid: number } | null {
  try {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    return { uid, gid };
  } catch {
    return null;
  }
}

const NATS_URL = process.env.NETMON_TEST_NATS_URL ?? "nats://127.0.0.1:4222";
const BIN = pgBin();
const PG_USER = postgresUser();
const RUNNABLE = testBackend() === "postgres" && BIN !== null && PG_USER !== null && process.getuid?.() === 0;

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-pg-restart-"));
const data = path.join(dir, "data");
let port = 0;
let started = false;

function asPostgres(cmd: string, args: string[]): string {
  return execFileSync("runuser", ["-u", "postgres", "--", `${BIN}/${cmd}`, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 120_000,
  }).toString();
}

/** Async, so the in-process server keeps serving while PostgreSQL restarts. */
function asPostgresAsync(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile("runuser", ["-u", "postgres", "--", `${BIN}/${cmd}`, ...args], { timeout: 120_000 }, (err) =>
      err ? reject(err) : resolve(),
    );
  });
}

function pgOptions(): string {
  return `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off -c max_connections=50`;
}

afterAll(() => {
  if (started) {
    try {
      asPostgres("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
    } catch {
      // already stopped
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Start the private cluster once (each test may run alone) and return its database URL. */
async function privateCluster(): Promise<string> {
  if (!started) {
    fs.chmodSync(dir, 0o755);
    fs.chownSync(dir, PG_USER?.uid ?? 0, PG_USER?.gid ?? 0);
    port = await freePort();
    asPostgres("initdb", ["-D", data, "-U", "root", "--auth=trust", "-E", "UTF8", "--no-sync"]);
    asPostgres("pg_ctl", ["-D", data, "-l", path.join(dir, "log"), "-o", pgOptions(), "-w", "start"]);
    started = true;
    const admin = new pg.Client({ connectionString: `postgres://root@127.0.0.1:${port}/postgres` });
    await admin.connect();
    await admin.query("CREATE DATABASE netmon");
    await admin.end();
  }
  return `postgres://root@127.0.0.1:${port}/netmon`;
}

interface Outcome {
  ip: string;
  status: number;
  body: unknown;
  at: number;
}

describe.skipIf(!RUNNABLE)("PostgreSQL restarted under load", () => {
  it("answers with success or 503 (never wrong), loses no acknowledged write, reports it in /health and recovers by itself", async () => {
    const url = await privateCluster();

    let server: TestServer | undefined;
    try {
      server = await startTestServer({
        env: { DATABASE_URL: url, NETMON_RATE_LIMIT_API_DEFAULT: "1000000/60s" },
      });
      const s = server;
      const token = await tokenFor(s, "admin");
      const t0 = performance.now();
      const outcomes: Outcome[] = [];
      const health: { status: number; at: number }[] = [];
      let running = true;
      let n = 0;

      const worker = async () => {
        while (running) {
          const i = n++;
          const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
          const res = await s
            .fetch("/api/v1/device-updates", {
              method: "POST",
              headers: { ...authHeaders(token), "content-type": "application/json" },
              body: JSON.stringify({ updates: [{ ip, hostname: `restart-${i}`, source: "manual" }] }),
              signal: AbortSignal.timeout(20_000),
            })
            .then(
              async (r) => ({ status: r.status, body: await r.json().catch(() => null) }),
              (err: Error) => ({ status: err.name === "TimeoutError" ? -1 : 0, body: String(err) }),
            );
          outcomes.push({ ip, ...res, at: performance.now() - t0 });
        }
      };
      const prober = async () => {
        while (running) {
          const status = await s.fetch("/health", { signal: AbortSignal.timeout(10_000) }).then(
            (r) => r.status,
            () => 0,
          );
          health.push({ status, at: performance.now() - t0 });
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      const load = [worker(), worker(), worker(), prober()];

      await new Promise((r) => setTimeout(r, 1500));
      const restartAt = performance.now() - t0;
      // -l: the restarted postmaster must not inherit (and hold open) our output pipes.
      await asPostgresAsync("pg_ctl", [
        "-D",
        data,
        "-l",
        path.join(dir, "log"),
        "-m",
        "fast",
        "-o",
        pgOptions(),
        "-w",
        "restart",
      ]);
      const restartedAt = performance.now() - t0;
      // Keep the load on until the server has answered successfully for a while again.
      const deadline = performance.now() + 30_000;
      while (performance.now() < deadline) {
        const recent = outcomes.filter((o) => o.at > restartedAt);
        if (recent.filter((o) => o.status === 200).length >= 20) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      running = false;
      await Promise.all(load);

      const statuses = new Map<number, number>();
      for (const o of outcomes) statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
      const failures = outcomes.filter((o) => o.status !== 200);
      const firstOkAfter = outcomes.find((o) => o.at > restartedAt && o.status === 200);
      const report = {
        requests: outcomes.length,
        statuses: Object.fromEntries(statuses),
        restart_ms: Math.round(restartedAt - restartAt),
        first_success_after_restart_ms: firstOkAfter ? Math.round(firstOkAfter.at - restartedAt) : null,
        health_non_200: health.filter((h) => h.status !== 200).length,
        failure_codes: [...new Set(failures.map((f) => (f.body as { error?: string } | null)?.error))],
      };
      fs.mkdirSync(".tmp", { recursive: true });
      fs.writeFileSync(".tmp/postgres-restart.json", `${JSON.stringify(report, null, 2)}\n`);
      console.log(`postgres restart: ${JSON.stringify(report)}`);

      // Errors are 503 database_unavailable with Retry-After semantics; no hang, no other 5xx.
      for (const f of failures) {
        expect(f.status, JSON.stringify(f)).toBe(503);
        expect((f.body as { error?: string }).error, JSON.stringify(f)).toBe("database_unavailable");
      }
      // Successes are right: one device created or updated per request.
      for (const o of outcomes.filter((x) => x.status === 200)) {
        const b = (o.body as { data: { created: number; updated: number; results: { ip: string }[] } }).data;
        expect(b.created + b.updated, JSON.stringify(o)).toBe(1);
        expect(b.results[0]?.ip, JSON.stringify(o)).toBe(o.ip);
      }
      // Recovered by itself.
      expect(firstOkAfter).toBeDefined();
      expect(health[health.length - 1]?.status).toBe(200);
      // Nothing acknowledged was lost.
      const acknowledged = outcomes.filter((o) => o.status === 200).map((o) => o.ip);
      const rows = await s.db.many<{ ip: string }>("SELECT ip FROM devices WHERE ip = ANY($1::text[])", [
        acknowledged,
      ]);
      expect(new Set(rows.map((r) => r.ip)).size).toBe(new Set(acknowledged).size);
      // The scheduler noticed its leader lock went with the old connection and took it again.
      expect(s.logs.some((l) => l.includes("scheduler leadership lost"))).toBe(true);
      const relocked = async () =>
        s.db.one(
          `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
             AND ((classid::int8 << 32) | objid::int8) = $1::int8`,
          [SCHEDULER_LOCK_KEY.toString()],
        );
      const end = Date.now() + 10_000;
      while (!(await relocked()) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
      expect(await relocked()).toBeDefined();
      // /health was honest while the database was away (when the probe caught the window).
      if (failures.length > 0) expect(report.health_non_200).toBeGreaterThan(0);
    } finally {
      await server?.stop();
    }
  }, 240_000);

  it("with the JetStream buffer, telemetry sent while PostgreSQL is down is accepted and stored once it is back", async () => {
    const url = await privateCluster();
    const stream = `NETMON_PGR_${process.pid}_${Date.now()}`;
    const nc = await connect({ servers: NATS_URL });
    const jsm = await jetstreamManager(nc);
    const server = await startTestServer({
      env: { DATABASE_URL: url, NATS_URL, NETMON_JETSTREAM_STREAM: stream },
    });
    try {
      const token = await tokenFor(server, "operator");
      const send = (bodies: string[]) =>
        server.fetch("/v1/logs", {
          method: "POST",
          headers: { ...authHeaders(token), "content-type": "application/json" },
          body: JSON.stringify({
            resourceLogs: [
              {
                resource: { attributes: [{ key: "service.name", value: { stringValue: "pg-down" } }] },
                scopeLogs: [
                  {
                    logRecords: bodies.map((b) => ({
                      timeUnixNano: String(BigInt(Date.now()) * 1_000_000n),
                      severityText: "INFO",
                      body: { stringValue: b },
                    })),
                  },
                ],
              },
            ],
          }),
        });
      // The buffer is connected and the token has been seen once.
      const deadline = Date.now() + 30_000;
      while ((await send(["warm-up"])).status !== 200 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
      }
      asPostgres("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]);
      const sent: string[] = [];
      for (let i = 0; i < 10; i++) {
        const bodies = Array.from({ length: 10 }, (_, j) => `pg-down-${i}-${j}`);
        const res = await send(bodies);
        expect(res.status, await res.text()).toBe(200);
        sent.push(...bodies);
      }
      await asPostgresAsync("pg_ctl", [
        "-D",
        data,
        "-l",
        path.join(dir, "log"),
        "-o",
        pgOptions(),
        "-w",
        "start",
      ]);
      const end = Date.now() + 90_000;
      let stored = 0;
      while (Date.now() < end) {
        const r = await server.db
          .one<{ n: number }>("SELECT count(DISTINCT body)::int AS n FROM logs WHERE body = ANY($1)", [sent])
          .catch(() => undefined);
        stored = r?.n ?? 0;
        if (stored === sent.length) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(stored).toBe(sent.length);
    } finally {
      await server.stop();
      await jsm.streams.delete(stream).catch(() => undefined);
      await jsm.streams.delete(`${stream}_DLQ`).catch(() => undefined);
      await nc.close();
    }
  }, 180_000);
});
