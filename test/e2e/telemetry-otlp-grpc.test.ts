import { Client, credentials, Metadata, status } from "@grpc/grpc-js";
import { context, trace } from "@opentelemetry/api";
import { OTLPLogExporter } from "@opentelemetry/exporter-logs-otlp-grpc";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-grpc";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { LoggerProvider, type LogRecordExporter, SimpleLogRecordProcessor } from "@opentelemetry/sdk-logs";
import { MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { freeTcpUdpPort } from "../helpers/ports.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** OTLP/gRPC with the OpenTelemetry JS SDK's gRPC exporters against a real server. */
describe("OTLP/gRPC receiver (real OpenTelemetry SDK gRPC exporters)", () => {
  let server: TestServer;
  let url: string;
  let operator: string;
  let viewer: string;

  beforeAll(async () => {
    const port = await freeTcpUdpPort();
    server = await startTestServer({
      env: {
        NETMON_OTLP_GRPC_PORT: String(port),
        NETMON_INGEST_HOST: "127.0.0.1",
        NETMON_RATE_LIMIT_AUTH_FAILURES: "2/60s",
      },
    });
    url = `http://127.0.0.1:${port}`;
    operator = await tokenFor(server, "operator");
    viewer = await tokenFor(server, "viewer");
  });
  afterAll(async () => {
    await server?.stop();
  });

  const metadata = (token: string) => {
    const md = new Metadata();
    md.set("authorization", `Bearer ${token}`);
    return md;
  };

  async function v2(path: string): Promise<Record<string, unknown>[]> {
    const res = await server.fetch(path, { headers: authHeaders(operator) });
    expect(res.status, path).toBe(200);
    return ((await res.json()) as { data: { attributes: Record<string, unknown> }[] }).data.map(
      (d) => d.attributes,
    );
  }

  /** Export through the exporter directly, to see the result code the SDK gets. */
  function exportLogs(
    exporter: LogRecordExporter,
    service: string,
    body: string,
  ): Promise<{ code: number; error?: Error }> {
    return new Promise((resolve) => {
      const captured: Parameters<LogRecordExporter["export"]>[0] = [];
      const provider = new LoggerProvider({
        resource: resourceFromAttributes({ "service.name": service }),
        processors: [
          {
            onEmit: (r) => {
              captured.push(r);
            },
            forceFlush: async () => {},
            shutdown: async () => {},
          },
        ],
      });
      provider.getLogger("grpc-test").emit({ severityText: "WARN", severityNumber: 13, body });
      exporter.export(captured, (result) => resolve(result));
    });
  }

  it("stores logs, spans and metrics sent over gRPC (gzip)", async () => {
    const logs = new OTLPLogExporter({ url, metadata: metadata(operator), compression: "gzip" as never });
    const provider = new LoggerProvider({
      resource: resourceFromAttributes({ "service.name": "grpc-svc" }),
      processors: [new SimpleLogRecordProcessor({ exporter: logs })],
    });
    provider.getLogger("g").emit({ severityNumber: 9, body: "hello over grpc", attributes: { k: "v" } });
    await provider.forceFlush();
    await provider.shutdown();
    const [log] = await v2("/api/v2/logs?filter[service_name]=grpc-svc");
    expect(log).toMatchObject({ body: "hello over grpc", severity_text: "INFO", attributes: { k: "v" } });

    const tp = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": "grpc-api" }),
      spanProcessors: [
        new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url, metadata: metadata(operator) }) }),
      ],
    });
    const tracer = tp.getTracer("t");
    const root = tracer.startSpan("root", { kind: 1 });
    tracer.startSpan("child", {}, trace.setSpan(context.active(), root)).end();
    root.end();
    await tp.forceFlush();
    await tp.shutdown();
    const [summary] = await v2(`/api/v2/otel_trace_summaries?filter[trace_id]=${root.spanContext().traceId}`);
    expect(summary).toMatchObject({ root_span_name: "root", span_count: 2, root_service_name: "grpc-api" });

    const reader = new PeriodicExportingMetricReader({
      exporter: new OTLPMetricExporter({ url, metadata: metadata(operator) }),
      exportIntervalMillis: 3_600_000,
    });
    const mp = new MeterProvider({
      resource: resourceFromAttributes({ "service.name": "grpc-m" }),
      readers: [reader],
    });
    mp.getMeter("m").createCounter("grpc.requests").add(3);
    await mp.forceFlush();
    await mp.shutdown();
    const [point] = await v2("/api/v2/otel_metric_points?filter[service_name]=grpc-m");
    expect(point).toMatchObject({
      metric_name: "grpc.requests",
      metric_type: "sum",
      value: 3,
      temporality: "cumulative",
    });
  });

  it("answers INVALID_ARGUMENT to bytes that are not an OTLP message, RESOURCE_EXHAUSTED past the size limit", async () => {
    const client = new Client(url.replace("http://", ""), credentials.createInsecure());
    const call = (body: Buffer) =>
      new Promise<{ code: number; details: string }>((resolve) => {
        client.makeUnaryRequest(
          "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
          (b: Buffer) => b,
          (b: Buffer) => b,
          body,
          metadata(operator),
          (err) => resolve({ code: err?.code ?? 0, details: err?.details ?? "" }),
        );
      });
    const garbage = await call(Buffer.from([0xff, 0xff, 0xff, 0x0f, 0x01]));
    expect(garbage.code).toBe(status.INVALID_ARGUMENT);
    expect(garbage.details).toContain("not a valid OTLP logs protobuf message");
    const huge = await call(Buffer.alloc(17 * 1024 * 1024));
    expect(huge.code).toBe(status.RESOURCE_EXHAUSTED);
    expect((await call(Buffer.alloc(0))).code).toBe(0);
    client.close();
  });

  it("refuses missing credentials and callers without telemetry.ingest (SDK sees a failed export)", async () => {
    const anon = await exportLogs(new OTLPLogExporter({ url }), "grpc-anon", "nope");
    expect(anon.code).toBe(1); // ExportResultCode.FAILED
    expect(String(anon.error?.message)).toMatch(/UNAUTHENTICATED|Authentication/i);
    const denied = await exportLogs(
      new OTLPLogExporter({ url, metadata: metadata(viewer) }),
      "grpc-viewer",
      "nope",
    );
    expect(denied.code).toBe(1);
    expect(String(denied.error?.message)).toMatch(/PERMISSION_DENIED|telemetry.ingest/);
    expect(await v2("/api/v2/logs?filter[service_name]=grpc-anon")).toEqual([]);
    expect(await v2("/api/v2/logs?filter[service_name]=grpc-viewer")).toEqual([]);
    const ok = await exportLogs(new OTLPLogExporter({ url, metadata: metadata(operator) }), "grpc-ok", "yes");
    expect(ok.code).toBe(0);
  });
  // Last: it spends this IP's failed-authentication budget.
  it("budgets failed authentications per client IP as HTTP does", async () => {
    const bad = () =>
      exportLogs(new OTLPLogExporter({ url, metadata: metadata("not-a-token") }), "grpc-bad", "x");
    expect(String((await bad()).error?.message)).toMatch(/UNAUTHENTICATED|Authentication/i);
    expect(String((await bad()).error?.message)).toMatch(/UNAUTHENTICATED|Authentication/i);
    expect(String((await bad()).error?.message)).toMatch(/RESOURCE_EXHAUSTED|too many failed/i);
  });
});
