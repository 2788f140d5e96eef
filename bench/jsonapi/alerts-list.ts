// JSON:API list throughput: GET /api/v2/alerts?filter[severity][eq]=critical&page[limit]=50 on
// BENCH_ALERTS alerts (default 1,000,000) in PostgreSQL, netmon (child process, full edge:
// access hook, rate limiter, engine) side by side with a bare node:http + pg server running the
// equivalent hand-written SQL and serialising the same document (bench/jsonapi/_baseline-server.ts).
// autocannon with BENCH_CONNECTIONS (default 50) for BENCH_SECONDS (default 15) each.
// Run: node --import tsx bench/jsonapi/alerts-list.ts
//   BENCH_PG_URL (admin URL, default postgres://root@127.0.0.1:5432/postgres)
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import pg from "pg";
import { createApiToken, TOKEN_SCOPES } from "../../src/access/tokens.ts";
import { insertUser } from "../../src/access/users.ts";
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
const DB_NAME = "netmon_bench_jsonapi";
const PATH = "/api/v2/alerts?filter[severity][eq]=critical&page[limit]=50";
const started = Date.now();
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

// 1. Fresh database, migrated, seeded with N alerts.
const admin = new pg.Client({ connectionString: ADMIN_URL });
await admin.connect();
await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
await admin.query(`CREATE DATABASE ${DB_NAME}`);
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
const user = await insertUser(ctx, {
  email: "bench@example.test",
  password: "bench-password-123",
  role: "viewer",
});
const { token } = await createApiToken(ctx, user.id, { name: "bench", scopes: [...TOKEN_SCOPES] });
log(`seeding ${N} alerts`);
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
await db.close();
log("seeded");

// 2. Servers (separate processes, same pool size).
const netmon = spawn(process.execPath, ["bin/netmon.mjs", "serve"], {
  env: {
    ...process.env,
    ...env,
    NETMON_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "info",
    NETMON_EMBEDDED_AGENT: "false",
    NETMON_RATE_LIMIT_API_DEFAULT: "100000000/60s",
  },
  stdio: ["ignore", "pipe", "pipe"],
});
const netmonUrl = await waitFor(netmon, /netmon listening on (http:\/\/[\d.:]+)/);
netmon.stdout?.resume();
netmon.stderr?.resume();
const baseline = spawn(process.execPath, ["--import", "tsx", "bench/jsonapi/_baseline-server.ts"], {
  env: { ...process.env, DATABASE_URL: url, POOL: String(config.dbPoolSize) },
  stdio: ["ignore", "pipe", "pipe"],
});
const baseUrl = await waitFor(baseline, /baseline at (http:\/\/[\d.:]+)/);
baseline.stdout?.resume();

// 3. Same answer from both (same ids in the same order, same attributes).
const headers = { authorization: `Bearer ${token}`, accept: "application/vnd.api+json" };
const a = (await (await fetch(`${netmonUrl}${PATH}`, { headers })).json()) as {
  data: { id: string; attributes: object }[];
};
const b = (await (await fetch(`${baseUrl}${PATH}`, { headers })).json()) as {
  data: { id: string; attributes: object }[];
};
const same =
  a.data.length === 50 &&
  JSON.stringify(a.data.map((d) => [d.id, d.attributes])) ===
    JSON.stringify(b.data.map((d) => [d.id, d.attributes]));
log(`documents match: ${same}`);

async function load(base: string) {
  await autocannon({ url: `${base}${PATH}`, headers, connections: CONNECTIONS, duration: 3 }); // warm-up
  return autocannon({ url: `${base}${PATH}`, headers, connections: CONNECTIONS, duration: SECONDS });
}
const rb = await load(baseUrl);
log("baseline done");
const rn = await load(netmonUrl);
log("netmon done");
netmon.kill("SIGTERM");
baseline.kill("SIGTERM");
await new Promise((r) => setTimeout(r, 1000));
const cleanup = new pg.Client({ connectionString: ADMIN_URL });
await cleanup.connect();
await cleanup.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
await cleanup.end();
fs.rmSync(dataDir, { recursive: true, force: true });

const ratio = rn.requests.average / rb.requests.average;
console.log(`## JSON:API alerts list (${N.toLocaleString("en-US")} alerts, PostgreSQL, ${CONNECTIONS} connections, ${SECONDS} s)

\`GET ${PATH}\` — same document from both servers: ${same ? "yes" : "NO"}.
netmon log level: ${process.env.BENCH_LOG_LEVEL ?? "info"}; pool size ${config.dbPoolSize} on both.

| server | req/s (mean) | p50 ms | p99 ms | non-2xx | errors |
|---|---|---|---|---|---|
| bare node:http + pg | ${Math.round(rb.requests.average)} | ${rb.latency.p50} | ${rb.latency.p99} | ${rb.non2xx} | ${rb.errors} |
| netmon /api/v2 | ${Math.round(rn.requests.average)} | ${rn.latency.p50} | ${rn.latency.p99} | ${rn.non2xx} | ${rn.errors} |

Throughput ratio netmon/bare: ${ratio.toFixed(2)} (goal ≥ 0.70); netmon p99 ${rn.latency.p99} ms (goal < 50 ms).
Command: \`BENCH_ALERTS=${N} node --import tsx bench/jsonapi/alerts-list.ts\`. Total wall time ${((Date.now() - started) / 1000).toFixed(0)} s.
`);
process.exit(0);
