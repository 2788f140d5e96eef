import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import type { BulkLoad, Db, Queryable } from "../storage/db.ts";
import { ident, sql } from "../storage/sql.ts";
import { COPY_MIN_ROWS, insertLogs, insertMetricPoints, type TelemetryTable } from "./write.ts";

/**
 * The COPY path (tables with an id) and the multi-row INSERT path must store the same values:
 * a row written either way reads back identical. INSERT is forced by handing the writer a
 * Queryable without `copyIn`.
 */
const HOSTILE = 'tab\there, newline\nand\r\\N backslash \\ quote " comma , braces {} ünï 💥';

/** The row first, then fillers up to COPY_MIN_ROWS, so the batch takes the COPY path. */
function copyBatch<T extends object>(row: T, filler: (i: number) => T): T[] {
  return [row, ...Array.from({ length: COPY_MIN_ROWS - 1 }, (_, i) => filler(i))];
}

/** The database, counting the COPYs made through it (to prove the COPY path ran). */
function counting(db: Db): Queryable & BulkLoad & { copies: number } {
  const q = {
    copies: 0,
    query: db.query.bind(db),
    one: db.one.bind(db),
    many: db.many.bind(db),
    copyIn: (table: string, columns: readonly string[], rows: readonly (readonly unknown[])[]) => {
      q.copies++;
      return db.copyIn(table, columns, rows);
    },
  } as Queryable & BulkLoad & { copies: number };
  return q;
}

function insertOnly(db: Db): Queryable {
  return { query: (q, v) => db.query(q, v), one: (q, v) => db.one(q, v), many: (q, v) => db.many(q, v) };
}

describe("telemetry writes: COPY and INSERT store the same rows", () => {
  let db: Db;
  beforeAll(async () => {
    db = (await createTestDatabase()).db;
  });
  afterAll(async () => {
    await db?.close();
  });

  async function readBack(table: TelemetryTable, id: string): Promise<Record<string, unknown>> {
    const row = await db.one(sql`SELECT * FROM ${ident(table)} WHERE id = ${id}::uuid`);
    expect(row, `${table} ${id}`).toBeDefined();
    // id and the insertion time differ by construction.
    const { id: _id, created_at: _created, ...rest } = row as Record<string, unknown>;
    return rest;
  }

  it("logs: hostile text, JSON of every shape, NULLs and timestamps", async () => {
    const row = {
      timestamp: new Date("2026-11-25T10:11:12.345Z"),
      observed_timestamp: "2026-11-25T10:11:13Z",
      severity_text: "WARN",
      severity_number: 13,
      body: HOSTILE,
      service_name: HOSTILE,
      trace_id: null,
      attributes: { s: HOSTILE, n: 1.5, b: false, nil: null, list: [1, "two", { three: [3] }], "k\tey": "v" },
      resource_attributes: ["a", HOSTILE],
      source: "otlp",
    };
    const copying = counting(db);
    const [viaCopy] = await insertLogs(
      copying,
      copyBatch(row, (i) => ({ ...row, body: `filler ${i}` })),
    );
    expect(copying.copies).toBe(1);
    const [viaInsert] = await insertLogs(insertOnly(db), [row]);
    expect(viaCopy).toMatch(/^[0-9a-f-]{36}$/);
    expect(viaInsert).toMatch(/^[0-9a-f-]{36}$/);
    const copied = await readBack("logs", viaCopy as string);
    expect(copied).toEqual(await readBack("logs", viaInsert as string));
    expect(copied.body).toBe(HOSTILE);
    expect(copied.attributes).toEqual(row.attributes);
    expect(copied.resource_attributes).toEqual(row.resource_attributes);
    expect(copied.trace_id).toBeNull();
    // Columns the row did not set took their defaults.
    expect(copied.partition).toBe("default");
  });

  it("metric points: arrays with NULLs, non-finite numbers, booleans, bigints", async () => {
    const row = {
      timestamp: new Date("2026-11-25T10:00:00Z"),
      metric_name: "http.server.duration",
      metric_type: "histogram",
      is_monotonic: true,
      value: Number.NaN,
      count: 12n as unknown as number,
      sum: Number.POSITIVE_INFINITY,
      min: -0.5,
      bucket_counts: [1, null, 11],
      explicit_bounds: [0.5, 1e-9, Number.NEGATIVE_INFINITY],
      attributes: { route: HOSTILE },
    };
    const [viaCopy] = await insertMetricPoints(
      db,
      copyBatch(row, () => row),
    );
    const [viaInsert] = await insertMetricPoints(insertOnly(db), [row]);
    const copied = await readBack("otel_metric_points", viaCopy as string);
    expect(copied).toEqual(await readBack("otel_metric_points", viaInsert as string));
    expect(copied.bucket_counts).toEqual([1, null, 11]);
    expect(copied.explicit_bounds).toEqual([0.5, 1e-9, Number.NEGATIVE_INFINITY]);
    expect(copied.is_monotonic).toBe(true);
  });

  it("rows that set different columns each get the defaults they left out, ids in row order", async () => {
    const ts = new Date("2026-11-25T09:00:00Z");
    const rows = [
      { timestamp: ts, body: "first", partition: "edge" },
      { timestamp: ts, body: "second" },
      { timestamp: ts, body: "third", partition: "edge" },
    ];
    const ids = await insertLogs(db, [
      ...rows,
      ...Array.from({ length: COPY_MIN_ROWS }, (_, i) => ({ timestamp: ts, body: `filler ${i}` })),
    ]);
    expect(ids).toHaveLength(rows.length + COPY_MIN_ROWS);
    const got = await Promise.all(ids.slice(0, 3).map((id) => readBack("logs", id)));
    expect(got.map((r) => [r.body, r.partition])).toEqual([
      ["first", "edge"],
      ["second", "default"],
      ["third", "edge"],
    ]);
  });

  it("a row PostgreSQL refuses fails the whole batch inside a transaction: nothing stored", async () => {
    const marker = `atomic-${Date.now()}`;
    await expect(
      db.transaction((tx) =>
        insertLogs(tx, [
          ...Array.from({ length: COPY_MIN_ROWS }, () => ({ timestamp: new Date(), body: marker })),
          { timestamp: "not a timestamp", body: marker },
        ]),
      ),
    ).rejects.toThrow();
    const n = await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM logs WHERE body = ${marker}`);
    expect(n?.n).toBe(0);
    // The database is usable afterwards (the connection left no COPY half open).
    const again = Array.from({ length: COPY_MIN_ROWS }, () => ({ timestamp: new Date(), body: marker }));
    expect((await insertLogs(db, again)).length).toBe(COPY_MIN_ROWS);
  });
});
