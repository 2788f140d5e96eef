// One 1,000-sighting batch shaped like inventory.ts ingestion (500 re-sightings, 500 new devices)
// through applySightings, each statement timed with its WAL volume (pg_current_wal_insert_lsn),
// optionally under EXPLAIN (ANALYZE, BUFFERS, WAL), plus block accesses per index from
// pg_statio_user_indexes and the HOT counters. Rolled back unless PROBE_COMMIT=1.
//
//   PROBE_EXPLAIN=0 node --import tsx bench/inventory/batch-probe.ts
//
// Env: PROBE_URL (default the bench database), PROBE_N (devices, 1000000), PROBE_SEED, PROBE_BASE,
// PROBE_DROP (indexes to drop inside the transaction, to compare schemas).

import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { applySightings, validateSightings } from "../../src/inventory/ingest.ts";
import type { Queryable, QueryResult, Row } from "../../src/storage/db.ts";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { type SqlFragment, type SqlQuery, toQuery } from "../../src/storage/sql.ts";

const URL = process.env.PROBE_URL ?? "postgres://root@127.0.0.1:5432/inventory_bench";
const N = Number(process.env.PROBE_N ?? 1000000);
const BASE = Number(process.env.PROBE_BASE ?? 900000);
const EXPLAIN = process.env.PROBE_EXPLAIN !== "0";
const ROLLBACK = process.env.PROBE_COMMIT !== "1";
const db = await PostgresDb.open({ connectionString: URL, poolSize: 2 });
const ipOf = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
const macOf = (i: number) =>
  (`0016${i.toString(16).padStart(8, "0")}`.toUpperCase().match(/../g) as string[]).join(":");
let seed = Number(process.env.PROBE_SEED ?? 7);
const rand = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
};
const updates = Array.from({ length: 1000 }, (_, k) => {
  if (k % 2 === 0) {
    const i = Math.floor(rand() * N);
    return { ip: ipOf(i), mac: k % 4 === 0 ? macOf(i) : undefined, source: "bench", is_available: true };
  }
  const j = BASE + k;
  return {
    ip: `12.${(j >> 16) & 255}.${(j >> 8) & 255}.${j & 255}`,
    mac: `00:17:00:${((j >> 16) & 255).toString(16).padStart(2, "0")}:${((j >> 8) & 255).toString(16).padStart(2, "0")}:${(j & 255).toString(16).padStart(2, "0")}`,
    hostname: `new-${j}`,
    source: "bench",
  };
});
const now = new Date();
const { sightings, errors } = validateSightings(updates, SYSTEM_ACTOR, now);
if (errors.length) throw new Error(JSON.stringify(errors[0]));
const walAt = async (q: Queryable) =>
  (await q.one<{ l: string }>("SELECT pg_current_wal_insert_lsn()::text AS l"))?.l as string;
const stats0 = await db.one(
  "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname='devices'",
);
const statio = async () =>
  Object.fromEntries(
    (
      await db.many<{ n: string; b: number }>(
        "SELECT indexrelname AS n, (idx_blks_hit + idx_blks_read)::int AS b FROM pg_statio_user_indexes WHERE relname IN ('devices','device_identifiers') UNION ALL SELECT relname, (heap_blks_hit+heap_blks_read)::int FROM pg_statio_user_tables WHERE relname IN ('devices','device_identifiers')",
      )
    ).map((r) => [r.n, r.b]),
  );
await new Promise((r) => setTimeout(r, 1200));
const sio0 = await statio();
const t0 = performance.now();
await db
  .transaction(async (tx) => {
    for (const ix of (process.env.PROBE_DROP ?? "").split(",").filter(Boolean))
      await tx.query(`DROP INDEX ${ix}`);
    const w0 = await walAt(tx);
    const wrapped: Queryable = {
      async query<T extends Row>(
        q: SqlFragment | SqlQuery | string,
        values?: readonly unknown[],
      ): Promise<QueryResult<T>> {
        const qq = toQuery(q, values);
        const head = qq.text.replace(/\s+/g, " ").trim().slice(0, 70);
        const a = performance.now();
        const wa = await walAt(tx);
        let res: QueryResult<T>;
        if (EXPLAIN && !/advisory/.test(qq.text)) {
          const isSelect = /^\s*SELECT/i.test(qq.text);
          const ex = await tx.many<{ "QUERY PLAN": string }>({
            text: `EXPLAIN (ANALYZE, BUFFERS, WAL) ${qq.text}`,
            values: qq.values,
          });
          console.log(`---- ${head}\n${ex.map((r) => r["QUERY PLAN"]).join("\n")}`);
          res = isSelect ? await tx.query<T>(qq) : { rows: [], rowCount: 0 };
        } else res = await tx.query<T>(qq);
        const wb = await walAt(tx);
        const wal = (await tx.one<{ d: string }>(`SELECT pg_wal_lsn_diff('${wb}','${wa}')::bigint AS d`))?.d;
        console.log(`## ${(performance.now() - a).toFixed(1)} ms wal ${wal} B  ${head}`);
        return res;
      },
      async one(q, v) {
        return (await wrapped.query(q, v)).rows[0] as never;
      },
      async many(q, v) {
        return (await wrapped.query(q, v)).rows as never;
      },
    };
    const r = await applySightings(wrapped, sightings, now);
    const w1 = await walAt(tx);
    console.log(
      `created ${r.created} updated ${r.updated}; batch WAL ${(await tx.one<{ d: string }>(`SELECT pg_wal_lsn_diff('${w1}','${w0}')::bigint AS d`))?.d} B`,
    );
    await tx.query("SELECT pg_stat_force_next_flush()");
    if (ROLLBACK) throw new Error("rollback");
  })
  .catch((e) => {
    if ((e as Error).message !== "rollback") throw e;
  });
console.log(`total ${(performance.now() - t0).toFixed(1)} ms`);
await new Promise((r) => setTimeout(r, 1500));
const sio1 = await statio();
console.log(
  Object.entries(sio1)
    .map(([k, v]) => `${k}: ${v - (sio0[k] ?? 0)}`)
    .join("\n"),
);
const stats1 = await db.one(
  "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname='devices'",
);
console.log(JSON.stringify({ stats0, stats1 }));
await db.close();
