/**
 * The moonshot (issue 14 goal 6), as one benchmark: one box, the embedded default (`netmon
 * serve` as `npm start` runs it, PGlite unless MOONSHOT_DATABASE_URL is set), MOONSHOT_DEVICES
 * devices, MOONSHOT_CHECKS checks a minute run by the embedded agent against loopback targets,
 * while MOONSHOT_USERS users page devices and run queries. Reports check lateness p99, every
 * read's p50/p99, the server process group's RSS, and the time the seeded server took to
 * become healthy.
 *
 *   node --import tsx bench/ops/moonshot.ts
 *   MOONSHOT_DEVICES (default 1,000,000)  MOONSHOT_CHECKS (checks, default 10,000: 10,000 a minute at
 *   the default interval)
 *   MOONSHOT_USERS (default 20)  MOONSHOT_SECONDS (measured window, default 120; the checks run
 *   for one interval of 60 s before it)  MOONSHOT_DATABASE_URL (a PostgreSQL database to use,
 *   emptied first)  MOONSHOT_INTERVAL (the checks' interval and warm-up, default 60 s; shorter only
 *   for `npm run bench -- --quick`)
 *   MOONSHOT_USERS=0 with a long MOONSHOT_SECONDS is the memory soak of goal 3 (bench/ops/soak.ts):
 *   the report then says whether RSS stayed flat over the window.
 *
 *   MOONSHOT_LADDER (comma list of device counts, ascending: each rung grows the same data set and
 *   is measured in turn; the report names the largest count whose reads all stay < 100 ms p99)
 *
 * Seeding: an in-process server migrates the data directory (or database), then devices are
 * inserted set-based (INSERT … SELECT generate_series) and the checks in batches; that server
 * stops and `node bin/netmon.mjs serve` starts on the same data, as an operator would.
 */
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { loadConfig } from "../../src/config/config.ts";
import { startServer } from "../../src/server.ts";
import { sql } from "../../src/storage/sql.ts";
import { benchEnv, benchToken, insertChecks, insertDevices } from "./_seed.ts";

const DEVICES = Number(process.env.MOONSHOT_DEVICES ?? 1_000_000);
/**
 * MOONSHOT_LADDER: device counts measured one after another on one growing data set (e.g.
 * "10000,100000,1000000"), so one run states the largest count at which every read stays under
 * 100 ms p99. Default: MOONSHOT_DEVICES alone when it is set, else 10,000, 100,000 and 1,000,000.
 */
const LADDER = [
  ...new Set(
    (process.env.MOONSHOT_LADDER ?? (process.env.MOONSHOT_DEVICES ? String(DEVICES) : "10000,100000,1000000"))
      .split(",")
      .map((x) => Number(x.trim().replace(/_/g, "")))
      .filter((n) => Number.isSafeInteger(n) && n > 0),
  ),
].sort((a, b) => a - b);
const CHECKS = Number(process.env.MOONSHOT_CHECKS ?? 10_000);
const USERS = Number(process.env.MOONSHOT_USERS ?? 20);
const SECONDS = Number(process.env.MOONSHOT_SECONDS ?? 120);
const DB_URL = process.env.MOONSHOT_DATABASE_URL;
const INTERVAL = Number(process.env.MOONSHOT_INTERVAL ?? 60);
const ROOT = path.resolve(import.meta.dirname, "../..");
const log = (m: string) =>
  process.stderr.write(`[moonshot ${new Date().toISOString().slice(11, 19)}] ${m}\n`);

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
}

async function firstLine(child: ChildProcess): Promise<string> {
  const rl = readline.createInterface({ input: child.stdout as NodeJS.ReadableStream });
  for await (const line of rl) return line;
  throw new Error("child ended");
}

/** RSS (KiB) of every process in a process group. */
function groupRssKb(pgid: number): number {
  let total = 0;
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) !== pgid) continue;
      total += Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
    } catch {
      // the process ended while we looked
    }
  }
  return total;
}

// Stopped from outside (run.ts's timeout sends SIGTERM): exit through the "exit" handlers, which
// kill the detached server and remove the data directory.
for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => process.exit(1));

const targets = spawn(
  process.execPath,
  ["--import", "tsx", path.join(ROOT, "bench/monitoring/targets-child.ts")],
  {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  },
);
process.on("exit", () => targets.kill());
const ports = JSON.parse(await firstLine(targets)) as { http: number; tcp: number };

// ---- seed (grows rung by rung) -------------------------------------------------------------
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-moonshot-"));
process.on("exit", () => fs.rmSync(dataDir, { recursive: true, force: true }));
const env = benchEnv(dataDir, DB_URL);
let seeded = 0;
let token = "";

/** Grow the data set to `upTo` devices (the first call also creates the checks and the user). */
async function seedTo(upTo: number): Promise<number> {
  const seeder = await startServer(loadConfig({ ...env, PORT: "0", NETMON_EMBEDDED_AGENT: "false" }));
  const ctx = seeder.ctx;
  const t0 = Date.now();
  const first = seeded === 0;
  if (first && DB_URL) await ctx.db.query("TRUNCATE devices, service_checks, poll_jobs CASCADE");
  for (let from = seeded + 1; from <= upTo; from += 100_000) {
    const to = Math.min(upTo, from + 99_999);
    await insertDevices(ctx.db, from, to);
    log(`devices ${to}/${upTo}`);
  }
  seeded = upTo;
  await ctx.db.query("ANALYZE devices");
  if (first) {
    await insertChecks(ctx.db, CHECKS, INTERVAL, ports);
    token = await benchToken(ctx);
  }
  await seeder.close();
  const secs = (Date.now() - t0) / 1000;
  log(`seeded to ${upTo} devices in ${secs.toFixed(0)} s`);
  return secs;
}

interface Rung {
  devices: number;
  seedSeconds: number;
  healthySeconds: number;
  lateness: number[];
  checksPerMin: number;
  rss: number[];
  lat: Map<string, number[]>;
  errors: number;
  load: string[];
}

/** One rung: `netmon serve` on the seeded data, one interval of checks, then the measured window. */
async function measure(devices: number, seedSeconds: number): Promise<Rung> {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const started = Date.now();
  const serve = spawn(process.execPath, [path.join(ROOT, "bin/netmon.mjs"), "serve"], {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: ["ignore", "ignore", "inherit"],
    detached: true,
  });
  const killServe = () => {
    try {
      process.kill(-(serve.pid as number), "SIGKILL");
    } catch {}
  };
  process.on("exit", killServe);
  const base = `http://127.0.0.1:${port}`;
  for (;;) {
    if (serve.exitCode !== null) throw new Error(`netmon serve exited ${serve.exitCode}`);
    const ok = await fetch(`${base}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const healthySeconds = (Date.now() - started) / 1000;
  log(
    `${devices} devices: healthy after ${healthySeconds.toFixed(2)} s; letting the checks run one interval`,
  );
  await new Promise((r) => setTimeout(r, INTERVAL * 1000));

  const auth = { authorization: `Bearer ${token}` };
  const READS: { name: string; run: (i: number) => Promise<Response> }[] = [
    {
      name: "GET /api/devices?limit=100 (pages)",
      run: (i) => fetch(`${base}/api/devices?limit=100&offset=${(i * 100) % 10_000}`, { headers: auth }),
    },
    {
      name: "GET /api/devices?search=host-00012&limit=50",
      run: (i) =>
        fetch(`${base}/api/devices?search=host-${String(12 + (i % 80)).padStart(5, "0")}&limit=50`, {
          headers: auth,
        }),
    },
    {
      name: "POST /api/query in:devices hostname:%host-0001% limit:50",
      run: () =>
        fetch(`${base}/api/query`, {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ query: "in:devices hostname:%host-0001% limit:50" }),
        }),
    },
    {
      name: "GET /api/v2/devices?page[limit]=50",
      run: () => fetch(`${base}/api/v2/devices?page[limit]=50`, { headers: auth }),
    },
  ];
  const lat = new Map<string, number[]>(READS.map((r) => [r.name, []]));
  let errors = 0;
  const rss: number[] = [];
  const sampler = setInterval(() => rss.push(groupRssKb(serve.pid as number)), 1000);
  const windowStart = new Date();
  const deadline = Date.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: USERS }, async (_, u) => {
      for (let i = u; Date.now() < deadline; i += USERS) {
        const read = READS[i % READS.length] as (typeof READS)[number];
        const t = performance.now();
        const res = await read.run(i).catch(() => null);
        if (!res?.ok) errors++;
        await res?.arrayBuffer();
        lat.get(read.name)?.push(performance.now() - t);
      }
    }),
  );
  // MOONSHOT_USERS=0 (a memory soak): nobody reads, the checks run for the whole window.
  await new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())));
  clearInterval(sampler);
  const windowEnd = new Date();
  const load = os.loadavg().map((l) => l.toFixed(2));

  // Check lateness, from the jobs the window completed.
  process.kill(-(serve.pid as number), "SIGTERM");
  await new Promise((r) => serve.once("exit", r));
  process.off("exit", killServe);
  const reader = await startServer(loadConfig({ ...env, PORT: "0", NETMON_EMBEDDED_AGENT: "false" }));
  const jobs = await reader.ctx.db.many<{ due: string; results: { started_at: string | null }[] }>(sql`
    SELECT metadata->>'due_at' AS due, results FROM poll_jobs
    WHERE status = 'completed' AND completed_at >= ${windowStart} AND completed_at < ${windowEnd}`);
  const lateness: number[] = [];
  for (const j of jobs) {
    const due = Date.parse(j.due);
    for (const r of j.results ?? [])
      if (r.started_at && Number.isFinite(due)) lateness.push(Date.parse(r.started_at) - due);
  }
  const counted = await reader.ctx.db.one<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM service_status WHERE "timestamp" >= ${windowStart} AND "timestamp" < ${windowEnd}`);
  await reader.close();
  return {
    devices,
    seedSeconds,
    healthySeconds,
    lateness,
    checksPerMin: (counted?.n ?? 0) / (SECONDS / 60),
    rss,
    lat,
    errors,
    load,
  };
}

/** Mean RSS of the first and last minute (or sixth) of the window, and six points between. */
function rssTrend(rss: number[]): string {
  if (rss.length < 6) return "too short to say";
  const span = Math.max(1, Math.min(60, Math.floor(rss.length / 6)));
  const mib = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length) / 1024;
  const first = mib(rss.slice(0, span));
  const last = mib(rss.slice(-span));
  const points = Array.from(
    { length: 6 },
    (_, i) => (rss[Math.floor((i * (rss.length - 1)) / 5)] as number) / 1024,
  ).map((v) => v.toFixed(0));
  return `first ${span} s mean ${first.toFixed(0)} MiB, last ${span} s mean **${last.toFixed(0)} MiB** (${last >= first ? "+" : ""}${(last - first).toFixed(0)} MiB); samples ${points.join(" → ")} MiB`;
}

const worstP99 = (r: Rung) => Math.max(...[...r.lat.values()].map((xs) => pct(xs, 99)));

// ---- the ladder -------------------------------------------------------------------------------
const rungs: Rung[] = [];
for (const n of LADDER) {
  const seedSeconds = await seedTo(n);
  const r = await measure(n, seedSeconds);
  rungs.push(r);
  log(
    `${n} devices: worst read p99 ${worstP99(r).toFixed(0)} ms, lateness p99 ${pct(r.lateness, 99).toFixed(0)} ms`,
  );
}
targets.kill();

const backend = DB_URL ? "PostgreSQL" : "PGlite (embedded default)";
const checksPerMinScheduled = Math.round((CHECKS * 60) / INTERVAL);
const top = rungs[rungs.length - 1] as Rung;
const passing =
  USERS > 0 ? rungs.filter((_r, i) => rungs.slice(0, i + 1).every((x) => worstP99(x) < 100)) : [];
const largest = passing[passing.length - 1];
const rows = [...top.lat].map(
  ([name, xs]) =>
    `| ${name} | ${xs.length} | ${pct(xs, 50).toFixed(1)} | ${pct(xs, 99).toFixed(1)} | ${pct(xs, 99) < 100 ? "yes" : "no"} |`,
);
const ladderRows = rungs.map(
  (r) =>
    `| ${r.devices.toLocaleString("en")} | ${r.seedSeconds.toFixed(0)} | ${r.healthySeconds.toFixed(2)} | ${pct(r.lateness, 99).toFixed(0)} | ${r.checksPerMin.toFixed(0)} | ${USERS > 0 ? worstP99(r).toFixed(0) : "–"} | ${(Math.max(0, ...r.rss) / 1024).toFixed(0)} | ${r.errors} | ${r.load[0]} |`,
);
process.stdout.write(`## ${USERS === 0 ? "Memory soak" : "Moonshot"}: ${top.devices.toLocaleString("en")} devices, ${checksPerMinScheduled.toLocaleString("en")} checks/min, ${USERS} users (${backend})

Command: \`MOONSHOT_LADDER=${LADDER.join(",")} MOONSHOT_CHECKS=${CHECKS} MOONSHOT_USERS=${USERS} MOONSHOT_SECONDS=${SECONDS} MOONSHOT_INTERVAL=${INTERVAL}${DB_URL ? " MOONSHOT_DATABASE_URL=…" : ""} node --import tsx bench/ops/moonshot.ts\`
(${os.cpus().length} CPUs, load average at the end ${top.load.join(" ")}.)

${
  rungs.length > 1 || USERS > 0
    ? `| devices | seeding s | second start to healthy s | check lateness p99 ms | checks/min done | worst read p99 ms | RSS max MiB | failed reads | load (1 min) |
|---|---|---|---|---|---|---|---|---|
${ladderRows.join("\n")}

`
    : ""
}${
  USERS > 0
    ? `**Largest device count at which every interactive read stays < 100 ms p99 (${backend}): ${largest ? largest.devices.toLocaleString("en") : `none of the rungs (smallest ${rungs[0]?.devices.toLocaleString("en")})`}.**

`
    : ""
}At ${top.devices.toLocaleString("en")} devices:
- Second start to a healthy \`/health\` with the data: **${top.healthySeconds.toFixed(2)} s** (goal < 1.5 s at 1M devices on PGlite).
- Checks recorded in the ${SECONDS} s window: ${top.checksPerMin.toFixed(0)}/min of ${checksPerMinScheduled} scheduled; lateness p50 ${pct(top.lateness, 50).toFixed(0)} ms, **p99 ${pct(top.lateness, 99).toFixed(0)} ms** (${top.lateness.length} samples).
- Server process group RSS during the window: mean ${(top.rss.reduce((a, b) => a + b, 0) / Math.max(1, top.rss.length) / 1024).toFixed(0)} MiB, max **${(Math.max(0, ...top.rss) / 1024).toFixed(0)} MiB**.
- RSS over the window (is it flat?): ${rssTrend(top.rss)}.
- Failed reads: ${top.errors}.
${
  USERS > 0
    ? `
| read (${USERS} users, closed loop) | requests | p50 ms | p99 ms | p99 < 100 ms |
|---|---|---|---|---|
${rows.join("\n")}
`
    : ""
}
`);
process.exit(0);
