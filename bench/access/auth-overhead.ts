// Cost of authentication + request budget per request: GET /health/live (public, no budget) vs
// GET /api/v1/me authenticated by bearer JWT, X-API-Key and session cookie (each: credential
// lookup joining user + profile, permission computation, budget check-and-record).
// Run: node --import tsx bench/access/auth-overhead.ts
//   ACCESS_BENCH_SECONDS (default 5 per case), ACCESS_BENCH_CONNECTIONS (default 20),
//   ACCESS_BENCH_DATABASE_URL (a PostgreSQL database URL → PostgreSQL + the shared PostgreSQL
//   budget store; unset → embedded PGlite + in-memory budget store).
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

const SECONDS = Number(process.env.ACCESS_BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.ACCESS_BENCH_CONNECTIONS ?? 20);
const DB_URL = process.env.ACCESS_BENCH_DATABASE_URL;

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-bench-access-"));
const server = await startServer(
  loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    NETMON_DATA_DIR: dataDir,
    NETMON_LOG_LEVEL: "warn",
    NETMON_EMBEDDED_AGENT: "false",
    NETMON_RATE_LIMIT_API_DEFAULT: "100000000/60s",
    ...(DB_URL ? { DATABASE_URL: DB_URL } : {}),
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

const cases: [string, string, Record<string, string>][] = [
  ["public, no budget", "/health/live", {}],
  ["bearer JWT", "/api/v1/me", { authorization: `Bearer ${token}` }],
  ["X-API-Key", "/api/v1/me", { "x-api-key": key }],
  ["session cookie", "/api/v1/me", { cookie: `netmon_session=${session.token}` }],
];
const rows: string[] = [];
for (const [label, pathname, headers] of cases) {
  const r = await load(pathname, headers);
  rows.push(
    `| ${label} | ${pathname} | ${Math.round(r.requests.average)} | ${r.latency.p50} | ${r.latency.p99} | ${r.non2xx} |`,
  );
}
await server.close();
fs.rmSync(dataDir, { recursive: true, force: true });

console.log(`## Access: authentication + budget cost per request

Backend: ${DB_URL ? "PostgreSQL (budget store: PostgreSQL table)" : "PGlite (budget store: memory)"}; ${CONNECTIONS} connections, ${SECONDS} s per case; autocannon in the same process as the server; ${os.cpus().length} CPUs, load average ${os.loadavg()[0]?.toFixed(1)}.

| credential | path | req/s (mean) | p50 ms | p99 ms | non-2xx |
|---|---|---|---|---|---|
${rows.join("\n")}

Command: \`node --import tsx bench/access/auth-overhead.ts\`${DB_URL ? " with ACCESS_BENCH_DATABASE_URL set" : ""}.
`);
