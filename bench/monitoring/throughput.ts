/**
 * Sustained TCP+HTTP checks per minute on ONE agent process, with schedule lateness p99, and
 * the agent's memory while it holds N checks; next to Debian's prometheus-blackbox-exporter
 * probing the same targets at the same request rate.
 *
 *   NETMON_BENCH_CHECKS=10000 NETMON_BENCH_SECONDS=150 node --import tsx bench/monitoring/throughput.ts
 *   (NETMON_BENCH_DATABASE_URL=postgres://… to use PostgreSQL instead of PGlite;
 *   NETMON_BENCH_INTERVAL, default 60 s: the checks' interval, also the warm-up before the steady
 *   window, so NETMON_BENCH_SECONDS must exceed it — shorter only for `npm run bench -- --quick`)
 *
 * Core + gateway run in this process (core scheduler, claim endpoint, result recording;
 * the gateway's HTTP face for agents); the agent is a separate `netmon agent` process; the
 * targets (one HTTP server, one TCP listener on loopback) are a third process.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { issueControlPlaneToken } from "../../src/access/tokens.ts";
import { loadConfig } from "../../src/config/config.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { resultWriterStats } from "../../src/monitoring/jobs.ts";
import { Gateway } from "../../src/monitoring/runtime/gateway.ts";
import { startGatewayServer } from "../../src/monitoring/runtime/gateway-server.ts";
import { type CoreLink, inProcessCoreLink } from "../../src/monitoring/runtime/links.ts";
import { initialRunAt } from "../../src/monitoring/scheduler.ts";
import { startServer } from "../../src/server.ts";
import { sql } from "../../src/storage/sql.ts";

const N = Number(process.env.NETMON_BENCH_CHECKS ?? 10_000);
const SECONDS = Math.min(420, Number(process.env.NETMON_BENCH_SECONDS ?? 150));
const INTERVAL = Number(process.env.NETMON_BENCH_INTERVAL ?? 60);
if (!(SECONDS > INTERVAL)) throw new Error("NETMON_BENCH_SECONDS must exceed NETMON_BENCH_INTERVAL");
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
// Do not leave the targets running when the benchmark fails (e.g. no database).
process.on("exit", () => targetsProc.kill());
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
// Core database time (PGlite only): every statement passes through the client's private
// `exec`; the time between post and answer is the worker executing it. Summed over the
// steady window it is the share of the single connection the core's work takes, per core
// call of the gateway (statements outside one are the scheduler, reaper, heartbeats…).
const caller = new AsyncLocalStorage<string>();
// NETMON_BENCH_STATEMENTS=1: also list the statements that took the most time in the window.
const STATEMENTS = process.env.NETMON_BENCH_STATEMENTS === "1";
const perStatement = new Map<string, { ms: number; n: number }>();
let inWindow = false;
type Busy = Record<string, { ms: number; statements: number }>;
const dbBusy: Busy = {};
// The connection's mutex (also private): how long it is held, executing or not (a transaction
// holds it between its statements too, while the event loop gets round to sending the next).
const held = { ms: 0 };
const pglite = ctx.db as unknown as {
  exec?: (q: unknown) => Promise<unknown>;
  mutex?: { run: <T>(fn: () => Promise<T>) => Promise<T> };
};
if (ctx.db.kind === "pglite" && pglite.mutex) {
  const mutex = pglite.mutex;
  const run = mutex.run.bind(mutex);
  mutex.run = <T>(fn: () => Promise<T>) =>
    run(async () => {
      const t = performance.now();
      try {
        return await fn();
      } finally {
        held.ms += performance.now() - t;
      }
    });
}
if (ctx.db.kind === "pglite" && typeof pglite.exec === "function") {
  const exec = pglite.exec.bind(ctx.db);
  pglite.exec = async (q: unknown) => {
    const t = performance.now();
    try {
      return await exec(q);
    } finally {
      const k = caller.getStore() ?? "other";
      const e = dbBusy[k] ?? { ms: 0, statements: 0 };
      const ms = performance.now() - t;
      e.ms += ms;
      e.statements++;
      dbBusy[k] = e;
      if (STATEMENTS && inWindow) {
        const text = (q as { text?: string }).text ?? "";
        const key = `${k}: ${text.replace(/\s+/g, " ").trim().slice(0, 70)}`;
        const st = perStatement.get(key) ?? { ms: 0, n: 0 };
        st.ms += ms;
        st.n++;
        perStatement.set(key, st);
      }
    }
  };
}
const coreLink = Object.fromEntries(
  Object.entries(inProcessCoreLink(ctx)).map(([k, fn]) => [
    k,
    (...a: unknown[]) => caller.run(k, () => (fn as (...x: unknown[]) => Promise<unknown>)(...a)),
  ]),
) as unknown as CoreLink;
const gateway = new Gateway({ id: "bench-gw", core: coreLink, log });
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
process.on("exit", () => agent.kill());
await firstLine(agent, "NETMON_AGENT_UID=");
const t0 = Date.now();
const samples: { t: number; rss: number }[] = [];
const timer = setInterval(() => {
  try {
    samples.push({ t: Date.now() - t0, rss: rssKb(agent.pid as number).rss });
  } catch {}
}, 5000);
// The steady window starts after the first interval: every check has run once by then.
let steady = { busy: {} as Busy, held: 0, submissions: 0, transactions: 0 };
const steadyTimer = setTimeout(() => {
  steady = { busy: structuredClone(dbBusy), held: held.ms, ...resultWriterStats(ctx) };
  inWindow = true;
}, Math.min(SECONDS, INTERVAL) * 1000);
await new Promise((r) => setTimeout(r, SECONDS * 1000));
clearTimeout(steadyTimer);
clearInterval(timer);
const writes = resultWriterStats(ctx);
const steadyBusy = Object.entries(dbBusy)
  .map(([k, v]) => ({
    k,
    ms: v.ms - (steady.busy[k]?.ms ?? 0),
    statements: v.statements - (steady.busy[k]?.statements ?? 0),
  }))
  .filter((b) => b.statements > 0)
  .sort((a, b) => b.ms - a.ms);
const steadyDb = {
  ms: steadyBusy.reduce((a, b) => a + b.ms, 0),
  statements: steadyBusy.reduce((a, b) => a + b.statements, 0),
  submissions: writes.submissions - steady.submissions,
  transactions: writes.transactions - steady.transactions,
};
const load = os.loadavg().map((l) => l.toFixed(2));
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
  const rate = N / INTERVAL; // probes per second to match N checks per interval
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

Load average at the end of the netmon run: ${load.join(", ")} (2-core machine shared with other work).
${
  ctx.db.kind === "pglite"
    ? `Core database (PGlite) in the steady window: connection held ${(((held.ms - steady.held) / ((SECONDS - INTERVAL) * 1000)) * 100).toFixed(1)}% of the time, executing ${((steadyDb.ms / ((SECONDS - INTERVAL) * 1000)) * 100).toFixed(1)}% (${Math.round(steadyDb.ms)} ms executing ${steadyDb.statements} statements in ${SECONDS - INTERVAL} s: ${steadyBusy.map((b) => `${b.k} ${Math.round(b.ms)} ms/${b.statements}`).join(", ")}); `
    : ""
}${steadyDb.submissions} result submissions written in ${steadyDb.transactions} transactions.
${
  STATEMENTS
    ? `Statements by time in the steady window:\n${[...perStatement]
        .sort((a, b) => b[1].ms - a[1].ms)
        .slice(0, 25)
        .map(([k, v]) => `  ${Math.round(v.ms)} ms / ${v.n}× (${(v.ms / v.n).toFixed(1)} ms)  ${k}`)
        .join("\n")}\n`
    : ""
}Failed/timed-out poll jobs: ${failed?.n ?? 0}. Agent RSS over time (MiB): ${samples.map((s) => (s.rss / 1024).toFixed(0)).join(", ")}.
Lateness = a check's start on the agent minus the due time of its poll job (the earliest due check of the batch, so an upper bound).
`);
process.exit(0);
