// JSON:API list throughput: GET /api/v2/alerts?filter[severity][eq]=critical&page[limit]=50 on
// BENCH_ALERTS alerts (default 1,000,000) in PostgreSQL, netmon (child process, full edge:
// access hook, rate limiter, engine) side by side with a bare node:http + pg server running the
// equivalent hand-written SQL and serialising the same document (bench/jsonapi/_baseline-server.ts).
// autocannon with BENCH_CONNECTIONS (default 50) for BENCH_SECONDS (default 15) per server, in
// BENCH_ROUNDS (default 3) interleaved slices.
// Run: node --import tsx bench/jsonapi/alerts-list.ts
//   BENCH_PG_URL (admin URL, default postgres://root@127.0.0.1:5432/postgres)
//   The seeded database netmon_bench_jsonapi_<N> is kept and reused by later runs
//   (BENCH_RESEED=1 seeds again, BENCH_DROP=1 drops it at the end).
//   BENCH_BEFORE=<directory of another checkout with node_modules> adds that checkout's netmon
//   as a third server (before/after from one run; it migrates the same database, so use a
//   checkout whose migrations are a prefix of this one's).
//   BENCH_LOG_LEVEL (default info) for the netmon servers.
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import pg from "pg";
import { createApiToken, TOKEN_SCOPES } from "../../src/access/tokens.ts";
import { findUserByEmail, insertUser } from "../../src/access/users.ts";
import { loadConfig } from "../../src/config/config.ts";
import type { AppContext } from "../../src/kernel/context.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { loadOrCreateSecretKey } from "../../src/kernel/secret-key.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { openDatabase } from "../../src/storage/open.ts";

const N = Number(process.env.BENCH_ALERTS ?? 1_000_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://root@127.0.0.1:5432/postgres";
const PATH = "/api/v2/alerts?filter[severity][eq]=critical&page[limit]=50";
const started = Date.now();
const loadavg = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" / ");
const loadStart = loadavg();
const log = (m: string) => console.error(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${m}`);

function dbUrl(name: string): string {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

function waitFor(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = "";
    const t = setTimeout(() => reject(new Error(`no start: ${out}`)), 60_000);
    const on = (d: Buffer) => {
      out += d;
      const m = pattern.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(m[1] as string);
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", on);
  });
}

// 1. The seeded database is kept between runs (seeding 1M alerts takes 1–2 minutes): one
// database per N, reused when its marker table says seeding finished. BENCH_RESEED=1 starts
// over; BENCH_DROP=1 drops the database at the end.
const DB_NAME = `netmon_bench_jsonapi_${N}`;
const admin = new pg.Client({ connectionString: ADMIN_URL });
await admin.connect();
if (process.env.BENCH_RESEED === "1") await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
const exists = (await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [DB_NAME])).rowCount === 1;
if (!exists) await admin.query(`CREATE DATABASE ${DB_NAME}`);
await admin.end();
const url = dbUrl(DB_NAME);
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-bench-jsonapi-"));
const env = { DATABASE_URL: url, NETMON_DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: "0" };
const config = loadConfig({ ...env, NETMON_LOG_LEVEL: "warn", NETMON_EMBEDDED_AGENT: "false" });
const db = await openDatabase(config);
await migrate(db);
const ctx: AppContext = {
  config,
  db,
  log: createLogger("warn"),
  secretKey: loadOrCreateSecretKey(config.secretKeyFile),
  now: () => new Date(),
};
const seeded = await db
  .one<{ n: number }>("SELECT n FROM bench_seed WHERE to_regclass('bench_seed') IS NOT NULL LIMIT 1")
  .catch(() => undefined);
const user =
  (await findUserByEmail(db, "bench@example.test")) ??
  (await insertUser(ctx, { email: "bench@example.test", password: "bench-password-123", role: "viewer" }));
// A fresh instance secret per run (new data dir), so a fresh token; the old ones just expire.
const { token } = await createApiToken(ctx, user.id, { name: "bench", scopes: [...TOKEN_SCOPES] });
let seedSeconds: number | null = null;
if (seeded?.n === N) {
  log(`reusing ${DB_NAME} (${N} alerts seeded earlier)`);
} else {
  const t0 = Date.now();
  log(`seeding ${N} alerts`);
  await db.query("DELETE FROM alerts");
  const BATCH = 250_000;
  for (let from = 1; from <= N; from += BATCH) {
    const to = Math.min(N, from + BATCH - 1);
    await db.query(
      `INSERT INTO alerts (title, description, severity, status, source_type, source_id, metric_name, metric_value,
                           triggered_at, metadata)
       SELECT 'alert ' || g, 'synthetic alert number ' || g,
              (ARRAY['info','warning','critical','emergency'])[1 + g % 4],
              (ARRAY['pending','acknowledged','resolved'])[1 + g % 3],
              'device', 'dev-' || (g % 5000), 'cpu', (g % 100)::float8,
              timestamptz '2026-01-01T00:00:00Z' + make_interval(secs => g), jsonb_build_object('n', g)
       FROM generate_series($1::int, $2::int) AS g`,
      [from, to],
    );
  }
  await db.query("ANALYZE alerts");
  await db.query("CREATE TABLE IF NOT EXISTS bench_seed (n integer NOT NULL)");
  await db.query("DELETE FROM bench_seed");
  await db.query("INSERT INTO bench_seed (n) VALUES ($1)", [N]);
  seedSeconds = (Date.now() - t0) / 1000;
  log("seeded");
}
// Request budgets of earlier runs would only slow the counter function down.
await db.query("DELETE FROM rate_limit_counters");
await db.close();

// 2. Servers (separate processes, same pool size). BENCH_BEFORE=<dir of another checkout>
// adds that checkout's netmon as a third server, for before/after figures from one run.
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

async function startNetmon(cwd: string): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, ["bin/netmon.mjs", "serve"], {
    cwd,
    env: {
      ...process.env,
      ...env,
      PORT: String(port),
      NETMON_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "info",
      NETMON_EMBEDDED_AGENT: "false",
      NETMON_RATE_LIMIT_API_DEFAULT: "100000000/60s",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => {
    if (out.length < 20_000) out += d;
  });
  child.stderr?.on("data", (d: Buffer) => {
    if (out.length < 20_000) out += d;
  });
  const url = `http://127.0.0.1:${port}`;
  // Ready when /health answers (works at every log level).
  for (let i = 0; ; i++) {
    if (child.exitCode !== null || i > 600) throw new Error(`netmon in ${cwd} did not start: ${out}`);
    const ok = await fetch(`${url}/health/live`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, url };
}

const servers: { name: string; child: ChildProcess; url: string }[] = [];
const baseline = spawn(process.execPath, ["--import", "tsx", "bench/jsonapi/_baseline-server.ts"], {
  env: { ...process.env, DATABASE_URL: url, POOL: String(config.dbPoolSize) },
  stdio: ["ignore", "pipe", "pipe"],
});
servers.push({
  name: "bare node:http + pg",
  child: baseline,
  url: await waitFor(baseline, /baseline at (http:\/\/[\d.:]+)/),
});
baseline.stdout?.resume();
baseline.stderr?.resume();
const current = await startNetmon(process.cwd());
servers.push({ name: "netmon /api/v2", ...current });
const BEFORE = process.env.BENCH_BEFORE;
if (BEFORE)
  servers.push({ name: `netmon /api/v2, before (${path.basename(BEFORE)})`, ...(await startNetmon(BEFORE)) });
log(`servers up: ${servers.map((x) => x.name).join(", ")}`);

// 3. Same answer from all (same ids in the same order, same attributes).
const headers = { authorization: `Bearer ${token}`, accept: "application/vnd.api+json" };
const docs = await Promise.all(
  servers.map(
    async (x) =>
      (await (await fetch(`${x.url}${PATH}`, { headers })).json()) as {
        data: { id: string; attributes: object }[];
      },
  ),
);
const shape = (d: (typeof docs)[number]) => JSON.stringify(d.data.map((o) => [o.id, o.attributes]));
const same = docs.every((d) => d.data.length === 50 && shape(d) === shape(docs[0] as (typeof docs)[number]));
log(`documents match: ${same}`);

// 4. Load, interleaved: ROUNDS slices of SECONDS/ROUNDS per server, the order rotating each
// round, so a change in the machine's other load hits every server alike.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const slice = Math.max(1, Math.round(SECONDS / ROUNDS));
type Run = Awaited<ReturnType<typeof autocannon>>;
const runs = new Map<string, Run[]>(servers.map((x) => [x.name, []]));
for (const x of servers) {
  await autocannon({ url: `${x.url}${PATH}`, headers, connections: CONNECTIONS, duration: 3 }); // warm-up
}
const roundLines: string[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const order = servers.map((_, i) => servers[(i + r) % servers.length] as (typeof servers)[number]);
  const got: Record<string, number> = {};
  for (const x of order) {
    const res = await autocannon({
      url: `${x.url}${PATH}`,
      headers,
      connections: CONNECTIONS,
      duration: slice,
    });
    runs.get(x.name)?.push(res);
    got[x.name] = res.requests.average;
  }
  const base = got[servers[0]?.name as string] as number;
  roundLines.push(
    `| ${r + 1} | ${servers.map((x) => Math.round(got[x.name] as number)).join(" | ")} | ${servers
      .slice(1)
      .map((x) => ((got[x.name] as number) / base).toFixed(2))
      .join(" | ")} | ${loadavg().split(" / ")[0]} |`,
  );
  log(`round ${r + 1} done`);
}
for (const x of servers) x.child.kill("SIGTERM");
await new Promise((r) => setTimeout(r, 1000));
if (process.env.BENCH_DROP === "1") {
  const cleanup = new pg.Client({ connectionString: ADMIN_URL });
  await cleanup.connect();
  await cleanup.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await cleanup.end();
}
fs.rmSync(dataDir, { recursive: true, force: true });

const loadEnd = loadavg();
const median = (xs: number[]) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)] as number;
const summary = servers.map((x) => {
  const rs = runs.get(x.name) as Run[];
  const requests = rs.reduce((n, r) => n + r.requests.total, 0);
  const seconds = rs.reduce((n, r) => n + r.duration, 0);
  return {
    name: x.name,
    rps: requests / seconds,
    p50: median(rs.map((r) => r.latency.p50)),
    p99: Math.max(...rs.map((r) => r.latency.p99)),
    non2xx: rs.reduce((n, r) => n + r.non2xx, 0),
    errors: rs.reduce((n, r) => n + r.errors, 0),
  };
});
const [sb, sn] = summary as [(typeof summary)[number], (typeof summary)[number]];
const ratio = sn.rps / sb.rps;
console.log(`## JSON:API alerts list (${N.toLocaleString("en-US")} alerts, PostgreSQL, ${CONNECTIONS} connections, ${ROUNDS} × ${slice} s per server)

\`GET ${PATH}\` — same document from every server: ${same ? "yes" : "NO"}.
netmon log level: ${process.env.BENCH_LOG_LEVEL ?? "info"}; pool size ${config.dbPoolSize} on each.

| server | req/s (mean) | p50 ms (median of rounds) | p99 ms (worst round) | non-2xx | errors |
|---|---|---|---|---|---|
${summary.map((x) => `| ${x.name} | ${Math.round(x.rps)} | ${x.p50} | ${x.p99} | ${x.non2xx} | ${x.errors} |`).join("\n")}

| round | ${servers.map((x) => `${x.name} req/s`).join(" | ")} | ${servers
  .slice(1)
  .map((x) => `${x.name} / bare`)
  .join(" | ")} | load (1 min) |
|---|${servers.map(() => "---|").join("")}${servers
  .slice(1)
  .map(() => "---|")
  .join("")}---|
${roundLines.join("\n")}

Throughput ratio netmon/bare: ${ratio.toFixed(2)} (goal ≥ 0.70)${summary
  .slice(2)
  .map((x) => `; before/bare: ${(x.rps / sb.rps).toFixed(2)}`)
  .join("")}; netmon p99 ${sn.p99} ms (goal < 50 ms).
Load average (1/5/15 min) at start ${loadStart}, at end ${loadEnd} on ${os.cpus().length} cores.
Command: \`BENCH_ALERTS=${N} BENCH_SECONDS=${SECONDS}${BEFORE ? ` BENCH_BEFORE=${BEFORE}` : ""} node --import tsx bench/jsonapi/alerts-list.ts\`. Total wall time ${((Date.now() - started) / 1000).toFixed(0)} s${seedSeconds === null ? " (seeded database reused)" : ` (seeding took ${seedSeconds.toFixed(0)} s)`}.
`);
process.exit(0);
