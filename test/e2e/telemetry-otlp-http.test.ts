import zlib from "node:zlib";
import { SpanStatusCode } from "@opentelemetry/api";
import { OTLPLogExporter as LogsHttpJson } from "@opentelemetry/exporter-logs-otlp-http";
import { OTLPLogExporter as LogsHttpProto } from "@opentelemetry/exporter-logs-otlp-proto";
import {
  AggregationTemporalityPreference,
  OTLPMetricExporter,
} from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPMetricExporter as MetricsProto } from "@opentelemetry/exporter-metrics-otlp-proto";
import { OTLPTraceExporter as TraceHttpJson } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as TraceProto } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { LoggerProvider, SimpleLogRecordProcessor } from "@opentelemetry/sdk-logs";
import { AggregationType, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEventRule } from "../../src/alerting/event-rules.ts";
import { testActor } from "../../src/alerting/test-context.ts";
import { STATUS_TYPE } from "../../src/telemetry/otlp/schema.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * OTLP/HTTP ingest end to end with the OpenTelemetry JS SDK's own exporters (JSON and
 * protobuf, gzip) against a real server, read back through /api/v2 and SRQL.
 */
describe("OTLP/HTTP receivers (real OpenTelemetry SDK exporters)", () => {
  let server: TestServer;
  let operator: string;
  let viewer: string;

  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_OTLP_BODY_LIMIT: String(256 * 1024) } });
    operator = await tokenFor(server, "operator");
    viewer = await tokenFor(server, "viewer");
  });
  afterAll(async () => {
    await server?.stop();
  });

  const exporterOpts = (path: string, extra: Record<string, unknown> = {}) => ({
    url: `${server.url}${path}`,
    headers: authHeaders(operator),
    ...extra,
  });

  async function v2(path: string): Promise<Record<string, unknown>[]> {
    const res = await server.fetch(path, { headers: authHeaders(operator) });
    if (res.status !== 200) console.log(server.logs.filter((l) => l.includes('"level":50')).join("\n"));
    expect(res.status, path).toBe(200);
    const doc = (await res.json()) as { data: { attributes: Record<string, unknown> }[] };
    return doc.data.map((d) => d.attributes);
  }

  async function srql(query: string): Promise<Record<string, unknown>[]> {
    const res = await server.fetch("/api/query", {
      method: "POST",
      headers: { ...authHeaders(operator), "content-type": "application/json" },
      body: JSON.stringify({ query }),
    });
    const body = (await res.json()) as { results: Record<string, unknown>[] };
    expect(res.status, JSON.stringify(body)).toBe(200);
    return body.results;
  }

  async function sendLogs(exporter: LogsHttpJson | LogsHttpProto, service: string, n: number) {
    const provider = new LoggerProvider({
      resource: resourceFromAttributes({ "service.name": service, "host.name": "web-1" }),
      processors: [new SimpleLogRecordProcessor({ exporter })],
    });
    const logger = provider.getLogger("checkout", "1.2.3");
    for (let i = 0; i < n; i++) {
      logger.emit({
        severityNumber: 17,
        severityText: "ERROR",
        body: `payment failed #${i}`,
        attributes: { "order.id": i, nested: { ok: true }, __proto__x: "y" },
      });
    }
    await provider.forceFlush();
    await provider.shutdown();
  }

  it("stores logs sent as OTLP JSON and as gzip'd protobuf; v2 and SRQL find them", async () => {
    await sendLogs(new LogsHttpJson(exporterOpts("/v1/logs")), "svc-json", 3);
    await sendLogs(new LogsHttpProto(exporterOpts("/v1/logs", { compression: "gzip" })), "svc-proto", 2);

    const json = await v2("/api/v2/logs?filter[service_name]=svc-json&sort=timestamp");
    // Each record is its own request (SimpleLogRecordProcessor), so arrival order may vary.
    json.sort((a, b) => String(a.body).localeCompare(String(b.body)));
    expect(json.map((l) => l.body)).toEqual(["payment failed #0", "payment failed #1", "payment failed #2"]);
    expect(json[0]).toMatchObject({
      severity_text: "ERROR",
      severity_number: 17,
      scope_name: "checkout",
      scope_version: "1.2.3",
      host: "web-1",
      source: "otlp",
      attributes: { "order.id": 0, nested: { ok: true }, __proto__x: "y" },
    });
    expect(json[0]?.resource_attributes).toMatchObject({ "service.name": "svc-json" });

    const proto = await srql("in:logs service_name:svc-proto sort:timestamp:asc");
    expect(proto.map((l) => l.body).sort()).toEqual(["payment failed #0", "payment failed #1"]);
  });

  it("stores spans (protobuf and JSON) with trace summaries, span metrics and ids in hex", async () => {
    for (const exporter of [
      new TraceProto(exporterOpts("/v1/traces")),
      new TraceHttpJson(exporterOpts("/v1/traces")),
    ]) {
      const provider = new TracerProvider({
        resource: resourceFromAttributes({ "service.name": "api-gw" }),
        spanProcessors: [new SimpleSpanProcessor({ exporter })],
      });
      const tracer = provider.getTracer("http");
      const root = tracer.startSpan("GET /orders", {
        kind: 1, // SERVER
        attributes: {
          "http.request.method": "GET",
          "http.route": "/orders",
          "http.response.status_code": 500,
        },
      });
      const { trace, context } = await import("@opentelemetry/api");
      const child = tracer.startSpan("SELECT orders", { kind: 2 }, trace.setSpan(context.active(), root));
      child.setStatus({ code: SpanStatusCode.ERROR, message: "timeout" });
      child.addEvent("retry", { attempt: 2 });
      child.end();
      root.end();
      await provider.forceFlush();
      await provider.shutdown();

      const traceId = root.spanContext().traceId;
      const spans = await v2(`/api/v2/otel_traces?filter[trace_id]=${traceId}&sort=timestamp`);
      expect(spans).toHaveLength(2);
      const byName = Object.fromEntries(spans.map((s) => [s.name, s]));
      expect(byName["SELECT orders"]).toMatchObject({
        parent_span_id: root.spanContext().spanId,
        status_code: 2,
        status_message: "timeout",
        service_name: "api-gw",
      });
      expect(byName["SELECT orders"]?.events).toMatchObject([{ name: "retry" }]);
      const [summary] = await v2(`/api/v2/otel_trace_summaries?filter[trace_id]=${traceId}`);
      expect(summary).toMatchObject({
        root_span_name: "GET /orders",
        root_service_name: "api-gw",
        span_count: 2,
        error_count: 1,
      });
      const bySrql = await srql(`in:otel_traces trace_id:${traceId}`);
      expect(bySrql).toHaveLength(2);
      const metrics = await v2(`/api/v2/otel_metrics?filter[trace_id]=${traceId}`);
      expect(metrics).toHaveLength(1);
      expect(metrics[0]).toMatchObject({
        span_name: "GET /orders",
        http_route: "/orders",
        http_status_code: "500",
      });
    }
  });

  it("stores gauge, sum (delta and cumulative), histogram and exponential histogram points", async () => {
    const run = async (exporter: OTLPMetricExporter | MetricsProto, service: string) => {
      const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
      const provider = new MeterProvider({
        resource: resourceFromAttributes({ "service.name": service }),
        readers: [reader],
        views: [
          {
            instrumentName: "latency.exp",
            aggregation: { type: AggregationType.EXPONENTIAL_HISTOGRAM },
          },
        ],
      });
      const meter = provider.getMeter("m");
      meter.createCounter("requests", { unit: "1", description: "served" }).add(5, { route: "/a" });
      meter.createUpDownCounter("queue.depth").add(-2);
      meter.createGauge("temperature", { unit: "Cel" }).record(21.5, { room: "lab" });
      const h = meter.createHistogram("latency", { unit: "ms" });
      for (const v of [3, 30, 300]) h.record(v);
      const e = meter.createHistogram("latency.exp");
      for (const v of [1, 2, 4, 8]) e.record(v);
      await provider.forceFlush();
      await provider.shutdown();
    };
    await run(new OTLPMetricExporter(exporterOpts("/v1/metrics")), "metrics-cumulative");
    await run(
      new MetricsProto(
        exporterOpts("/v1/metrics", { temporalityPreference: AggregationTemporalityPreference.DELTA }),
      ),
      "metrics-delta",
    );

    const points = await v2(
      "/api/v2/otel_metric_points?filter[service_name]=metrics-cumulative&page[limit]=50",
    );
    const by = Object.fromEntries(points.map((p) => [p.metric_name, p]));
    expect(by.requests).toMatchObject({
      metric_type: "sum",
      temporality: "cumulative",
      is_monotonic: true,
      value: 5,
      unit: "1",
      description: "served",
      attributes: { route: "/a" },
    });
    expect(by["queue.depth"]).toMatchObject({ metric_type: "sum", is_monotonic: false, value: -2 });
    expect(by.temperature).toMatchObject({ metric_type: "gauge", value: 21.5, attributes: { room: "lab" } });
    expect(by.latency).toMatchObject({ metric_type: "histogram", count: 3, sum: 333, min: 3, max: 300 });
    expect((by.latency?.bucket_counts as number[] | undefined)?.reduce((a, b) => a + b, 0)).toBe(3);
    expect((by.latency?.explicit_bounds as number[] | undefined)?.length).toBeGreaterThan(0);
    expect(by["latency.exp"]).toMatchObject({ metric_type: "exponential_histogram", count: 4, sum: 15 });
    const details = by["latency.exp"]?.details as { scale: number; positive: { bucket_counts: number[] } };
    expect(typeof details.scale).toBe("number");
    expect(details.positive.bucket_counts.reduce((a, b) => a + b, 0)).toBe(4);

    const delta = await srql("in:otel_metric_points service_name:metrics-delta metric_name:requests");
    expect(delta[0]).toMatchObject({ temporality: "delta", value: 5 });
  });

  it("stores summaries and answers partial success for rejected records (OTLP JSON by hand)", async () => {
    const now = `${BigInt(Date.now()) * 1_000_000n}`;
    const post = (path: string, body: unknown) =>
      server.fetch(path, {
        method: "POST",
        headers: { ...authHeaders(operator), "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const summary = await post("/v1/metrics", {
      resourceMetrics: [
        {
          resource: { attributes: [{ key: "service.name", value: { stringValue: "legacy-app" } }] },
          scopeMetrics: [
            {
              metrics: [
                {
                  name: "rpc.duration",
                  summary: {
                    dataPoints: [
                      {
                        timeUnixNano: now,
                        count: "10",
                        sum: 42.5,
                        quantileValues: [
                          { quantile: 0.5, value: 3 },
                          { quantile: 0.99, value: 9.5 },
                        ],
                      },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
    });
    expect(summary.status).toBe(200);
    expect(await summary.json()).toEqual({});
    const [point] = await v2("/api/v2/otel_metric_points?filter[service_name]=legacy-app");
    expect(point).toMatchObject({ metric_type: "summary", count: 10, sum: 42.5 });
    expect(point?.details).toMatchObject({
      quantile_values: [
        { quantile: 0.5, value: 3 },
        { quantile: 0.99, value: 9.5 },
      ],
    });

    const partial = await post("/v1/logs", {
      resourceLogs: [
        {
          resource: { attributes: [{ key: "service.name", value: { stringValue: "partial-svc" } }] },
          scopeLogs: [
            {
              logRecords: [
                {
                  timeUnixNano: now,
                  body: { stringValue: "kept\u0000with nul" },
                  traceId: "0af7651916cd43dd8448eb211c80319c",
                },
                { timeUnixNano: now, body: { stringValue: "bad id" }, traceId: "abcd" },
              ],
            },
          ],
        },
      ],
    });
    expect(partial.status).toBe(200);
    expect(await partial.json()).toEqual({
      partialSuccess: {
        rejectedLogRecords: 1,
        errorMessage: "trace_id must be 16 bytes and span_id 8 bytes",
      },
    });
    const kept = await v2("/api/v2/logs?filter[service_name]=partial-svc");
    expect(kept.map((l) => [l.body, l.trace_id])).toEqual([
      ["kept\ufffdwith nul", "0af7651916cd43dd8448eb211c80319c"],
    ]);
  });

  it("promotes an ingested OTLP log through the event rules to an event and an alert", async () => {
    await createEventRule(server.ctx, testActor("admin", ["observability.rules.create"]), {
      name: "otlp card declines",
      priority: 10,
      match: { body_contains: "card declined", service_name: "payments-otlp" },
      event: { alert: { title: "Card declines (OTLP)", severity: "critical" } },
    });
    await sendLogs(new LogsHttpProto(exporterOpts("/v1/logs")), "payments-otlp", 0);
    const provider = new LoggerProvider({
      resource: resourceFromAttributes({ "service.name": "payments-otlp" }),
      processors: [new SimpleLogRecordProcessor({ exporter: new LogsHttpProto(exporterOpts("/v1/logs")) })],
    });
    provider
      .getLogger("p")
      .emit({ severityText: "ERROR", severityNumber: 17, body: "card declined for order 7" });
    await provider.forceFlush();
    await provider.shutdown();
    const [log] = await v2("/api/v2/logs?filter[service_name]=payments-otlp");
    expect(log?.body).toBe("card declined for order 7");
    const events = await srql("in:events message:%card%");
    expect(events.length).toBe(1);
    const alerts = await server.db.many<{ title: string }>(
      "SELECT title FROM alerts WHERE title = 'Card declines (OTLP)'",
    );
    expect(alerts).toHaveLength(1);
  });

  it("needs telemetry.ingest: 401 without credentials, 403 for a viewer, in the OTLP Status shape", async () => {
    const anon = await server.fetch("/v1/logs", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(anon.status).toBe(401);
    const anonBody = (await anon.json()) as Record<string, unknown>;
    expect(anonBody).toMatchObject({ error: expect.any(String), code: 16 });

    const denied = await server.fetch("/v1/traces", {
      method: "POST",
      headers: { ...authHeaders(viewer), "content-type": "application/x-protobuf" },
      body: new Uint8Array(),
    });
    expect(denied.status).toBe(403);
    expect(denied.headers.get("content-type")).toContain("application/x-protobuf");
    const status = STATUS_TYPE.decode(new Uint8Array(await denied.arrayBuffer())) as unknown as {
      code: number;
      message: string;
    };
    expect(status.code).toBe(7);
    expect(status.message.length).toBeGreaterThan(0);

    // An API key of an operator works too.
    const key = await server.fetch("/api/v2/api-keys", { method: "GET", headers: authHeaders(operator) });
    expect(key.status).toBeLessThan(500);
  });

  it("refuses bad input with clear 4xx answers, never 500", async () => {
    const send = (path: string, headers: Record<string, string>, body: Uint8Array | string) =>
      server.fetch(path, { method: "POST", headers: { ...authHeaders(operator), ...headers }, body });
    const garbage = await send(
      "/v1/logs",
      { "content-type": "application/x-protobuf" },
      new Uint8Array([0xff, 0xff, 0xff, 0x0f, 0x01]),
    );
    expect(garbage.status).toBe(400);
    const st = STATUS_TYPE.decode(new Uint8Array(await garbage.arrayBuffer())) as unknown as {
      code: number;
      message: string;
    };
    expect(st.code).toBe(3);
    expect(st.message).toContain("not a valid OTLP logs protobuf message");

    const badJson = await send("/v1/metrics", { "content-type": "application/json" }, "{not json");
    expect(badJson.status).toBe(400);
    expect(await badJson.json()).toMatchObject({ error: "invalid_otlp", code: 3 });

    const proto = await send("/v1/logs", { "content-type": "application/json" }, '{"__proto__": {"x": 1}}');
    expect(proto.status).toBe(400);

    const wrongShape = await send("/v1/logs", { "content-type": "application/json" }, '{"resourceLogs": 5}');
    expect(wrongShape.status).toBe(400);

    const badHex = await send(
      "/v1/traces",
      { "content-type": "application/json" },
      '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}',
    );
    expect(badHex.status).toBe(400);
    expect(((await badHex.json()) as { message: string }).message).toContain("hex");

    const media = await send("/v1/logs", { "content-type": "text/plain" }, "hello");
    expect(media.status).toBe(415);

    const big = await send(
      "/v1/logs",
      { "content-type": "application/x-protobuf" },
      new Uint8Array(300 * 1024),
    );
    expect(big.status).toBe(413);

    // A gzip bomb: 64 KiB on the wire, 64 MiB inflated.
    const bomb = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024));
    const bombRes = await send(
      "/v1/logs",
      { "content-type": "application/x-protobuf", "content-encoding": "gzip" },
      bomb,
    );
    expect(bombRes.status).toBe(413);

    const notGzip = await send(
      "/v1/logs",
      { "content-type": "application/json", "content-encoding": "gzip" },
      "{}",
    );
    expect(notGzip.status).toBe(400);

    const br = await send("/v1/logs", { "content-type": "application/json", "content-encoding": "br" }, "{}");
    expect(br.status).toBe(415);

    const empty = await send("/v1/logs", { "content-type": "application/x-protobuf" }, new Uint8Array());
    expect(empty.status).toBe(200);
  });
});

describe("OTLP/HTTP back-pressure", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_INGEST: "2/60s" } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("answers 503 + Retry-After while storage refuses the write, stores nothing, and recovers without restart", async () => {
    const token = await tokenFor(server, "admin");
    const body = (text: string) =>
      JSON.stringify({
        resourceLogs: [
          {
            resource: { attributes: [{ key: "service.name", value: { stringValue: "outage-svc" } }] },
            scopeLogs: [{ logRecords: [{ body: { stringValue: text } }] }],
          },
        ],
      });
    const send = (text: string) =>
      server.fetch("/v1/logs", {
        method: "POST",
        headers: { ...authHeaders(token), "content-type": "application/json" },
        body: body(text),
      });
    // The table disappears under the receiver (as a failed-over or restoring database would refuse writes).
    await server.db.query("ALTER TABLE logs RENAME TO logs_offline");
    let down: Response;
    try {
      down = await send("during the outage");
    } finally {
      await server.db.query("ALTER TABLE logs_offline RENAME TO logs");
    }
    expect(down.status).toBe(503);
    expect(Number(down.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await down.json()).toMatchObject({ error: "storage_unavailable", code: 14 });
    const up = await send("after the outage");
    expect(up.status).toBe(200);
    const rows = await server.db.many<{ body: string }>(
      "SELECT body FROM logs WHERE service_name = 'outage-svc'",
    );
    expect(rows.map((r) => r.body)).toEqual(["after the outage"]);
  });

  it("answers 429 with Retry-After once the credential's ingest budget is spent", async () => {
    const token = await tokenFor(server, "operator");
    const send = () =>
      server.fetch("/v1/logs", {
        method: "POST",
        headers: { ...authHeaders(token), "content-type": "application/json" },
        body: "{}",
      });
    expect((await send()).status).toBe(200);
    expect((await send()).status).toBe(200);
    const third = await send();
    expect(third.status).toBe(429);
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await third.json()).toMatchObject({ error: "rate_limited", code: 8 });
  });
});
