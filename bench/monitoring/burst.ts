/**
 * Pipeline capacity: N checks all due at once on the embedded gateway + agent (in-process);
 * reports how long until every check has a result and where the time went: per core call its
 * wall time and (PGlite) the time the database worker spent executing its statements, the rest
 * being the wait for PGlite's single connection; and how many transactions recorded the results.
 *   NETMON_BENCH_CHECKS=3000 node --import tsx bench/monitoring/burst.ts
 *
 * With NETMON_BENCH_AGING_INTERVALS=20 (PGlite) it then ages the same checks: that many 60 s
 * intervals in simulated time (a scheduler tick every 6 s; every scheduled check then gets its
 * result-style UPDATE), once with the scheduler's vacuum once per interval and once without
 * (PGlite has no autovacuum), reporting the tick time and the size of service_checks.
 *
 * With NETMON_BENCH_CYCLE_TICKS=120 (PGlite) it measures the steady state's database work per
 * scheduler tick, in-process and sequential (no agent): 10,000 checks on a 60 s interval, a
 * simulated 500 ms tick (~83 checks due → one job), then claim, start and result recording of
 * that job; wall and CPU time per operation. NETMON_BENCH_COMPARE_ROOT=/path/to/other/checkout
 * (its own node_modules not needed) runs the same cycle on that checkout's code too,
 * interleaved tick by tick in this process, so both see the same machine load.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { loadConfig } from "../../src/config/config.ts";
import type { AppContext } from "../../src/kernel/context.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { resultWriterStats } from "../../src/monitoring/jobs.ts";
import { Agent, inProcessGatewayLink } from "../../src/monitoring/runtime/agent.ts";
import { Gateway } from "../../src/monitoring/runtime/gateway.ts";
import { type CoreLink, inProcessCoreLink } from "../../src/monitoring/runtime/links.ts";
import { maintainSchedulerTables, scheduleDue } from "../../src/monitoring/scheduler.ts";
import { TargetPolicy } from "../../src/monitoring/target-policy.ts";
import { startServer } from "../../src/server.ts";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { sql } from "../../src/storage/sql.ts";

const N = Number(process.env.NETMON_BENCH_CHECKS ?? 3000);
const ROOT = path.resolve(import.meta.dirname, "../..");
const targets = spawn(
  process.execPath,
  ["--import", "tsx", path.join(ROOT, "bench/monitoring/targets-child.ts")],
  { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] },
);
// Do not leave the targets running when the benchmark fails (e.g. no database).
process.on("exit", () => targets.kill());
const rl = readline.createInterface({ input: targets.stdout as NodeJS.ReadableStream });
let ports = { http: 0, tcp: 0 };
for await (const line of rl) {
  ports = JSON.parse(line);
  break;
}
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-burst-"));
const config = loadConfig({
  PORT: "0",
  HOST: "127.0.0.1",
  NETMON_DATA_DIR: dataDir,
  NETMON_EMBEDDED_AGENT: "false",
  NETMON_LOG_LEVEL: "warn",
  ...(process.env.NETMON_BENCH_DATABASE_URL ? { DATABASE_URL: process.env.NETMON_BENCH_DATABASE_URL } : {}),
});
const log = createLogger("warn");
const server = await startServer(config, { logger: log });
const ctx = server.ctx;
const timing: Record<string, { n: number; ms: number }> = {};
// Database execution time per core call. PGlite only: its (private) `exec` is the one place
// every statement passes through; the time between post and answer is the worker executing it.
const caller = new AsyncLocalStorage<string>();
const dbMs: Record<string, { statements: number; ms: number }> = {};
const pglite = ctx.db as unknown as { exec?: (q: unknown) => Promise<unknown> };
if (ctx.db.kind === "pglite" && typeof pglite.exec === "function") {
  const exec = pglite.exec.bind(ctx.db);
  pglite.exec = async (q: unknown) => {
    const t = performance.now();
    try {
      return await exec(q);
    } finally {
      const k = caller.getStore() ?? "(scheduler, reaper: no core call)";
      const e = dbMs[k] ?? { statements: 0, ms: 0 };
      e.statements++;
      e.ms += performance.now() - t;
      dbMs[k] = e;
    }
  };
}
const base = inProcessCoreLink(ctx);
const timed = Object.fromEntries(
  Object.entries(base).map(([k, fn]) => [
    k,
    async (...a: unknown[]) => {
      const t = performance.now();
      try {
        return await caller.run(k, () => (fn as (...x: unknown[]) => Promise<unknown>)(...a));
      } finally {
        const e = timing[k] ?? { n: 0, ms: 0 };
        e.n++;
        e.ms += performance.now() - t;
        timing[k] = e;
      }
    },
  ]),
) as unknown as CoreLink;
const gateway = new Gateway({ id: "burst-gw", core: timed, log });
await gateway.start();
const agent = new Agent({
  uid: "burst-agent",
  gateway: inProcessGatewayLink(gateway),
  policy: new TargetPolicy(),
  log,
  hostMetricsMs: 0,
  maxConcurrentChecks: 256,
});
const names: string[] = [];
const types: string[] = [];
const tg: string[] = [];
const pt: (number | null)[] = [];
for (let j = 0; j < N; j++) {
  const tcp = j % 2 === 0;
  names.push(`b-${j}`);
  types.push(tcp ? "tcp" : "http");
  tg.push(tcp ? "127.0.0.1" : `http://127.0.0.1:${ports.http}/ok`);
  pt.push(tcp ? ports.tcp : null);
}
await ctx.db.query(sql`INSERT INTO service_checks (name, check_type, target, port, interval_seconds, timeout_seconds, next_run_at)
  SELECT v.n, v.t, v.g, v.p, 3600, 5, now() FROM unnest(${names}::text[], ${types}::text[], ${tg}::text[], ${pt}::int[]) AS v(n, t, g, p)`);
const writes0 = resultWriterStats(ctx);
for (const k of Object.keys(dbMs)) delete dbMs[k];
const t0 = performance.now();
await agent.start();
for (;;) {
  const r = await caller.run("(benchmark progress polls)", () =>
    ctx.db.one<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM service_checks WHERE last_result IS NOT NULL`,
    ),
  );
  if ((r?.n ?? 0) >= N) break;
  await new Promise((res) => setTimeout(res, 100));
}
const total = performance.now() - t0;
const writes = resultWriterStats(ctx);
const load = os.loadavg().map((l) => l.toFixed(2));
await agent.stop(1000);
await gateway.stop();
await server.close();
targets.kill();

const AGING = Number(process.env.NETMON_BENCH_AGING_INTERVALS ?? 0);
let aging = "";
if (AGING > 0 && !config.databaseUrl) {
  // The same data directory without the server (its scheduler would tick on real time).
  const db = await PgliteDb.open({ dataDir: path.join(dataDir, "pg") });
  let clock = new Date();
  const sim: AppContext = { ...ctx, db, now: () => clock };
  const lines: string[] = [];
  for (const vacuum of [false, true]) {
    await db.query(sql`DELETE FROM poll_jobs`);
    await db.query("VACUUM FULL ANALYZE service_checks, poll_jobs");
    await db.query(sql`UPDATE service_checks SET interval_seconds = 60, inflight_job_id = NULL,
      next_run_at = ${clock}::timestamptz + make_interval(secs => random() * 60)`);
    for (let i = 1; i <= AGING; i++) {
      let tickMs = 0;
      for (let k = 0; k < 10; k++) {
        clock = new Date(clock.getTime() + 6000);
        const t = performance.now();
        await scheduleDue(sim, { limit: N, maintain: false });
        tickMs += performance.now() - t;
        await db.query(sql`UPDATE service_checks SET inflight_job_id = NULL, last_check_at = ${clock},
          last_result = 'success', last_response_time_ms = 1, updated_at = ${clock} WHERE inflight_job_id IS NOT NULL`);
      }
      // What the scheduler does on PGlite once a minute (forced: simulated minutes are short).
      if (vacuum) await maintainSchedulerTables(sim, { force: true });
      if (i === 1 || i % 5 === 0 || i === AGING) {
        const size = await db.one<{ heap: number; due: number }>(sql`
          SELECT (pg_relation_size('service_checks') / 8192)::int AS heap,
                 (pg_relation_size('service_checks_due_idx') / 8192)::int AS due`);
        lines.push(
          `| ${vacuum ? "vacuum once per interval" : "no vacuum"} | ${i} | ${(tickMs / 10).toFixed(0)} | ${size?.heap} | ${size?.due} |`,
        );
      }
    }
  }
  await db.close();
  aging = `
### Aging: ${N} checks, ${AGING} intervals of 60 s simulated (scheduler tick every 6 s)

| variant | interval | mean tick ms | service_checks heap pages | due index pages |
|---|---|---|---|---|
${lines.join("\n")}
`;
}
fs.rmSync(dataDir, { recursive: true, force: true });

const CYCLE_TICKS = Number(process.env.NETMON_BENCH_CYCLE_TICKS ?? 0);
let cycle = "";
if (CYCLE_TICKS > 0 && !config.databaseUrl) {
  const roots = [
    { name: "this checkout", root: ROOT },
    ...(process.env.NETMON_BENCH_COMPARE_ROOT
      ? [
          {
            name: process.env.NETMON_BENCH_COMPARE_ROOT,
            root: path.resolve(process.env.NETMON_BENCH_COMPARE_ROOT),
          },
        ]
      : []),
  ];
  type Stat = { wall: number; cpu: number; n: number };
  type Jobs = {
    claimJobs: (c: AppContext, o: object) => Promise<{ id: string; checks: { id: string }[] }[]>;
    startJob: (c: AppContext, id: string, agent: string) => Promise<unknown>;
    completeJob: (c: AppContext, id: string, b: object) => Promise<unknown>;
  };
  type Sched = {
    scheduleDue: (c: AppContext, o?: object) => Promise<unknown>;
    maintainSchedulerTables?: (c: AppContext, o?: object) => Promise<boolean>;
  };
  const variants: {
    name: string;
    dir: string;
    db: PgliteDb;
    clock: { t: Date };
    vctx: AppContext;
    jobs: Jobs;
    sched: Sched;
    stats: Record<string, Stat>;
  }[] = [];
  for (const r of roots) {
    const load = async <T>(rel: string) => (await import(path.join(r.root, rel))) as T;
    const { PgliteDb: Db } = await load<{ PgliteDb: typeof PgliteDb }>("src/storage/pglite/client.ts");
    const { migrate } = await load<{ migrate: (db: PgliteDb) => Promise<unknown> }>("src/storage/migrate.ts");
    const jobs = await load<Jobs>("src/monitoring/jobs.ts");
    // That checkout's own `sql` (fragments are recognised by a module-private symbol).
    const { sql: vsql } = await load<{ sql: typeof sql }>("src/storage/sql.ts");
    const sched = await load<Sched>("src/monitoring/scheduler.ts");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-cycle-"));
    const db = await Db.open({ dataDir: dir });
    await migrate(db);
    const clock = { t: new Date() };
    const vctx: AppContext = { ...ctx, db, now: () => clock.t };
    const n = Array.from({ length: 10_000 }, (_, i) => `cycle-${i}`);
    await db.query(vsql`INSERT INTO service_checks (name, check_type, target, port, interval_seconds, timeout_seconds, next_run_at)
      SELECT v, 'tcp', '127.0.0.1', 80, 60, 5, ${clock.t}::timestamptz + make_interval(secs => random() * 60)
      FROM unnest(${n}::text[]) v`);
    // What the scheduler's own maintenance does once a minute, where the code has it.
    await sched.maintainSchedulerTables?.(vctx, { force: true });
    variants.push({ name: r.name, dir, db, clock, vctx, jobs, sched, stats: {} });
  }
  const timed = async <T>(st: Record<string, Stat>, k: string, f: () => Promise<T>): Promise<T> => {
    const c = process.cpuUsage();
    const t = performance.now();
    try {
      return await f();
    } finally {
      const cu = process.cpuUsage(c);
      const e = st[k] ?? { wall: 0, cpu: 0, n: 0 };
      e.wall += performance.now() - t;
      e.cpu += (cu.user + cu.system) / 1000;
      e.n++;
      st[k] = e;
    }
  };
  const tick = async (v: (typeof variants)[number]) => {
    v.clock.t = new Date(v.clock.t.getTime() + 500);
    await timed(v.stats, "schedule", () => v.sched.scheduleDue(v.vctx, { maintain: false }));
    const claimed = await timed(v.stats, "claim", () =>
      v.jobs.claimJobs(v.vctx, { gatewayId: "gw", agentUids: ["a"], max: 32 }),
    );
    for (const job of claimed) {
      await timed(v.stats, "start", () => v.jobs.startJob(v.vctx, job.id, "a"));
      const at = v.clock.t.toISOString();
      const results = job.checks.map((c) => ({
        check_id: c.id,
        status: "success",
        response_time_ms: 1.5,
        started_at: at,
        finished_at: at,
      }));
      await timed(v.stats, "complete", () =>
        v.jobs.completeJob(v.vctx, job.id, { agentId: "a", gatewayId: "gw", results }),
      );
    }
  };
  // One simulated interval to warm up (every check has run once), then the measured ticks,
  // alternating which variant goes first.
  for (let i = 0; i < 120; i++) for (const v of variants) await tick(v);
  for (const v of variants) v.stats = {};
  for (let i = 0; i < CYCLE_TICKS; i++)
    for (const v of i % 2 ? variants : [...variants].reverse()) await tick(v);
  const table = variants.map((v) => {
    const total = Object.values(v.stats).reduce((a, e) => ({ wall: a.wall + e.wall, cpu: a.cpu + e.cpu }), {
      wall: 0,
      cpu: 0,
    });
    const op = (k: string) => {
      const e = v.stats[k];
      return e ? `${(e.wall / e.n).toFixed(1)} / ${(e.cpu / e.n).toFixed(1)}` : "–";
    };
    return `| ${v.name} | ${op("schedule")} | ${op("claim")} | ${op("start")} | ${op("complete")} | ${(total.wall / CYCLE_TICKS).toFixed(1)} / ${(total.cpu / CYCLE_TICKS).toFixed(1)} |`;
  });
  for (const v of variants) {
    await v.db.close();
    fs.rmSync(v.dir, { recursive: true, force: true });
  }
  const loadNow = os.loadavg().map((l) => l.toFixed(2));
  cycle = `
### Steady state: database work per 500 ms tick (10,000 checks, 60 s interval, ${CYCLE_TICKS} ticks; load ${loadNow.join(", ")})

Per call, ms wall / ms CPU (process CPU: this thread and PGlite's worker).

| code | schedule | claim | start | complete (per job) | all, per tick |
|---|---|---|---|---|---|
${table.join("\n")}
`;
}
const rows = [...new Set([...Object.keys(timing), ...Object.keys(dbMs)])].map((k) => {
  const v = timing[k] ?? { n: 0, ms: 0 };
  const d = dbMs[k];
  const db = d
    ? `${d.statements} | ${d.ms.toFixed(0)} | ${(d.ms / Math.max(1, v.n)).toFixed(1)}`
    : "– | – | –";
  return v.n
    ? `| ${k} | ${v.n} | ${v.ms.toFixed(0)} | ${(v.ms / v.n).toFixed(1)} | ${db} |`
    : `| ${k} | – | – | – | ${d?.statements ?? 0} | ${(d?.ms ?? 0).toFixed(0)} | – |`;
});
console.log(`## Burst: ${N} checks due at once (embedded, ${config.databaseUrl ? "PostgreSQL" : "PGlite"})

All results recorded after **${(total / 1000).toFixed(1)} s** (${Math.round((N / total) * 60000)} checks/min); load average at the end ${load.join(", ")}.
Result submissions: ${writes.submissions - writes0.submissions}, written in ${writes.transactions - writes0.transactions} transactions (group commit).

| core call | calls | total ms | mean ms | DB statements | DB ms | DB ms per call |
|---|---|---|---|---|---|---|
${rows.join("\n")}

(DB columns: PGlite only — time the database worker spent executing the call's statements; the
rest of a call's time is mostly waiting for the single connection.)
${aging}${cycle}`);
process.exit(0);
