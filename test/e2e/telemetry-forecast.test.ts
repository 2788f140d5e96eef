import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStatefulRule } from "../../src/alerting/stateful-rules.ts";
import { testActor } from "../../src/alerting/test-context.ts";
import { runCapacityForecasts } from "../../src/telemetry/feature.ts";
import { computeCapacityForecasts, linearFit } from "../../src/telemetry/forecast.ts";
import { rollupHourly } from "../../src/telemetry/rollup.ts";
import { insertDiskMetrics } from "../../src/telemetry/write.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

const HOUR = 3_600_000;

describe("capacity forecasts (linear trend over the hourly rollups)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("fits a line exactly through collinear points", () => {
    const f = linearFit([0, 1, 2, 3], [1, 3, 5, 7]);
    expect(f.slope).toBeCloseTo(2);
    expect(f.intercept).toBeCloseTo(1);
    expect(f.r2).toBeCloseTo(1);
  });

  it("projects a filling disk's exhaustion, a flat disk's none, and skips short series", async () => {
    const now = new Date(Math.floor(Date.now() / HOUR) * HOUR);
    const rows = [];
    for (let h = 24; h >= 1; h--) {
      const t = new Date(now.getTime() - h * HOUR + 60_000);
      // /data fills 1 %/h and is at 76 % an hour ago: full 23 h from now.
      rows.push({ timestamp: t, host_id: "db-1", mount_point: "/data", usage_percent: 100 - 24 - h + 1 });
      rows.push({ timestamp: t, host_id: "db-1", mount_point: "/", usage_percent: 40 + (h % 2) * 0.5 });
    }
    for (let h = 3; h >= 1; h--) {
      rows.push({
        timestamp: new Date(now.getTime() - h * HOUR + 60_000),
        host_id: "new-host",
        mount_point: "/",
        usage_percent: 10,
      });
    }
    await insertDiskMetrics(server.db, rows);
    await rollupHourly(server.db, new Date(now.getTime() - 30 * HOUR), now);
    expect(await computeCapacityForecasts(server.db, now)).toBe(3);

    const res = await server.fetch("/api/v2/capacity_forecasts?sort=resource_key", {
      headers: authHeaders(await tokenFor(server, "viewer")),
    });
    expect(res.status).toBe(200);
    const list = ((await res.json()) as { data: { attributes: Record<string, unknown> }[] }).data.map(
      (d) => d.attributes,
    );
    const by = Object.fromEntries(list.map((f) => [f.resource_key, f]));
    const filling = by["disk:db-1:/data"] as Record<string, unknown>;
    expect(filling).toMatchObject({
      status: "projected",
      model: "linear",
      resource_type: "disk",
      sample_count: 24,
    });
    expect(filling.confidence as number).toBeGreaterThan(0.99);
    expect((filling.slope_per_second as number) * 3600).toBeCloseTo(1, 3);
    const hoursToFull = (Date.parse(String(filling.projected_exhaustion_at)) - now.getTime()) / HOUR;
    expect(hoursToFull).toBeGreaterThan(22);
    expect(hoursToFull).toBeLessThan(24);
    expect(by["disk:db-1:/"]).toMatchObject({ status: "projected", projected_exhaustion_at: null });
    expect(by["disk:new-host:/"]).toMatchObject({ status: "skipped", sample_count: 3 });

    // SRQL sees them too.
    const q = await server.fetch("/api/query", {
      method: "POST",
      headers: { ...authHeaders(await tokenFor(server, "admin")), "content-type": "application/json" },
      body: JSON.stringify({ query: "in:capacity_forecasts status:projected" }),
    });
    expect(((await q.json()) as { results: unknown[] }).results).toHaveLength(2);
  });

  it("drives a stateful alert rule: 'disk full within 7 days' fires, and clears when the trend stops", async () => {
    await createStatefulRule(server.ctx, testActor("operator", ["observability.rules.create"]), {
      name: "disk full within 7 days",
      signal: "log",
      match: { event_type: "capacity.exhaustion_forecast" },
      group_by: ["resource_key"],
      threshold: 1,
      window_seconds: 7200,
      bucket_seconds: 3600,
      alert: {
        title: "{{resource_key}} full within 7 days",
        severity: "warning",
        recover_match: { event_type: "capacity.exhaustion_cleared" },
      },
    });
    // The previous test's data: /data is filling. Run the job as the leader does.
    const signals = await runCapacityForecasts(server.ctx);
    expect(signals.map((x) => [x.kind, x.forecast.resource_key])).toEqual([
      ["capacity.exhaustion_forecast", "disk:db-1:/data"],
    ]);
    const open = await server.db.many<{ title: string; status: string }>(
      "SELECT title, status FROM alerts WHERE title LIKE '%full within 7 days'",
    );
    expect(open).toEqual([{ title: "disk:db-1:/data full within 7 days", status: "pending" }]);

    // The disk is cleaned up: a flat recent hour history makes the next pass clear it.
    await server.db.query("DELETE FROM disk_metrics_hourly WHERE mount_point = '/data'");
    const later = await runCapacityForecasts(server.ctx);
    expect(later.map((x) => x.kind)).toEqual(["capacity.exhaustion_cleared"]);
    const after = await server.db.many<{ status: string }>(
      "SELECT status FROM alerts WHERE title = 'disk:db-1:/data full within 7 days'",
    );
    expect(after).toEqual([{ status: "resolved" }]);
  });
});
