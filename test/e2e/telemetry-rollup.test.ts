import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rollupHourly } from "../../src/telemetry/rollup.ts";
import { insertMetricPoints } from "../../src/telemetry/write.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

const HOUR = 3_600_000;

describe("hourly rollups of OTLP metric points", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("rolls points up per series and hour; delta counts add, cumulative keep the latest; re-runs are idempotent", async () => {
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR;
    const at = (m: number) => new Date(hour + m * 60_000);
    await insertMetricPoints(server.db, [
      {
        timestamp: at(1),
        metric_name: "temp",
        metric_type: "gauge",
        service_name: "s",
        value: 10,
        attributes: { room: "a" },
      },
      {
        timestamp: at(30),
        metric_name: "temp",
        metric_type: "gauge",
        service_name: "s",
        value: 20,
        attributes: { room: "a" },
      },
      {
        timestamp: at(40),
        metric_name: "temp",
        metric_type: "gauge",
        service_name: "s",
        value: 99,
        attributes: { room: "b" },
      },
      {
        timestamp: at(61),
        metric_name: "temp",
        metric_type: "gauge",
        service_name: "s",
        value: 30,
        attributes: { room: "a" },
      },
      {
        timestamp: at(5),
        metric_name: "lat",
        metric_type: "histogram",
        temporality: "delta",
        service_name: "s",
        count: 3,
        sum: 30,
      },
      {
        timestamp: at(35),
        metric_name: "lat",
        metric_type: "histogram",
        temporality: "delta",
        service_name: "s",
        count: 2,
        sum: 5,
      },
      {
        timestamp: at(5),
        metric_name: "reqs",
        metric_type: "histogram",
        temporality: "cumulative",
        service_name: "s",
        count: 100,
        sum: 1,
      },
      {
        timestamp: at(35),
        metric_name: "reqs",
        metric_type: "histogram",
        temporality: "cumulative",
        service_name: "s",
        count: 130,
        sum: 2,
      },
    ]);
    await rollupHourly(server.db, new Date(hour - HOUR), new Date());
    await rollupHourly(server.db, new Date(hour - HOUR), new Date());
    const res = await server.fetch("/api/v2/otel_metric_points_hourly?sort=bucket&page[limit]=50", {
      headers: authHeaders(await tokenFor(server, "viewer")),
    });
    expect(res.status).toBe(200);
    const rows = ((await res.json()) as { data: { attributes: Record<string, unknown> }[] }).data.map(
      (d) => d.attributes,
    );
    const first = new Date(hour).toISOString();
    const pick = (name: string, room?: string, bucket = first) =>
      rows.find(
        (r) =>
          r.metric_name === name &&
          r.bucket === bucket &&
          (room === undefined || (r.attributes as Record<string, unknown>).room === room),
      );
    expect(rows).toHaveLength(5);
    expect(pick("temp", "a")).toMatchObject({
      avg_value: 15,
      min_value: 10,
      max_value: 20,
      last_value: 20,
      sample_count: 2,
    });
    expect(pick("temp", "b")).toMatchObject({ avg_value: 99, sample_count: 1 });
    expect(pick("temp", "a", new Date(hour + HOUR).toISOString())).toMatchObject({
      avg_value: 30,
      sample_count: 1,
    });
    expect(pick("lat")).toMatchObject({ temporality: "delta", count_total: 5, sum_total: 35 });
    expect(pick("reqs")).toMatchObject({ temporality: "cumulative", count_total: 130, sum_total: 2 });
  });
});
