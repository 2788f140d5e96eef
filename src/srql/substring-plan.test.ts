/**
 * A substring filter sorted by time (`hostname:%old-%`, newest first) whose matches are the
 * oldest rows: the runner counts the matches first and, when there are few, sorts them without
 * the time index (src/srql/run.ts). Whichever plan runs, a page and its cursors must answer
 * exactly what the plain ORDER BY would.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import { SYSTEM_ACTOR } from "../access/actor.ts";
import { testClock, testContext } from "../alerting/test-context.ts";
import type { AppContext } from "../kernel/context.ts";
import type { Db } from "../storage/db.ts";
import { toQuery } from "../storage/sql.ts";
import { runQuery } from "./run.ts";

const OLD = 300;
const ALL = 2600;
let db: Db;
let ctx: AppContext;
const seen: string[] = [];

beforeAll(async () => {
  db = (await createTestDatabase()).db;
  // Old devices first, every one last seen a second before the next: `old-*` are the oldest.
  await db.query(
    `INSERT INTO devices (uid, partition, ip, hostname, is_available, discovery_sources, first_seen_time, last_seen_time)
     SELECT 'sr:' || md5(i::text)::uuid::text, 'default', '10.9.' || (i >> 8) || '.' || (i & 255),
       CASE WHEN i <= $1 THEN 'old-' ELSE 'new-' END || i, true, ARRAY['sweep'],
       TIMESTAMPTZ '2026-01-01 00:00:00Z', TIMESTAMPTZ '2026-01-01 00:00:00Z' + i * interval '1 second'
     FROM generate_series(1, $2) AS i`,
    [OLD, ALL],
  );
  await db.query("ANALYZE devices");
  // Record the statement texts the runner sends.
  const recording = new Proxy(db, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (prop === "query" || prop === "one" || prop === "many") {
        return (q: Parameters<Db["query"]>[0], values?: readonly unknown[]) => {
          seen.push(toQuery(q, values).text);
          return (v as Db["query"]).call(target, q, values);
        };
      }
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  ctx = testContext(recording, testClock("2026-02-01T00:00:00Z"));
}, 120_000);
afterAll(async () => {
  await db?.close();
});

async function pages(query: string): Promise<{ hosts: string[]; sorted: boolean; fenced: boolean[] }> {
  const hosts: string[] = [];
  const fenced: boolean[] = [];
  let cursor: string | null = null;
  let last = Number.POSITIVE_INFINITY;
  let sorted = true;
  do {
    seen.length = 0;
    const r = await runQuery(ctx, SYSTEM_ACTOR, { query, cursor });
    fenced.push(seen.some((s) => s.includes("+ interval '0 s'")));
    for (const row of r.results) {
      const t = Date.parse(String(row.last_seen_time));
      if (!(t < last)) sorted = false;
      last = t;
      hosts.push(String(row.hostname));
    }
    cursor = r.pagination.next_cursor;
  } while (cursor);
  return { hosts, sorted, fenced };
}

describe("SRQL substring filter sorted by time", () => {
  it("few matches: sorted without the index, same rows, order and cursors as the plain ORDER BY", async () => {
    const out = await pages("in:devices hostname:%old-% limit:70");
    expect(out.fenced.every(Boolean)).toBe(true);
    expect(out.sorted).toBe(true);
    expect(out.hosts).toEqual(Array.from({ length: OLD }, (_, k) => `old-${OLD - k}`));
  });

  it("many matches: the time index walk stays, with the same answers", async () => {
    seen.length = 0;
    const first = await runQuery(ctx, SYSTEM_ACTOR, { query: "in:devices hostname:%-% limit:50" });
    expect(seen.some((s) => s.includes("+ interval '0 s'"))).toBe(false);
    expect(first.results.map((r) => r.hostname)).toEqual(
      Array.from({ length: 50 }, (_, k) => `new-${ALL - k}`),
    );
  });

  it("a previous page answers the page before, on either plan", async () => {
    for (const query of ["in:devices hostname:%old-% limit:40", "in:devices hostname:%-% limit:40"]) {
      const p1 = await runQuery(ctx, SYSTEM_ACTOR, { query });
      const p2 = await runQuery(ctx, SYSTEM_ACTOR, { query, cursor: p1.pagination.next_cursor });
      const back = await runQuery(ctx, SYSTEM_ACTOR, {
        query,
        cursor: p2.pagination.prev_cursor,
        direction: "prev",
      });
      expect(back.results.map((r) => r.hostname)).toEqual(p1.results.map((r) => r.hostname));
    }
  });
});
