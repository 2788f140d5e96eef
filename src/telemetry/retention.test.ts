import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import type { Db } from "../storage/db.ts";
import { ident, sql } from "../storage/sql.ts";
import { PARTITIONED_TABLES } from "./partitions.ts";
import { purgeExpiredTelemetry, RETAINED_TABLES } from "./retention.ts";
import { rollupHourly } from "./rollup.ts";
import { insertCpuMetrics, insertEvents, insertLogs, insertServiceStatus } from "./write.ts";

const DAY = 86_400_000;
const SVC = { service_type: "tcp", available: true, status: "success" };

describe("telemetry retention (database)", () => {
  let db: Db;
  const now = new Date();
  const daysAgo = (d: number) => new Date(now.getTime() - d * DAY);
  const count = async (table: string) =>
    (await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM ${ident(table)}`))?.n;

  beforeAll(async () => {
    db = (await createTestDatabase()).db;
  });
  afterAll(async () => {
    await db?.close();
  });

  it("names only tables that exist, with their time column", async () => {
    for (const t of RETAINED_TABLES) {
      const col = await db.one<{ n: number }>(sql`
        SELECT count(*)::int AS n FROM information_schema.columns
        WHERE table_name = ${t.table} AND column_name IN (${t.column}, 'id')`);
      expect(col?.n, t.table).toBe(2);
    }
  });

  it("retains every partitioned table by its partition key", async () => {
    for (const p of PARTITIONED_TABLES) {
      expect(RETAINED_TABLES.find((t) => t.table === p.table)?.column, p.table).toBe(p.column);
      const key = await db.one<{ col: string }>(sql`
        SELECT a.attname AS col FROM pg_partitioned_table pt
        JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = pt.partattrs[0]
        WHERE pt.partrelid = to_regclass(${p.table})`);
      expect(key?.col, p.table).toBe(p.column);
    }
  });

  it("deletes each class past its retention, in batches, and keeps the rest", async () => {
    // Raw CPU points 1, 10 and 100 days old; 25 recent and 25 expired service results.
    await insertCpuMetrics(
      db,
      [1, 10, 100].map((d) => ({ timestamp: daysAgo(d), host_id: "h", core_id: 0, usage_percent: d })),
    );
    await insertServiceStatus(db, [
      ...Array.from({ length: 25 }, (_, i) => ({
        timestamp: daysAgo(8 + i / 100),
        service_name: "old",
        ...SVC,
      })),
      ...Array.from({ length: 25 }, (_, i) => ({ timestamp: daysAgo(i / 10), service_name: "new", ...SVC })),
    ]);
    await rollupHourly(db, daysAgo(101), now);
    expect(await count("cpu_metrics_hourly")).toBe(3);
    await insertLogs(db, [
      { timestamp: daysAgo(40), body: "old", severity_text: "INFO" },
      { timestamp: daysAgo(2), body: "kept", severity_text: "INFO" },
    ]);
    await insertEvents(db, [
      { time: daysAgo(31), message: "old" },
      { time: daysAgo(29), message: "kept" },
    ]);

    const purged = await purgeExpiredTelemetry(
      db,
      now,
      { metricsDays: 7, rollupDays: 90, logDays: 30 },
      { batchSize: 10 },
    );
    expect(purged).toEqual({
      cpu_metrics: 2,
      service_status: 25,
      cpu_metrics_hourly: 1,
      logs: 1,
      events: 1,
    });
    expect(
      (await db.many<{ usage_percent: number }>(sql`SELECT usage_percent FROM cpu_metrics`)).map(
        (r) => r.usage_percent,
      ),
    ).toEqual([1]);
    // The rollup of the 10-day-old point outlives the raw point.
    expect(await count("cpu_metrics_hourly")).toBe(2);
    expect(
      (await db.many<{ service_name: string }>(sql`SELECT DISTINCT service_name FROM service_status`)).map(
        (r) => r.service_name,
      ),
    ).toEqual(["new"]);
    expect((await db.many<{ body: string }>(sql`SELECT body FROM logs`)).map((r) => r.body)).toEqual([
      "kept",
    ]);
    expect(
      (await db.many<{ message: string }>(sql`SELECT message FROM events`)).map((r) => r.message),
    ).toEqual(["kept"]);

    // A second pass finds nothing; a bounded pass stops after maxBatches and the next continues.
    expect(await purgeExpiredTelemetry(db, now, { metricsDays: 7, rollupDays: 90, logDays: 30 })).toEqual({});
    const bounded = await purgeExpiredTelemetry(
      db,
      now,
      { metricsDays: 1, rollupDays: 90, logDays: 30 },
      { batchSize: 4, maxBatches: 2 },
    );
    expect(bounded.service_status).toBe(8);
    expect(await count("service_status")).toBe(17);
  });
});
