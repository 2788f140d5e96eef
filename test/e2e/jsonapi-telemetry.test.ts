/**
 * Read-only telemetry collections: bounded offset pagination always applied with links to
 * later pages, filter/sort on unstored columns rejected naming the field, uuid and float
 * filter operators, composite opaque ids, partition scoping.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/storage/sql.ts";
import { tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { Client, expectError, ids } from "./jsonapi-helpers.ts";

describe("telemetry collections", () => {
  let server: TestServer;
  let admin: Client;
  const checks = [randomUUID(), randomUUID(), randomUUID()];
  const status: { id: string; check: string | null; rt: number | null }[] = [];

  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" } });
    admin = new Client(server, await tokenFor(server, "admin"));
    // Fixture rows written straight into the telemetry tables (the telemetry domain owns ingest).
    await server.db.query(
      sql`INSERT INTO logs ("timestamp", severity_text, body, service_name)
          SELECT now() - make_interval(secs => g), CASE WHEN g % 2 = 0 THEN 'INFO' ELSE 'ERROR' END, 'line ' || g, 'svc'
          FROM generate_series(1, 230) AS g`,
    );
    for (let i = 0; i < 12; i++) {
      const id = randomUUID();
      const check = i % 4 === 3 ? null : (checks[i % 3] as string);
      const rt = i % 5 === 4 ? null : i * 1.5;
      await server.db.query(
        sql`INSERT INTO service_status (id, "timestamp", service_check_id, service_name, service_type, available, status, response_time_ms)
            VALUES (${id}, now() - make_interval(secs => ${i}), ${check}, ${`s${i}`}, 'http', ${i % 2 === 0}, 'ok', ${rt})`,
      );
      status.push({ id, check, rt });
    }
    await server.db.query(
      sql`INSERT INTO timeseries_metrics_hourly (bucket, device_id, metric_name, avg_value, sample_count)
          VALUES (now(), 'dev-1', 'cpu', 1.5, 3), (now() - interval '1 hour', 'dev-1', 'cpu', 2.5, 3)`,
    );
    await server.db.query(
      sql`INSERT INTO capacity_forecasts (forecasted_at, resource_key, metric_name, horizon_seconds, status)
          VALUES ('2026-01-01T00:00:00Z', 'disk:/', 'used', 86400, 'projected'), ('2026-01-01T00:00:00Z', 'disk:/var', 'used', 86400, 'skipped')`,
    );
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("always paginates (default 100) with links to later pages and no gaps", async () => {
    const first = await admin.get("/logs");
    expect(first.status).toBe(200);
    expect((first.doc.data as unknown[]).length).toBe(100);
    expect(first.doc.links?.next).toContain("page[offset]=100");
    expect(first.doc.links?.prev).toBeNull();
    const seen = ids(first);
    let next = first.doc.links?.next as string | null;
    while (next) {
      const r = await admin.get(next.replace(/^.*\/api\/v2/, ""));
      seen.push(...ids(r));
      next = (r.doc.links?.next as string | null) ?? null;
    }
    expect(seen.length).toBe(230);
    expect(new Set(seen).size).toBe(230);
    expectError(await admin.get("/logs", "page[limit]=1001"), 400, "page[limit]");
    expectError(await admin.get("/logs", "page[after]=x"), 400, "page[after]");
    expectError(await admin.get("/logs/whatever"), 404);
  });

  it("filters logs and sorts ascending", async () => {
    const r = await admin.get("/logs", "filter[severity_text][eq]=ERROR&sort=timestamp&page[limit]=1000");
    const rows = r.doc.data as { attributes: { severity_text: string; timestamp: string } }[];
    expect(rows.length).toBe(115);
    expect(rows.every((x) => x.attributes.severity_text === "ERROR")).toBe(true);
    const ts = rows.map((x) => Date.parse(x.attributes.timestamp));
    expect(ts).toEqual([...ts].sort((a, b) => a - b));
  });

  it("filter or sort on a column the serving table does not store is a 400 naming the field", async () => {
    const f = expectError(
      await admin.get("/timeseries_metrics_hourly", "filter[unit][eq]=ms"),
      400,
      "filter[unit]",
    );
    expect(f.detail).toContain("unit");
    const s = expectError(
      await admin.get("/timeseries_metrics_hourly", "sort=-target_device_ip"),
      400,
      "sort",
    );
    expect(s.detail).toContain("target_device_ip");
    expectError(
      await admin.get("/otel_trace_summaries", "filter[root_span_status_message][is_nil]=true"),
      400,
      "filter[root_span_status_message]",
    );
    const ok = await admin.get("/timeseries_metrics_hourly");
    expect(ok.status).toBe(200);
    const attrs = (ok.doc.data as { attributes: Record<string, unknown> }[])[0]?.attributes ?? {};
    expect(attrs.unit).toBeNull();
    expect(attrs.avg_value).toBe(1.5);
  });

  it("uuid attribute: every operator", async () => {
    const q = async (f: string) => ids(await admin.get("/service_status", `${f}&page[limit]=1000`)).sort();
    const exp = (p: (s: (typeof status)[number]) => boolean) =>
      status
        .filter(p)
        .map((s) => s.id)
        .sort();
    const c0 = checks[0] as string;
    const sorted = [...checks].sort();
    const mid = sorted[1] as string;
    expect(await q(`filter[service_check_id][eq]=${c0}`)).toEqual(exp((s) => s.check === c0));
    expect(await q(`filter[service_check_id][eq]=${c0.toUpperCase()}`)).toEqual(exp((s) => s.check === c0));
    expect(await q(`filter[service_check_id][not_eq]=${c0}`)).toEqual(
      exp((s) => s.check !== null && s.check !== c0),
    );
    expect(await q(`filter[service_check_id][greater_than]=${mid}`)).toEqual(
      exp((s) => s.check !== null && s.check > mid),
    );
    expect(await q(`filter[service_check_id][greater_than_or_equal]=${mid}`)).toEqual(
      exp((s) => s.check !== null && s.check >= mid),
    );
    expect(await q(`filter[service_check_id][less_than]=${mid}`)).toEqual(
      exp((s) => s.check !== null && s.check < mid),
    );
    expect(await q(`filter[service_check_id][less_than_or_equal]=${mid}`)).toEqual(
      exp((s) => s.check !== null && s.check <= mid),
    );
    expect(
      await q(`filter[service_check_id][in][]=${c0}&filter[service_check_id][in][]=${checks[1]}`),
    ).toEqual(exp((s) => s.check === c0 || s.check === checks[1]));
    expect(await q("filter[service_check_id][is_nil]=true")).toEqual(exp((s) => s.check === null));
    expect(await q(`filter[service_check_id][is_distinct_from]=${c0}`)).toEqual(exp((s) => s.check !== c0));
    expect(await q(`filter[service_check_id][is_not_distinct_from]=${c0}`)).toEqual(
      exp((s) => s.check === c0),
    );
    expectError(
      await admin.get("/service_status", "filter[service_check_id][contains]=a"),
      400,
      "filter[service_check_id][contains]",
    );
    expectError(
      await admin.get("/service_status", "filter[service_check_id][in][]=nope"),
      400,
      "filter[service_check_id][in][0]",
    );
  });

  it("float attribute: every operator", async () => {
    const q = async (f: string) => ids(await admin.get("/service_status", `${f}&page[limit]=1000`)).sort();
    const exp = (p: (rt: number) => boolean, nulls = false) =>
      status
        .filter((s) => (s.rt === null ? nulls : p(s.rt)))
        .map((s) => s.id)
        .sort();
    const f = "filter[response_time_ms]";
    expect(await q(`${f}[eq]=4.5`)).toEqual(exp((x) => x === 4.5));
    expect(await q(`${f}[not_eq]=4.5`)).toEqual(exp((x) => x !== 4.5));
    expect(await q(`${f}[greater_than]=4.5`)).toEqual(exp((x) => x > 4.5));
    expect(await q(`${f}[greater_than_or_equal]=4.5`)).toEqual(exp((x) => x >= 4.5));
    expect(await q(`${f}[less_than]=4.5`)).toEqual(exp((x) => x < 4.5));
    expect(await q(`${f}[less_than_or_equal]=4.5e0`)).toEqual(exp((x) => x <= 4.5));
    expect(await q(`${f}[in][]=0&${f}[in][]=1.5`)).toEqual(exp((x) => x === 0 || x === 1.5));
    expect(await q(`${f}[is_nil]=true`)).toEqual(exp(() => false, true));
    expect(await q(`${f}[is_distinct_from]=1.5`)).toEqual(exp((x) => x !== 1.5, true));
    expect(await q(`${f}[is_not_distinct_from]=1.5`)).toEqual(exp((x) => x === 1.5));
    expectError(await admin.get("/service_status", `${f}[eq]=fast`), 400, `${f}[eq]`);
  });

  it("array attribute (jsonb): operators on JSON array values", async () => {
    await server.db.query(
      sql`INSERT INTO otel_traces ("timestamp", trace_id, span_id, name, events)
          VALUES (now(), 't1', 's1', 'no-events', '[]'::jsonb), (now(), 't2', 's2', 'one-event', '[{"name":"x"}]'::jsonb)`,
    );
    const names = async (q: string) => {
      const r = await admin.get("/otel_traces", q);
      expect(r.status, JSON.stringify(r.doc)).toBe(200);
      return (r.doc.data as { attributes: { name: string } }[]).map((d) => d.attributes.name).sort();
    };
    expect(await names("filter[events][eq]=%5B%5D")).toEqual(["no-events"]);
    expect(await names("filter[events][not_eq]=%5B%5D")).toEqual(["one-event"]);
    expect(await names("filter[events][in][]=%5B%7B%22name%22%3A%22x%22%7D%5D")).toEqual(["one-event"]);
    expect(await names("filter[events][is_nil]=false")).toEqual(["no-events", "one-event"]);
    expectError(await admin.get("/otel_traces", "filter[events][eq]=%7B%7D"), 400, "filter[events][eq]");
    expectError(await admin.get("/otel_traces", "filter[events][like]=x"), 400, "filter[events][like]");
  });

  it("composite ids are opaque and stable", async () => {
    const r = await admin.get("/capacity_forecasts", "sort=resource_key");
    const got = ids(r);
    expect(got.length).toBe(2);
    expect(new Set(got).size).toBe(2);
    expect(got[0]).toContain("disk:/");
    const again = ids(await admin.get("/capacity_forecasts", "sort=resource_key"));
    expect(again).toEqual(got);
    expect(ids(await admin.get("/capacity_forecasts", "filter[status][eq]=skipped")).length).toBe(1);
  });

  it("telemetry reads need the matching permission; writes do not exist", async () => {
    const anon = new Client(server, null);
    expectError(await anon.get("/logs"), 401);
    const r = await admin.req("POST", "/logs", { data: { type: "log", attributes: {} } });
    expect(r.status).toBe(404);
  });
});
