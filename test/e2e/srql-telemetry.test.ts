import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { loadConfig } from "../../src/config/config.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { runQuery } from "../../src/srql/run.ts";
import type { Db } from "../../src/storage/db.ts";
import { rollupHourly } from "../../src/telemetry/rollup.ts";
import {
  insertCpuMetrics,
  insertLogs,
  insertServiceStatus,
  insertSpans,
  insertTelemetry,
  insertTimeseries,
} from "../../src/telemetry/write.ts";
import { createTestDatabase } from "../helpers/database.ts";

/** The telemetry write helpers and hourly rollups other domains build on. */
describe("telemetry storage", () => {
  let db: Db;
  beforeAll(async () => {
    db = (await createTestDatabase()).db;
  });
  afterAll(async () => {
    await db?.close();
  });

  it("insertLogs writes rows with defaults and returns their ids", async () => {
    const ids = await insertLogs(db, [
      { timestamp: new Date("2026-01-01T00:00:00Z"), body: "a", attributes: { k: [1, 2] } },
      { timestamp: new Date("2026-01-01T00:00:01Z"), body: "b" },
    ]);
    expect(ids).toHaveLength(2);
    const rows = await db.many<{ id: string; body: string; attributes: unknown; partition: string }>(
      "SELECT id::text AS id, body, attributes, partition FROM logs WHERE id = ANY($1::uuid[]) ORDER BY body",
      [ids],
    );
    expect(rows.map((r) => [r.body, r.attributes, r.partition])).toEqual([
      ["a", { k: [1, 2] }, "default"],
      ["b", {}, "default"],
    ]);
  });

  it("rejects unknown columns", async () => {
    await expect(insertTelemetry(db, "logs", [{ nope: 1 } as never])).rejects.toThrow(
      "logs has no column 'nope'",
    );
  });

  it("insertServiceStatus stores check results", async () => {
    await insertServiceStatus(db, [
      {
        timestamp: new Date(),
        service_name: "ssh",
        service_type: "tcp",
        available: false,
        status: "failed",
        response_time_ms: 12.5,
        details: { error: "refused" },
      },
    ]);
    const r = await db.one<{ available: boolean; details: unknown; response_time_ms: number }>(
      "SELECT available, details, response_time_ms FROM service_status WHERE service_name = 'ssh'",
    );
    expect(r).toEqual({ available: false, details: { error: "refused" }, response_time_ms: 12.5 });
  });

  it("insertSpans keeps one summary per trace current", async () => {
    await insertSpans(db, [
      {
        timestamp: new Date(),
        trace_id: "tr",
        span_id: "root",
        name: "GET /",
        service_name: "web",
        start_time_unix_nano: 0,
        end_time_unix_nano: 10_000_000,
      },
    ]);
    await insertSpans(db, [
      {
        timestamp: new Date(),
        trace_id: "tr",
        span_id: "child",
        parent_span_id: "root",
        name: "db",
        service_name: "pg",
        status_code: 2,
        start_time_unix_nano: 1_000_000,
        end_time_unix_nano: 30_000_000,
      },
    ]);
    const s = await db.one<Record<string, unknown>>(
      "SELECT root_span_name, root_service_name, span_count, error_count, duration_ms, service_set FROM otel_trace_summaries WHERE trace_id = 'tr'",
    );
    expect(s).toEqual({
      root_span_name: "GET /",
      root_service_name: "web",
      span_count: 2,
      error_count: 1,
      duration_ms: 30,
      service_set: ["pg", "web"],
    });
  });

  it("rollupHourly aggregates raw metrics per hour, idempotently", async () => {
    const base = Date.parse("2026-02-01T10:00:00Z");
    await insertTimeseries(db, [
      { timestamp: new Date(base + 60_000), metric_name: "rtt", device_id: "d1", value: 10 },
      { timestamp: new Date(base + 120_000), metric_name: "rtt", device_id: "d1", value: 30 },
      { timestamp: new Date(base + 3_660_000), metric_name: "rtt", device_id: "d1", value: 5 },
      { timestamp: new Date(base + 60_000), metric_name: "in", device_id: "d1", if_index: 3, value: 7 },
    ]);
    await insertCpuMetrics(db, [
      { timestamp: new Date(base + 60_000), device_id: "d1", core_id: 0, usage_percent: 50 },
      { timestamp: new Date(base + 90_000), device_id: "d1", core_id: 0, usage_percent: 70 },
    ]);
    for (let i = 0; i < 2; i++) await rollupHourly(db, new Date(base), new Date(base + 2 * 3_600_000));
    const ts = await db.many<Record<string, unknown>>(
      "SELECT bucket, metric_name, avg_value, min_value, max_value, sample_count FROM timeseries_metrics_hourly WHERE device_id = 'd1' ORDER BY bucket, metric_name",
    );
    expect(ts).toEqual([
      {
        bucket: new Date(base),
        metric_name: "in",
        avg_value: 7,
        min_value: 7,
        max_value: 7,
        sample_count: 1,
      },
      {
        bucket: new Date(base),
        metric_name: "rtt",
        avg_value: 20,
        min_value: 10,
        max_value: 30,
        sample_count: 2,
      },
      {
        bucket: new Date(base + 3_600_000),
        metric_name: "rtt",
        avg_value: 5,
        min_value: 5,
        max_value: 5,
        sample_count: 1,
      },
    ]);
    const ifh = await db.many(
      "SELECT if_index, sample_count FROM timeseries_metrics_interface_hourly WHERE device_id = 'd1'",
    );
    expect(ifh).toEqual([{ if_index: 3, sample_count: 1 }]);
    const cpu = await db.one(
      "SELECT avg_usage, max_usage, sample_count FROM cpu_metrics_hourly WHERE device_id = 'd1'",
    );
    expect(cpu).toEqual({ avg_usage: 60, max_usage: 70, sample_count: 2 });
    // The rollups are SRQL entities too.
    const ctx = {
      config: loadConfig({}),
      db,
      log: createLogger("silent"),
      secretKey: Buffer.alloc(32, 1),
      now: () => new Date(),
    };
    const q = await runQuery(ctx, SYSTEM_ACTOR, {
      query: "in:timeseries_metrics_hourly device_id:d1 metric_name:rtt sort:bucket:asc",
    });
    expect(q.results.map((r) => r.avg_value)).toEqual([20, 5]);
    const d = await runQuery(ctx, SYSTEM_ACTOR, {
      query: "in:cpu_hourly bucket:1d agg:max value_field:max_usage",
    });
    expect(d.results).toEqual([expect.objectContaining({ series: "d1", value: 70, max_usage: 70 })]);
  });
});
