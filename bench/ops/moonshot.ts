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
import { createApiToken } from "../../src/access/tokens.ts";
import { insertUser } from "../../src/access/users.ts";
import { loadConfig } from "../../src/config/config.ts";
import { initialRunAt } from "../../src/monitoring/scheduler.ts";
import { startServer } from "../../src/server.ts";
import { sql } from "../../src/storage/sql.ts";

const DEVICES = Number(process.env.MOONSHOT_DEVICES ?? 1_000_000);
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

// ---- seed -------------------------------------------------------------------------------
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-moonshot-"));
const env: Record<string, string> = {
  NETMON_DATA_DIR: dataDir,
  NETMON_OTLP_GRPC_PORT: "0",
  NETMON_SYSLOG_PORT: "0",
  NETMON_SNMP_TRAP_PORT: "0",
  NETMON_LOG_LEVEL: "warn",
  HOST: "127.0.0.1",
  NETMON_RATE_LIMIT_API_DEFAULT: "100000000/60s",
  ...(DB_URL ? { DATABASE_URL: DB_URL } : {}),
};
const seeder = await startServer(loadConfig({ ...env, PORT: "0", NETMON_EMBEDDED_AGENT: "false" }));
const ctx = seeder.ctx;
if (DB_URL) {
  await ctx.db.query("TRUNCATE devices, service_checks, poll_jobs CASCADE");
}
const t0 = Date.now();
for (let from = 1; from <= DEVICES; from += 100_000) {
  const to = Math.min(DEVICES, from + 99_999);
  await ctx.db.query(
    `INSERT INTO devices (uid, partition, ip, hostname, type, type_id, vendor_name, is_available,
       discovery_sources, first_seen_time, last_seen_time)
     SELECT 'sr:' || md5(i::text)::uuid::text, 'default',
       '10.' || ((i >> 16) & 255) || '.' || ((i >> 8) & 255) || '.' || (i & 255),
       'host-' || lpad(i::text, 7, '0'),
       (ARRAY['Server','Switch','Router','Camera','Firewall','Desktop'])[1 + i % 6], 1 + i % 6,
       (ARRAY['Cisco','Juniper','Dell','HP','Axis','Ubiquiti'])[1 + i % 6], i % 10 <> 0,
       ARRAY['sweep'], now() - (i % 100000) * interval '1 second', now() - (i % 1000) * interval '1 second'
     FROM generate_series($1::int, $2::int) AS i`,
    [from, to],
  );
  log(`devices ${to}/${DEVICES}`);
}
await ctx.db.query("ANALYZE devices");
const now = new Date();
for (let i = 0; i < CHECKS; i += 1000) {
  const names: string[] = [];
  const types: string[] = [];
  const tgts: string[] = [];
  const prts: (number | null)[] = [];
  const next: string[] = [];
  for (let j = i; j < Math.min(CHECKS, i + 1000); j++) {
    const tcp = j % 2 === 0;
    names.push(`moon-${j}`);
    types.push(tcp ? "tcp" : "http");
    tgts.push(tcp ? "127.0.0.1" : `http://127.0.0.1:${ports.http}/ok`);
    prts.push(tcp ? ports.tcp : null);
    next.push(initialRunAt(now, INTERVAL).toISOString());
  }
  await ctx.db.query(sql`
    INSERT INTO service_checks (name, check_type, target, port, interval_seconds, timeout_seconds, next_run_at)
    SELECT v.n, v.t, v.g, v.p, ${INTERVAL}, 5, v.x
    FROM unnest(${names}::text[], ${types}::text[], ${tgts}::text[], ${prts}::int[], ${next}::timestamptz[])
      AS v(n, t, g, p, x)`);
}
const user = await insertUser(ctx, {
  email: `moon-${Date.now()}@example.test`,
  role: "admin",
  password: "moonshot-pw-1",
});
const { token } = await createApiToken(ctx, user.id, { name: "moonshot", scopes: ["read"] } as never);
const seedSeconds = (Date.now() - t0) / 1000;
await seeder.close();
log(`seeded in ${seedSeconds.toFixed(0)} s`);

// ---- serve ------------------------------------------------------------------------------
const port = 20000 + Math.floor(Math.random() * 20000);
const started = Date.now();
const serve = spawn(process.execPath, [path.join(ROOT, "bin/netmon.mjs"), "serve"], {
  cwd: ROOT,
  env: {
    ...process.env,
    ...env,
    PORT: String(port),
    NETMON_OTLP_GRPC_PORT: "0",
    NETMON_SYSLOG_PORT: "0",
    NETMON_SNMP_TRAP_PORT: "0",
  },
  stdio: ["ignore", "ignore", "inherit"],
  detached: true,
});
process.on("exit", () => {
  try {
    process.kill(-(serve.pid as number), "SIGKILL");
  } catch {}
});
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
log(`healthy after ${healthySeconds.toFixed(2)} s; letting the checks run one interval`);
await new Promise((r) => setTimeout(r, INTERVAL * 1000));

// ---- load -------------------------------------------------------------------------------
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
clearInterval(sampler);
const windowEnd = new Date();
const load = os.loadavg().map((l) => l.toFixed(2));

// ---- check lateness: from the jobs the window completed -----------------------------------
process.kill(-(serve.pid as number), "SIGTERM");
await new Promise((r) => serve.once("exit", r));
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
targets.kill();

const backend = DB_URL ? "PostgreSQL" : "PGlite (embedded default)";
const rows = READS.map((r) => {
  const xs = lat.get(r.name) ?? [];
  return `| ${r.name} | ${xs.length} | ${pct(xs, 50).toFixed(1)} | ${pct(xs, 99).toFixed(1)} | ${pct(xs, 99) < 100 ? "yes" : "no"} |`;
});
const checksPerMin = ((counted?.n ?? 0) / (SECONDS / 60)).toFixed(0);
process.stdout.write(`## Moonshot: ${DEVICES.toLocaleString("en")} devices, ${Math.round((CHECKS * 60) / INTERVAL).toLocaleString("en")} checks/min, ${USERS} users (${backend})

Command: \`MOONSHOT_DEVICES=${DEVICES} MOONSHOT_CHECKS=${CHECKS} MOONSHOT_USERS=${USERS} MOONSHOT_SECONDS=${SECONDS} MOONSHOT_INTERVAL=${INTERVAL}${DB_URL ? " MOONSHOT_DATABASE_URL=…" : ""} node --import tsx bench/ops/moonshot.ts\`
(${os.cpus().length} CPUs, load average at the end ${load.join(" ")}; seeding ${seedSeconds.toFixed(0)} s.)

- Second start to a healthy \`/health\` with the data: **${healthySeconds.toFixed(2)} s** (goal < 1.5 s at 1M devices on PGlite).
- Checks recorded in the ${SECONDS} s window: ${checksPerMin}/min of ${Math.round((CHECKS * 60) / INTERVAL)} scheduled; lateness p50 ${pct(lateness, 50).toFixed(0)} ms, **p99 ${pct(lateness, 99).toFixed(0)} ms** (${lateness.length} samples).
- Server process group RSS during the window: mean ${(rss.reduce((a, b) => a + b, 0) / Math.max(1, rss.length) / 1024).toFixed(0)} MiB, max **${(Math.max(0, ...rss) / 1024).toFixed(0)} MiB**.
- Failed reads: ${errors}.

| read (${USERS} users, closed loop) | requests | p50 ms | p99 ms | p99 < 100 ms |
|---|---|---|---|---|
${rows.join("\n")}

`);
process.exit(0);
