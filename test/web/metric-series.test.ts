import { describe, expect, it } from "vitest";
import {
  metricPointsQuery,
  parseAttr,
  pointValue,
  seriesOf,
  srqlQuote,
} from "../../web/src/metric-series.ts";

/** The Metrics page's query and series rules (web/src/metric-series.ts). */
describe("metric points query", () => {
  it("quotes every user value so it stays one SRQL token", () => {
    expect(srqlQuote('a "b" \\ c:d')).toBe('"a \\"b\\" \\\\ c:d"');
    expect(
      metricPointsQuery({
        metric: "queue depth",
        service: 'svc" in:devices',
        attr: "queue=a b",
        range: "6h",
      }),
    ).toBe(
      'in:otel_metric_points metric_name:"queue depth" service_name:"svc\\" in:devices" attributes.queue:"a b" time:last_6h sort:timestamp:desc limit:5000',
    );
  });

  it("asks nothing for no metric, a bad attribute key or a range that is not one token", () => {
    expect(metricPointsQuery({ range: "1h" })).toBe("");
    expect(metricPointsQuery({ metric: "m", attr: "bad key=1", range: "1h" })).toBe("");
    expect(metricPointsQuery({ metric: "m", attr: "novalue", range: "1h" })).toBe("");
    expect(metricPointsQuery({ metric: "m", range: "1h in:devices" })).toBe("");
    expect(metricPointsQuery({ metric: "m", range: "24h" })).toContain("time:last_24h");
  });

  it("parses key=value, keeping '=' inside the value", () => {
    expect(parseAttr("")).toBeUndefined();
    expect(parseAttr(" http.route = /a=b ")).toEqual({ key: "http.route", value: "/a=b" });
    expect(parseAttr("=x")).toBe("invalid");
  });
});

describe("series", () => {
  it("splits by service and attribute set, names them, and sorts points in time", () => {
    const rows = [
      { timestamp: "2026-01-01T00:02:00Z", service_name: "w", attributes: { q: "a" }, value: 2 },
      { timestamp: "2026-01-01T00:01:00Z", service_name: "w", attributes: { q: "a" }, value: 1 },
      { timestamp: "2026-01-01T00:01:00Z", service_name: "w", attributes: { z: "1", q: "b" }, value: 5 },
      { timestamp: "2026-01-01T00:01:00Z", service_name: "v", attributes: {}, value: 7 },
      { timestamp: "not a time", service_name: "v", attributes: {}, value: 8 },
    ];
    const t = Date.parse("2026-01-01T00:01:00Z") / 1000;
    expect(seriesOf(rows)).toEqual([
      {
        label: "w {q=a}",
        points: [
          [t, 1],
          [t + 60, 2],
        ],
      },
      { label: "w {q=b, z=1}", points: [[t, 5]] },
      { label: "v", points: [[t, 7]] },
    ]);
  });

  it("plots a histogram's mean and nothing for a point without a value", () => {
    expect(pointValue({ value: 3 })).toBe(3);
    expect(pointValue({ value: null, count: 4, sum: 10 })).toBe(2.5);
    expect(pointValue({ value: null, count: 0, sum: 0 })).toBeNull();
    expect(pointValue({})).toBeNull();
  });
});
