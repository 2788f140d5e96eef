// Planner statistics on the embedded database (issue 14): the device list right after a bulk
// ingest, before and after the maintenance pass (src/storage/maintenance.ts) that PGlite needs
// because it has no autovacuum. Same query, same data, same process: the ratio is the figure.
//
//   node --import tsx bench/inventory/statistics.ts        (STATS_N devices, default 50,000)

import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { listDevices } from "../../src/inventory/devices.ts";
import { applySightings, validateSightings } from "../../src/inventory/ingest.ts";
import { autoMaintain } from "../../src/storage/maintenance.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { sql } from "../../src/storage/sql.ts";

const N = Number(process.env.STATS_N ?? 50_000);
const RUNS = 30;
const db = await PgliteDb.open({});
await migrate(db);
const now = new Date();
for (let i = 0; i < N; i += 1000) {
  const updates = Array.from({ length: Math.min(1000, N - i) }, (_, k) => {
    const j = i + k;
    return {
      ip: `10.${(j >> 16) & 255}.${(j >> 8) & 255}.${j & 255}`,
      hostname: `host-${j}`,
      source: "bench",
    };
  });
  const { sightings } = validateSightings(updates, SYSTEM_ACTOR, now);
  await db.transaction((tx) => applySightings(tx, sightings, now));
}

async function timeList(): Promise<{ p50: number; plan: string }> {
  const ms: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const t0 = performance.now();
    await listDevices(db, SYSTEM_ACTOR, { limit: 100, offset: 0 });
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  const plan = await db.many<{ "QUERY PLAN": string }>(
    sql`EXPLAIN SELECT * FROM devices WHERE deleted_at IS NULL ORDER BY seq LIMIT 100`,
  );
  // The node under Limit says how the rows are found: a sort of the whole table or an index walk.
  const node = String(plan[1]?.["QUERY PLAN"] ?? plan[0]?.["QUERY PLAN"] ?? "").replace(/^[\s->]+/, "");
  return { p50: ms[Math.floor(ms.length / 2)] as number, plan: node.split("  (")[0] as string };
}

const estimate = async () =>
  Number(
    (await db.one<{ n: number }>(sql`SELECT reltuples AS n FROM pg_class WHERE relname = 'devices'`))?.n,
  );
const beforeEst = await estimate();
const before = await timeList();
let passes = 0;
while ((await estimate()) < N * 0.9 && passes < 20) {
  await autoMaintain(db);
  passes++;
  if ((await estimate()) < N * 0.9) await new Promise((r) => setTimeout(r, 500));
}
const after = await timeList();
const afterEst = await estimate();
await db.close();

console.log(`## Planner statistics on PGlite after a bulk ingest (bench/inventory/statistics.ts)

\`node --import tsx bench/inventory/statistics.ts\`, ${N.toLocaleString("en")} devices ingested through
applySightings, then \`GET /api/devices?limit=100\`'s query (listDevices) ${RUNS} times before and after one
maintenance pass (autovacuum's rule, src/storage/maintenance.ts).

| | planner's row estimate | top plan node | p50 |
|---|---|---|---|
| right after the ingest | ${beforeEst} (never analyzed) | ${before.plan} | ${before.p50.toFixed(2)} ms |
| after the maintenance pass | ${afterEst.toLocaleString("en")} (${passes} pass(es)) | ${after.plan} | ${after.p50.toFixed(2)} ms |

Ratio: the list is **${(before.p50 / after.p50).toFixed(1)}×** faster once statistics exist.
`);
