/**
 * Sustained TCP+HTTP checks per minute on ONE agent process, with schedule lateness p99, and
 * the agent's memory while it holds N checks; next to Debian's prometheus-blackbox-exporter
 * probing the same targets at the same request rate.
 *
 *   NETMON_BENCH_CHECKS=10000 NETMON_BENCH_SECONDS=150 node --import tsx bench/monitoring/throughput.ts
 *   (NETMON_BENCH_DATABASE_URL=postgres://… to use PostgreSQL instead of PGlite)
 *
 * Core + gateway run in this process (core scheduler, claim endpoint, result recording;
 * the gateway's HTTP face for agents); the agent is a separate `netmon agent` process; the
 * targets (one HTTP server, one TCP listener on loopback) are a third process.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { issueControlPlaneToken } from "../../src/access/tokens.ts";
import { loadConfig } from "../../src/config/config.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { Gateway } from "../../src/monitoring/runtime/gateway.ts";
import { startGatewayServer } from "../../src/monitoring/runtime/gateway-server.ts";
import { inProcessCoreLink } from "../../src/monitoring/runtime/links.ts";
import { initialRunAt } from "../../src/monitoring/scheduler.ts";
import { startServer } from "../../src/server.ts";
import { sql } from "../../src/storage/sql.ts";

const N = Number(process.env.NETMON_BENCH_CHECKS ?? 10_000);
const SECONDS = Math.min(420, Number(process.env.NETMON_BENCH_SECONDS ?? 150));
const INTERVAL = 60;
const ROOT = path.resolve(import.meta.dirname, "../..");

function rssKb(pid: number): { rss: number; hwm: number } {
  const s = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return { rss: Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0), hwm: Number(/VmHWM:\s+(\d+)/.exec(s)?.[1] ?? 0) };
}

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
}

async function firstLine(child: ChildProcess, prefix = ""): Promise<string> {
  const rl = readline.createInterface({ input: child.stdout as NodeJS.ReadableStream });
  for await (const line of rl) if (line.startsWith(prefix)) return line.slice(prefix.length);
  throw new Error("child ended");
}

const targetsProc = spawn(
  process.execPath,
  ["--import", "tsx", path.join(ROOT, "bench/monitoring/targets-child.ts")],
  { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] },
);
const ports = JSON.parse(await firstLine(targetsProc)) as { http: number; tcp: number };

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-bench-mon-"));
const config = loadConfig({
  PORT: "0",
  HOST: "127.0.0.1",
  NETMON_DATA_DIR: dataDir,
  NETMON_EMBEDDED_AGENT: "false",
  NETMON_LOG_LEVEL: "warn",
  NETMON_RATE_LIMIT_CONTROL: "1000000/60s",
  ...(process.env.NETMON_BENCH_DATABASE_URL ? { DATABASE_URL: process.env.NETMON_BENCH_DATABASE_URL } : {}),
});
const log = createLogger("warn");
const server = await startServer(config, { logger: log });
const ctx = server.ctx;
const gateway = new Gateway({ id: "bench-gw", core: inProcessCoreLink(ctx), log });
await gateway.start();
const gwServer = await startGatewayServer({ gateway, coreUrl: server.url, host: "127.0.0.1", port: 0, log });
const { token } = await issueControlPlaneToken(ctx, { kind: "agent", name: `bench-agent-${Date.now()}` });

// N checks, half TCP, half HTTP, spread over one interval (the scheduler's jitter).
await ctx.db.query(sql`DELETE FROM service_checks`);
const now = new Date();
for (let i = 0; i < N; i += 1000) {
  const rows = [];
  for (let j = i; j < Math.min(N, i + 1000); j++) {
    const tcp = j % 2 === 0;
    rows.push({
      name: `bench-${j}`,
      check_type: tcp ? "tcp" : "http",
      target: tcp ? "127.0.0.1" : `http://127.0.0.1:${ports.http}/ok`,
      port: tcp ? ports.tcp : null,
      next: initialRunAt(now, INTERVAL).toISOString(),
    });
  }
  await ctx.db.query(sql`
    INSERT INTO service_checks (name, check_type, target, port, interval_seconds, timeout_seconds, next_run_at)
    SELECT v.name, v.t, v.target, v.port, ${INTERVAL}, 5, v.next
    FROM unnest(${rows.map((r) => r.name)}::text[], ${rows.map((r) => r.check_type)}::text[], ${rows.map((r) => r.target)}::text[],
                ${rows.map((r) => r.port)}::int[], ${rows.map((r) => r.next)}::timestamptz[]) AS v(name, t, target, port, next)`);
}

const agent = spawn(
  process.execPath,
  [
    path.join(ROOT, "bin/netmon.mjs"),
    "agent",
    "--gateway",
    gwServer.url,
    "--token",
    token,
    "--concurrency",
    "256",
  ],
  {
    cwd: ROOT,
    env: { ...process.env, NETMON_LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "inherit"],
  },
);
await firstLine(agent, "NETMON_AGENT_UID=");
const t0 = Date.now();
const samples: { t: number; rss: number }[] = [];
const timer = setInterval(() => {
  try {
    samples.push({ t: Date.now() - t0, rss: rssKb(agent.pid as number).rss });
  } catch {}
}, 5000);
await new Promise((r) => setTimeout(r, SECONDS * 1000));
clearInterval(timer);
const mem = rssKb(agent.pid as number);

// Measure over the steady window (after the first interval every check has run once).
const windowStart = new Date(t0 + INTERVAL * 1000);
const windowEnd = new Date(t0 + SECONDS * 1000);
const counted = await ctx.db.one<{ n: number; ok: number }>(sql`
  SELECT count(*)::int AS n, count(*) FILTER (WHERE status = 'success')::int AS ok FROM service_status
  WHERE "timestamp" >= ${windowStart} AND "timestamp" < ${windowEnd}`);
const windowMin = (SECONDS - INTERVAL) / 60;
const jobs = await ctx.db.many<{ due: string; results: { started_at: string | null }[] }>(sql`
  SELECT metadata->>'due_at' AS due, results FROM poll_jobs
  WHERE status = 'completed' AND retry_count = 0 AND completed_at >= ${windowStart}`);
const lateness: number[] = [];
for (const j of jobs) {
  const due = Date.parse(j.due);
  for (const r of j.results ?? []) if (r.started_at) lateness.push(Date.parse(r.started_at) - due);
}
const failed = await ctx.db.one<{ n: number }>(
  sql`SELECT count(*)::int AS n FROM poll_jobs WHERE status IN ('failed', 'timeout')`,
);
agent.kill("SIGTERM");
await new Promise((r) => agent.once("exit", r));
await gateway.stop();
await gwServer.close();
await server.close();

// ---- prometheus-blackbox-exporter on the same targets at the same rate ----
let blackbox = "not run (prometheus-blackbox-exporter not installed)";
const bbBin = spawnSync("sh", ["-c", "command -v prometheus-blackbox-exporter"]).stdout?.toString().trim();
if (bbBin) {
  const cfgFile = path.join(dataDir, "blackbox.yml");
  fs.writeFileSync(
    cfgFile,
    "modules:\n  http_2xx:\n    prober: http\n    timeout: 5s\n  tcp_connect:\n    prober: tcp\n    timeout: 5s\n",
  );
  const bbPort = 19115 + Math.floor(Math.random() * 1000);
  const bb = spawn(bbBin, [`--config.file=${cfgFile}`, `--web.listen-address=127.0.0.1:${bbPort}`], {
    stdio: "ignore",
  });
  await new Promise((r) => setTimeout(r, 1500));
  const rate = N / 60; // probes per second to match N checks per minute
  const BB_SECONDS = Math.min(60, SECONDS);
  const lat: number[] = [];
  let done = 0;
  let okCount = 0;
  let inflight = 0;
  const start = Date.now();
  let sent = 0;
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const elapsed = (Date.now() - start) / 1000;
      if (elapsed >= BB_SECONDS) {
        clearInterval(tick);
        const wait = setInterval(() => {
          if (inflight === 0) {
            clearInterval(wait);
            resolve();
          }
        }, 50);
        return;
      }
      const due = Math.floor(elapsed * rate);
      while (sent < due && inflight < 512) {
        const tcp = sent % 2 === 0;
        const url = tcp
          ? `http://127.0.0.1:${bbPort}/probe?module=tcp_connect&target=127.0.0.1:${ports.tcp}`
          : `http://127.0.0.1:${bbPort}/probe?module=http_2xx&target=http://127.0.0.1:${ports.http}/ok`;
        sent++;
        inflight++;
        const t = performance.now();
        fetch(url)
          .then(async (res) => {
            const body = await res.text();
            if (/probe_success 1/.test(body)) okCount++;
          })
          .catch(() => {})
          .finally(() => {
            lat.push(performance.now() - t);
            inflight--;
            done++;
          });
      }
    }, 20);
  });
  const bbMem = rssKb(bb.pid as number);
  bb.kill("SIGTERM");
  blackbox = `| prometheus-blackbox-exporter (driven at the same rate for ${BB_SECONDS} s) | ${Math.round((done / BB_SECONDS) * 60)} probes/min (${okCount} ok of ${done}) | probe latency p99 ${pct(lat, 99).toFixed(1)} ms | RSS ${(bbMem.rss / 1024).toFixed(0)} MiB (peak ${(bbMem.hwm / 1024).toFixed(0)} MiB) |`;
}
targetsProc.kill("SIGTERM");
fs.rmSync(dataDir, { recursive: true, force: true });

console.log(`## Sustained checks on one agent: ${N} checks (half TCP, half HTTP), interval ${INTERVAL}s, ${SECONDS}s run, ${config.databaseUrl ? "PostgreSQL" : "PGlite"}

| what | throughput | timing | memory |
|---|---|---|---|
| netmon agent (separate process) | ${Math.round((counted?.n ?? 0) / windowMin)} results/min in the steady window (${counted?.ok ?? 0}/${counted?.n ?? 0} success) | schedule lateness p50 ${pct(lateness, 50).toFixed(0)} ms, p99 ${pct(lateness, 99).toFixed(0)} ms, max ${pct(lateness, 100).toFixed(0)} ms (${lateness.length} samples) | agent RSS ${(mem.rss / 1024).toFixed(0)} MiB, peak ${(mem.hwm / 1024).toFixed(0)} MiB holding ${N} checks |
${blackbox}

Failed/timed-out poll jobs: ${failed?.n ?? 0}. Agent RSS over time (MiB): ${samples.map((s) => (s.rss / 1024).toFixed(0)).join(", ")}.
Lateness = a check's start on the agent minus the due time of its poll job (the earliest due check of the batch, so an upper bound).
`);
process.exit(0);
