// Measures why PGlite runs in a worker thread: the longest event-loop stall while a
// heavy query runs, with PGlite on the main thread vs behind netmon's worker.
// Run: node --import tsx bench/foundation/event-loop.ts   (BENCH_ROWS, default 300000)
import { PGlite } from "@electric-sql/pglite";
import { PgliteDb } from "../../src/storage/pglite/client.ts";

const ROWS = Number(process.env.BENCH_ROWS ?? 300_000);
const SETUP = `CREATE TABLE s (id int, g int, v float8);
INSERT INTO s SELECT i, i % 1000, random() FROM generate_series(1, ${ROWS}) i;`;
const QUERY = "SELECT g, count(*), avg(v) FROM s GROUP BY g ORDER BY 2 DESC";

async function maxStall(run: () => Promise<unknown>): Promise<{ queryMs: number; stallMs: number }> {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 5);
  const t0 = performance.now();
  await run();
  const queryMs = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 20));
  clearInterval(timer);
  return { queryMs, stallMs: worst };
}

const main = await PGlite.create();
await main.exec(SETUP);
await main.query(QUERY);
const onMain = await maxStall(() => main.query(QUERY));
await main.close();

const worker = await PgliteDb.open();
await worker.withAdvisoryLock(1n, (c) => c.script(SETUP));
await worker.query(QUERY);
const inWorker = await maxStall(() => worker.query(QUERY));
await worker.close();

const f = (n: number) => n.toFixed(1);
console.log(`## Event-loop stall during a PGlite query (${ROWS.toLocaleString("en")} rows, GROUP BY 1,000 groups)

| PGlite placement | query ms | longest event-loop stall ms |
|---|---|---|
| main thread | ${f(onMain.queryMs)} | ${f(onMain.stallMs)} |
| netmon worker thread | ${f(inWorker.queryMs)} | ${f(inWorker.stallMs)} |

Stall ratio main/worker: ${f(onMain.stallMs / Math.max(inWorker.stallMs, 0.1))}×. Command: \`node --import tsx bench/foundation/event-loop.ts\`.
`);
