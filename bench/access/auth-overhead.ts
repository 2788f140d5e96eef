// Cost of authentication + request budget per request: GET /health/live (public, no budget) vs
// GET /api/v1/me authenticated by bearer JWT, X-API-Key and session cookie (each: credential
// lookup joining user + profile, permission computation, budget check-and-record).
// Run: node --import tsx bench/access/auth-overhead.ts
//   ACCESS_BENCH_SECONDS (default 5 per case), ACCESS_BENCH_CONNECTIONS (default 20),
//   ACCESS_BENCH_DATABASE_URL (a PostgreSQL database URL → PostgreSQL + the shared PostgreSQL
//   budget store; unset → embedded PGlite + in-memory budget store),
//   ACCESS_BENCH_REDIS_URL (budgets in Redis instead: isolates the credential path's cost),
//   ACCESS_BENCH_CACHE ("both" (default): each case with the credential cache off, then on — the
//   same run, so comparable; "on" / "off": only that).
// Besides throughput it counts the database round trips of each request (50 sequential
// requests per case after the load, every query through ctx.db counted and timed).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { createApiKey } from "../../src/access/api-keys.ts";
import { createSession } from "../../src/access/sessions.ts";
import { createApiToken } from "../../src/access/tokens.ts";
import { insertUser } from "../../src/access/users.ts";
import { loadConfig } from "../../src/config/config.ts";
import { startServer } from "../../src/server.ts";
import { toQuery } from "../../src/storage/sql.ts";

const SECONDS = Number(process.env.ACCESS_BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.ACCESS_BENCH_CONNECTIONS ?? 20);
const DB_URL = process.env.ACCESS_BENCH_DATABASE_URL;
const REDIS_URL = process.env.ACCESS_BENCH_REDIS_URL;
const REQUEST_PATH =
  /\b(api_tokens|api_keys|sessions|users|role_profiles|control_credentials|netmon_rate_limit_hit|netmon_rate_limit_guarded_hit|netmon_rate_limit_take|netmon_rate_limit_give_back)\b/;
const MODES =
  (process.env.ACCESS_BENCH_CACHE ?? "both") === "both" ? ["off", "on"] : [process.env.ACCESS_BENCH_CACHE];

async function runMode(mode: string): Promise<{ rows: string[]; trips: string[]; ratio: number }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-bench-access-"));
  const server = await startServer(
    loadConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      NETMON_DATA_DIR: dataDir,
      NETMON_LOG_LEVEL: "warn",
      NETMON_EMBEDDED_AGENT: "false",
      NETMON_RATE_LIMIT_API_DEFAULT: "100000000/60s",
      NETMON_CREDENTIAL_CACHE_SECONDS: mode === "off" ? "0" : "30",
      NETMON_OTLP_GRPC_PORT: "0",
      NETMON_SYSLOG_PORT: "0",
      NETMON_SNMP_TRAP_PORT: "0",
      ...(DB_URL ? { DATABASE_URL: DB_URL } : {}),
      ...(REDIS_URL ? { REDIS_URL } : {}),
    }),
  );
  const ctx = server.ctx;
  const user = await insertUser(ctx, {
    email: `bench-${Date.now()}@example.test`,
    role: "operator",
    password: "bench-password",
  });
  const { token } = await createApiToken(ctx, user.id, { name: "bench" });
  const { key } = await createApiKey(ctx, SYSTEM_ACTOR, { name: "bench", user_id: user.id });
  const session = await createSession(ctx, user.id);

  async function load(pathname: string, headers: Record<string, string> = {}) {
    const url = `${server.url}${pathname}`;
    await autocannon({ url, headers, connections: CONNECTIONS, duration: 1 }); // warm-up
    return autocannon({ url, headers, connections: CONNECTIONS, duration: SECONDS });
  }

  // Every statement through ctx.db, counted and timed (one/many go through query).
  const db = ctx.db as unknown as { query: (...a: unknown[]) => Promise<unknown> };
  const realQuery = db.query.bind(db);
  const seen = new Map<string, { n: number; ms: number }>();
  let counting = false;
  db.query = async (...a: unknown[]) => {
    if (!counting) return realQuery(...a);
    const t = performance.now();
    try {
      return await realQuery(...a);
    } finally {
      const text = toQuery(a[0] as string, a[1] as unknown[])
        .text.replace(/\s+/g, " ")
        .trim();
      const s = seen.get(text) ?? { n: 0, ms: 0 };
      s.n++;
      s.ms += performance.now() - t;
      seen.set(text, s);
    }
  };

  const cases: [string, string, Record<string, string>][] = [
    ["public, no budget", "/health/live", {}],
    ["bearer JWT", "/api/v1/me", { authorization: `Bearer ${token}` }],
    ["X-API-Key", "/api/v1/me", { "x-api-key": key }],
    ["session cookie", "/api/v1/me", { cookie: `netmon_session=${session.token}` }],
  ];
  const rows: string[] = [];
  const trips: string[] = [];
  let live = 0;
  let bearer = 0;
  for (const [label, pathname, headers] of cases) {
    const r = await load(pathname, headers);
    if (label === "public, no budget") live = r.requests.average;
    if (label === "bearer JWT") bearer = r.requests.average;
    rows.push(
      `| ${label} | cache ${mode} | ${pathname} | ${Math.round(r.requests.average)} | ${r.latency.p50} | ${r.latency.p99} | ${r.non2xx} |`,
    );
    await new Promise((r) => setTimeout(r, 1000)); // the load's last requests finish first
    seen.clear();
    counting = true;
    const N = 50;
    const t0 = performance.now();
    for (let i = 0; i < N; i++) {
      const res = await fetch(`${server.url}${pathname}`, { headers });
      await res.arrayBuffer();
    }
    const perRequestMs = (performance.now() - t0) / N;
    counting = false;
    // Statements of the request path (credential, user, budget); anything else is a background
    // job of the server that happened to run meanwhile.
    const mine = [...seen.entries()].filter(([q]) => REQUEST_PATH.test(q));
    const total = mine.reduce((a, [, s]) => a + s.n, 0);
    const other = [...seen.values()].reduce((a, s) => a + s.n, 0) - total;
    const detail = mine
      .map(([q, s]) => `\`${q.slice(0, 60)}…\` ×${(s.n / N).toFixed(2)} (${(s.ms / s.n).toFixed(2)} ms)`)
      .join("; ");
    trips.push(
      `| ${label} | cache ${mode} | ${(total / N).toFixed(2)} | ${perRequestMs.toFixed(2)} | ${detail || "none"} | ${other} |`,
    );
  }
  await server.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  return { rows, trips, ratio: live > 0 ? bearer / live : 0 };
}

const rows: string[] = [];
const trips: string[] = [];
const ratios: string[] = [];
for (const mode of MODES) {
  const r = await runMode(mode as string);
  rows.push(...r.rows);
  trips.push(...r.trips);
  ratios.push(`cache ${mode}: ${r.ratio.toFixed(3)}`);
}

console.log(`## Access: authentication + budget cost per request

Backend: ${DB_URL ? "PostgreSQL" : "PGlite"} (budget store: ${REDIS_URL ? "Redis" : DB_URL ? "PostgreSQL table" : "memory"}); ${CONNECTIONS} connections, ${SECONDS} s per case; autocannon in the same process as the server; ${os.cpus().length} CPUs, load average ${os.loadavg()[0]?.toFixed(1)}.

| credential | cache | path | req/s (mean) | p50 ms | p99 ms | non-2xx |
|---|---|---|---|---|---|---|
${rows.join("\n")}

Bearer /api/v1/me ÷ /health/live (same server, same run): ${ratios.join("; ")}.

Database round trips per request (50 sequential requests after the load; mean statement time in brackets):

| credential | cache | round trips / request | ms / request (sequential) | statements of the request path | background statements meanwhile |
|---|---|---|---|---|---|
${trips.join("\n")}

Command: \`node --import tsx bench/access/auth-overhead.ts\`${DB_URL ? " with ACCESS_BENCH_DATABASE_URL set" : ""}${REDIS_URL ? " and ACCESS_BENCH_REDIS_URL" : ""}.
`);
