// SRQL latency on PostgreSQL at scale: per representative query, runQuery() end-to-end
// (parse, plan, compile, cursor signing, statement timeout for aggregations, row mapping) against
// the same query hand-written in SQL on the same database, plus parse+plan+compile alone.
// Run: node --import tsx bench/srql/query.ts
//   SRQL_BENCH_DEVICES (default 1,000,000), SRQL_BENCH_LOGS (default 10,000,000),
//   SRQL_BENCH_ITER (default 100 timed runs per query), SRQL_BENCH_DATABASE_URL.
// The first run seeds the database (bench/srql/_seed.ts); later runs reuse it.
import { randomBytes } from "node:crypto";
import os from "node:os";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { loadConfig } from "../../src/config/config.ts";
import type { AppContext } from "../../src/kernel/context.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { runQuery, translate } from "../../src/srql/run.ts";
import { DEVICES, LOGS, seed } from "./_seed.ts";

const ITER = Number(process.env.SRQL_BENCH_ITER ?? 100);
const COMPILE_ITER = 5000;

const db = await seed();
const ctx: AppContext = {
  config: loadConfig({}),
  db,
  log: createLogger("warn"),
  secretKey: randomBytes(32),
  now: () => new Date(),
};

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
}

const someDevice = (await db.one<{ uid: string }>("SELECT uid FROM devices ORDER BY uid LIMIT 1 OFFSET 4242"))
  ?.uid as string;

interface Case {
  name: string;
  srql: string;
  /** Hand-written SQL returning the same rows. */
  sql: () => { text: string; values: unknown[] };
  cursor?: string;
}

const hour = () => new Date(Date.now() - 3600_000).toISOString();
const day = () => new Date(Date.now() - 86400_000).toISOString();

const cases: Case[] = [
  {
    name: "indexed filter (logs of one device)",
    srql: `in:logs device_id:"${someDevice}" limit:100`,
    sql: () => ({
      text: `SELECT * FROM logs WHERE device_id = $1 ORDER BY "timestamp" DESC, id DESC LIMIT 100`,
      values: [someDevice],
    }),
  },
  {
    name: "wildcard search (devices hostname)",
    srql: "in:devices hostname:%cam-12% limit:100",
    sql: () => ({
      text: `SELECT * FROM devices WHERE hostname ILIKE $1 AND deleted_at IS NULL ORDER BY last_seen_time DESC, uid DESC LIMIT 100`,
      values: ["%cam-12%"],
    }),
  },
  {
    name: "wildcard search (logs body, last 1h)",
    srql: "in:logs body:%refused% time:last_1h limit:100",
    sql: () => ({
      text: `SELECT * FROM logs WHERE body ILIKE $1 AND "timestamp" >= $2 ORDER BY "timestamp" DESC, id DESC LIMIT 100`,
      values: ["%refused%", hour()],
    }),
  },
  {
    name: "time window with sort (logs last 1h)",
    srql: "in:logs time:last_1h sort:timestamp:desc limit:100",
    sql: () => ({
      text: `SELECT * FROM logs WHERE "timestamp" >= $1 ORDER BY "timestamp" DESC, id DESC LIMIT 100`,
      values: [hour()],
    }),
  },
  {
    name: "stats count by field (logs last 1h by service)",
    srql: 'in:logs time:last_1h stats:"count() as n by service_name"',
    sql: () => ({
      text: `SELECT service_name, count(*) AS n FROM logs WHERE "timestamp" >= $1 GROUP BY service_name ORDER BY n DESC, service_name`,
      values: [hour()],
    }),
  },
  {
    name: "stats count by field (all devices by type)",
    srql: 'in:devices stats:"count() as n by type"',
    sql: () => ({
      text: `SELECT type, count(*) AS n FROM devices WHERE deleted_at IS NULL GROUP BY type ORDER BY n DESC, type`,
      values: [],
    }),
  },
];

// Cursor page 100: walk 99 pages of the last 24h of logs, then time page 100.
{
  const q = "in:logs time:last_24h limit:100";
  let cursor: string | null = null;
  for (let i = 0; i < 99; i++) {
    const r: Awaited<ReturnType<typeof runQuery>> = await runQuery(ctx, SYSTEM_ACTOR, {
      query: q,
      ...(cursor ? { cursor } : {}),
    });
    cursor = r.pagination.next_cursor;
  }
  const payload = JSON.parse(
    Buffer.from((cursor as string).split(".")[0] as string, "base64url").toString(),
  ) as {
    k: string[];
  };
  cases.push({
    name: "cursor page 100 (logs last 24h, 100/page)",
    srql: q,
    cursor: cursor as string,
    sql: () => ({
      text: `SELECT * FROM logs WHERE "timestamp" >= $1 AND ("timestamp", id) < ($2::timestamptz, $3::uuid)
             ORDER BY "timestamp" DESC, id DESC LIMIT 100`,
      values: [day(), payload.k[0], payload.k[1]],
    }),
  });
}

const rows: string[] = [];
for (const c of cases) {
  // Same rows both ways (sanity), then warm-up.
  const a = await runQuery(ctx, SYSTEM_ACTOR, { query: c.srql, ...(c.cursor ? { cursor: c.cursor } : {}) });
  const b = await db.many(c.sql());
  if (a.results.length !== b.length)
    throw new Error(`${c.name}: SRQL ${a.results.length} rows, SQL ${b.length}`);
  for (let i = 0; i < 5; i++) {
    await runQuery(ctx, SYSTEM_ACTOR, { query: c.srql, ...(c.cursor ? { cursor: c.cursor } : {}) });
    await db.many(c.sql());
  }
  const srql: number[] = [];
  const hand: number[] = [];
  for (let i = 0; i < ITER; i++) {
    let t = performance.now();
    await runQuery(ctx, SYSTEM_ACTOR, { query: c.srql, ...(c.cursor ? { cursor: c.cursor } : {}) });
    srql.push(performance.now() - t);
    t = performance.now();
    await db.many(c.sql());
    hand.push(performance.now() - t);
  }
  const compile: number[] = [];
  const now = new Date();
  for (let i = 0; i < COMPILE_ITER; i++) {
    const t = performance.now();
    translate(c.srql, { now, partitions: null });
    compile.push(performance.now() - t);
  }
  const f = (x: number) => x.toFixed(2);
  rows.push(
    `| ${c.name} | ${a.results.length} | ${f(pct(srql, 50))} | ${f(pct(srql, 99))} | ${f(pct(hand, 50))} | ${f(pct(hand, 99))} | ${(pct(srql, 50) / pct(hand, 50)).toFixed(2)}× | ${(pct(compile, 50) * 1000).toFixed(0)} / ${(pct(compile, 99) * 1000).toFixed(0)} |`,
  );
  process.stderr.write(`${rows[rows.length - 1]}\n`);
}

const pgVersion = (await db.one<{ v: string }>("SELECT current_setting('server_version') AS v"))?.v;
process.stdout.write(`## SRQL on PostgreSQL: ${DEVICES.toLocaleString("en")} devices, ${LOGS.toLocaleString("en")} logs

Command: \`node --import tsx bench/srql/query.ts\` (SRQL_BENCH_DEVICES=${DEVICES}, SRQL_BENCH_LOGS=${LOGS}, ${ITER} timed runs per query, sequential, SRQL and hand-written SQL interleaved).
Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, PostgreSQL ${pgVersion} on the same host (shared_buffers default), Node ${process.version}.
"SRQL" is \`runQuery()\` end-to-end (parse, plan, compile, cursor signing, row mapping; stats run in a transaction with \`SET LOCAL statement_timeout\`); "SQL" is the same query hand-written, one \`db.many\` call. Compile = \`translate()\` alone (parse+plan+compile), p50 / p99 in µs over ${COMPILE_ITER} runs.

| query | rows | SRQL p50 ms | SRQL p99 ms | SQL p50 ms | SQL p99 ms | ratio p50 | compile µs p50 / p99 |
|---|---:|---:|---:|---:|---:|---:|---:|
${rows.join("\n")}
`);
await db.close();
