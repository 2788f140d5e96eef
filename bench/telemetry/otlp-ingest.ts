// Sustained OTLP/HTTP log ingest (protobuf, the SDK's default) against a real server, next to a
// raw COPY of the same rows into a scratch copy of `logs` in the same run (PostgreSQL only).
// Run: node --import tsx bench/telemetry/otlp-ingest.ts
//   OTLP_BENCH_BATCHES (default 200), OTLP_BENCH_BATCH_SIZE (default 500 logs per request),
//   OTLP_BENCH_CONCURRENCY (default 4 requests in flight),
//   OTLP_BENCH_DATABASE_URL (PostgreSQL admin URL, default postgres://root@127.0.0.1:5432/postgres;
//   "pglite" for the embedded backend, which has no COPY peer).
import { randomBytes } from "node:crypto";
import os from "node:os";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { createApiToken, TOKEN_SCOPES } from "../../src/access/tokens.ts";
import { insertUser } from "../../src/access/users.ts";
import { loadConfig } from "../../src/config/config.ts";
import { startServer } from "../../src/server.ts";
import { requestType } from "../../src/telemetry/otlp/schema.ts";

const BATCHES = Number(process.env.OTLP_BENCH_BATCHES ?? 200);
const SIZE = Number(process.env.OTLP_BENCH_BATCH_SIZE ?? 500);
const CONCURRENCY = Number(process.env.OTLP_BENCH_CONCURRENCY ?? 4);
const ADMIN_URL = process.env.OTLP_BENCH_DATABASE_URL ?? "postgres://root@127.0.0.1:5432/postgres";
const pglite = ADMIN_URL === "pglite";

let dbUrl: string | undefined;
let dbName = "";
if (!pglite) {
  dbName = `netmon_bench_otlp_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const u = new URL(ADMIN_URL);
  u.pathname = `/${dbName}`;
  dbUrl = u.toString();
}
const dataDir = `${os.tmpdir()}/netmon-bench-otlp-${randomBytes(4).toString("hex")}`;
const server = await startServer(
  loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    NETMON_DATA_DIR: dataDir,
    NETMON_LOG_LEVEL: "warn",
    NETMON_EMBEDDED_AGENT: "false",
    NETMON_INITIAL_ADMIN: "false",
    NETMON_OTLP_GRPC_PORT: "0",
    NETMON_SYSLOG_PORT: "0",
    NETMON_SNMP_TRAP_PORT: "0",
    NETMON_RATE_LIMIT_INGEST: "1000000/60s",
    ...(dbUrl ? { DATABASE_URL: dbUrl } : {}),
  }),
);
const user = await insertUser(server.ctx, {
  email: "bench@example.test",
  password: "bench-password-1",
  role: "operator",
});
const { token } = await createApiToken(server.ctx, user.id, { name: "bench", scopes: TOKEN_SCOPES });

// One realistic request body, sent BATCHES times (the server stores every copy).
const type = requestType("logs");
const now = BigInt(Date.now()) * 1_000_000n;
const body = Buffer.from(
  type
    .encode(
      type.fromObject({
        resourceLogs: [
          {
            resource: { attributes: [{ key: "service.name", value: { stringValue: "bench-svc" } }] },
            scopeLogs: [
              {
                scope: { name: "bench" },
                logRecords: Array.from({ length: SIZE }, (_, i) => ({
                  timeUnixNano: String(now + BigInt(i)),
                  severityNumber: 9,
                  severityText: "INFO",
                  body: { stringValue: `request ${i} served in ${i % 97} ms` },
                  attributes: [
                    { key: "http.route", value: { stringValue: "/api/orders" } },
                    { key: "http.status_code", value: { intValue: 200 } },
                  ],
                  traceId: randomBytes(16),
                  spanId: randomBytes(8),
                })),
              },
            ],
          },
        ],
      }),
    )
    .finish(),
);

let sent = 0;
let failed = 0;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (sent < BATCHES) {
      sent++;
      const res = await fetch(`${server.url}/v1/logs`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/x-protobuf" },
        body,
      });
      await res.arrayBuffer();
      if (res.status !== 200) failed++;
    }
  }),
);
const otlpSecs = (performance.now() - t0) / 1000;
const stored = (await server.ctx.db.one<{ n: number }>("SELECT count(*)::int AS n FROM logs"))?.n ?? 0;
const otlpRate = stored / otlpSecs;

// Two COPY peers: into a bare copy of `logs` (no indexes: the ceiling of the wire and the heap)
// and into a copy with every index `logs` has (the same work per row the ingest path must do —
// the b-trees and the trigram index on body). The second is the fair peer.
let copyRate: number | null = null;
let copyIndexedRate: number | null = null;
if (dbUrl) {
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  await client.query("CREATE TABLE logs_copy (LIKE logs INCLUDING DEFAULTS)");
  await client.query("CREATE TABLE logs_copy_indexed (LIKE logs INCLUDING ALL)");
  const esc = (s: string) => s.replace(/\\/g, "\\\\").replace(/\t/g, "\\t").replace(/\n/g, "\\n");
  const ts = new Date().toISOString();
  function* lines() {
    for (let b = 0; b < BATCHES; b++)
      for (let i = 0; i < SIZE; i++)
        yield `${ts}\t${ts}\t${randomBytes(16).toString("hex")}\t${randomBytes(8).toString("hex")}\tINFO\t9\t${esc(`request ${i} served in ${i % 97} ms`)}\tbench-svc\tbench\t${esc('{"http.route":"/api/orders","http.status_code":200}')}\t${esc('{"service.name":"bench-svc"}')}\totlp\n`;
  }
  const copyInto = async (table: string) => {
    const t1 = performance.now();
    await pipeline(
      Readable.from(lines()),
      client.query(
        copyFrom(
          `COPY ${table} ("timestamp", observed_timestamp, trace_id, span_id, severity_text, severity_number, body, service_name, scope_name, attributes, resource_attributes, source) FROM STDIN`,
        ),
      ),
    );
    return (BATCHES * SIZE) / ((performance.now() - t1) / 1000);
  };
  copyRate = await copyInto("logs_copy");
  copyIndexedRate = await copyInto("logs_copy_indexed");
  await client.end();
}

await server.close();
if (dbUrl) {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${dbName}`);
  await admin.end();
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
console.log(`## OTLP/HTTP log ingest (${pglite ? "PGlite" : "PostgreSQL"})

\`node --import tsx bench/telemetry/otlp-ingest.ts\` — ${BATCHES} protobuf requests of ${SIZE} logs,
${CONCURRENCY} in flight, each one transaction answered after commit, then event-rule promotion.

| | records/s |
|---|---|
| OTLP/HTTP → \`logs\` (${fmt(stored)} stored, ${failed} failed requests) | ${fmt(otlpRate)} |
${
  copyRate === null || copyIndexedRate === null
    ? ""
    : `| raw \`COPY\` of the same rows into a bare copy of \`logs\` (no indexes) | ${fmt(copyRate)} |
| raw \`COPY\` into a copy of \`logs\` with all its indexes (fair peer) | ${fmt(copyIndexedRate)} |
| OTLP / COPY (no indexes) | ${((otlpRate / copyRate) * 100).toFixed(0)} % |
| OTLP / COPY (same indexes) | ${((otlpRate / copyIndexedRate) * 100).toFixed(0)} % |
`
}`);
