import type { LogRow, SpanRow, TelemetryRow } from "../write.ts";

/**
 * OTLP messages (protobufjs instances of the official types) → rows of `logs`,
 * `otel_metric_points` and `otel_traces`. Pure: no I/O, so every mapping rule is unit-tested.
 * Records that cannot be stored (an id of the wrong length, a time outside PostgreSQL's range)
 * are counted as rejected with a reason, for the OTLP partial-success answer; the rest are kept.
 */
type Msg = { readonly [k: string]: unknown };

export interface Mapped<R> {
  rows: R[];
  rejected: number;
  /** The first rejection's reason (OTLP `partial_success.error_message`). */
  reason: string | null;
}

export interface Origin {
  /** Who sent it (the authenticated principal's id), kept in `ingest_identity`. */
  identity: string;
  now: Date;
}

const list = (m: unknown, k: string): Msg[] =>
  m && typeof m === "object" && Array.isArray((m as Msg)[k]) ? ((m as Msg)[k] as Msg[]) : [];
const child = (m: unknown, k: string): Msg | null => {
  const v = m && typeof m === "object" ? (m as Msg)[k] : null;
  return v && typeof v === "object" ? (v as Msg) : null;
};

/** Lone surrogates: PostgreSQL text and jsonb cannot hold them (nor NUL). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Text safe for PostgreSQL text/jsonb: NUL and lone surrogates become U+FFFD. */
export function cleanText(s: string): string {
  return s.replaceAll("\u0000", "\ufffd").replace(LONE_SURROGATE, "\ufffd");
}

function str(m: Msg | null, k: string): string | null {
  const v = m?.[k];
  return typeof v === "string" && v !== "" ? cleanText(v) : null;
}

/** A protobufjs 64-bit value (Long, number or string) as a bigint; null when absent or invalid. */
function big(v: unknown): bigint | null {
  if (v === null || v === undefined) return null;
  try {
    if (typeof v === "bigint") return v;
    if (typeof v === "number") return Number.isFinite(v) ? BigInt(Math.trunc(v)) : null;
    return BigInt(String(v));
  } catch {
    return null;
  }
}

function num(v: unknown): number | null {
  if (v === null || v === undefined) return null;
  const n = typeof v === "number" ? v : Number(String(v));
  return Number.isFinite(n) ? n : null;
}

// PostgreSQL timestamptz accepts up to year 294276, JavaScript Date to ±8.64e15 ms; keep to
// years 1–9999 so every stored time also prints in ISO 8601.
const MAX_MS = 253_402_300_799_999n;
const MIN_MS = -62_135_596_800_000n;

/** Unix nanoseconds → Date; null when zero/absent; "bad" when out of range. */
function nanosToDate(v: unknown): Date | null | "bad" {
  const n = big(v);
  if (n === null || n === 0n) return null;
  const ms = n / 1_000_000n;
  if (ms > MAX_MS || ms < MIN_MS) return "bad";
  return new Date(Number(ms));
}

function hexId(v: unknown): string | null {
  if (v instanceof Uint8Array) return v.length === 0 ? null : Buffer.from(v).toString("hex");
  return null;
}

function idLength(v: unknown): number {
  return v instanceof Uint8Array ? v.length : 0;
}

/** An AnyValue as a plain JSON value (kvlists become null-prototype objects). */
export function anyValue(v: unknown, depth = 0): unknown {
  if (!v || typeof v !== "object" || depth > 32) return null;
  const m = v as Msg;
  const which = m.value;
  switch (which) {
    case "stringValue":
      return cleanText(String(m.stringValue));
    case "boolValue":
      return Boolean(m.boolValue);
    case "intValue": {
      const b = big(m.intValue);
      if (b === null) return null;
      return b <= BigInt(Number.MAX_SAFE_INTEGER) && b >= BigInt(Number.MIN_SAFE_INTEGER)
        ? Number(b)
        : String(b);
    }
    case "doubleValue": {
      const d = Number(m.doubleValue);
      return Number.isFinite(d) ? d : String(d);
    }
    case "bytesValue":
      return m.bytesValue instanceof Uint8Array ? Buffer.from(m.bytesValue).toString("base64") : null;
    case "arrayValue":
      return list(child(m, "arrayValue"), "values").map((x) => anyValue(x, depth + 1));
    case "kvlistValue":
      return attributes(list(child(m, "kvlistValue"), "values"), depth + 1);
    default:
      return null;
  }
}

/** KeyValue list → a null-prototype object (request data never meets a prototype). */
export function attributes(kvs: readonly Msg[], depth = 0): Record<string, unknown> {
  const out = Object.create(null) as Record<string, unknown>;
  for (const kv of kvs) {
    if (typeof kv.key !== "string") continue;
    out[cleanText(kv.key)] = anyValue(kv.value, depth);
  }
  return out;
}

interface ResourceInfo {
  attrs: Record<string, unknown>;
  service: string | null;
  version: string | null;
  instance: string | null;
  host: string | null;
}

function resourceInfo(container: Msg): ResourceInfo {
  const attrs = attributes(list(child(container, "resource"), "attributes"));
  const s = (k: string) => (typeof attrs[k] === "string" ? (attrs[k] as string) : null);
  return {
    attrs,
    service: s("service.name"),
    version: s("service.version"),
    instance: s("service.instance.id"),
    host: s("host.name"),
  };
}

const SEVERITY_NAMES = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"] as const;

/** OTLP severity number (1–24) → its short name (TRACE…FATAL). */
export function severityName(n: number): string | null {
  if (!Number.isInteger(n) || n < 1 || n > 24) return null;
  return SEVERITY_NAMES[Math.floor((n - 1) / 4)] ?? null;
}

function bodyText(v: unknown): string | null {
  if (!v || typeof v !== "object" || !(v as Msg).value) return null;
  const plain = anyValue(v);
  if (typeof plain === "string") return plain;
  return JSON.stringify(plain);
}

class Rejections {
  count = 0;
  reason: string | null = null;
  add(reason: string) {
    this.count++;
    this.reason ??= reason;
  }
}

/** ExportLogsServiceRequest → `logs` rows. */
export function mapLogs(req: Msg, origin: Origin): Mapped<LogRow> {
  const rows: LogRow[] = [];
  const rej = new Rejections();
  for (const rl of list(req, "resourceLogs")) {
    const res = resourceInfo(rl);
    for (const sl of list(rl, "scopeLogs")) {
      const scope = child(sl, "scope");
      for (const lr of list(sl, "logRecords")) {
        const ts = nanosToDate(lr.timeUnixNano);
        const observed = nanosToDate(lr.observedTimeUnixNano);
        if (ts === "bad" || observed === "bad") {
          rej.add("time_unix_nano is outside the supported range (years 1–9999)");
          continue;
        }
        if (![0, 16].includes(idLength(lr.traceId)) || ![0, 8].includes(idLength(lr.spanId))) {
          rej.add("trace_id must be 16 bytes and span_id 8 bytes");
          continue;
        }
        const sevNum = num(lr.severityNumber) ?? 0;
        rows.push({
          timestamp: ts ?? observed ?? origin.now,
          observed_timestamp: observed ?? origin.now,
          trace_id: hexId(lr.traceId),
          span_id: hexId(lr.spanId),
          severity_text: str(lr, "severityText") ?? severityName(sevNum),
          severity_number: sevNum === 0 ? null : sevNum,
          body: bodyText(lr.body),
          event_name: str(lr, "eventName"),
          service_name: res.service,
          service_version: res.version,
          service_instance: res.instance,
          scope_name: str(scope, "name"),
          scope_version: str(scope, "version"),
          attributes: attributes(list(lr, "attributes")),
          resource_attributes: res.attrs,
          host: res.host,
          source: "otlp",
          ingest_identity: origin.identity,
        });
      }
    }
  }
  return { rows, rejected: rej.count, reason: rej.reason };
}

const TEMPORALITY: Record<number, string> = { 1: "delta", 2: "cumulative" };

type PointRow = TelemetryRow<"otel_metric_points">;

function longs(v: unknown): number[] {
  return Array.isArray(v) ? v.map((x) => num(x) ?? 0) : [];
}

function bucketsOf(b: Msg | null): { offset: number; bucket_counts: number[] } {
  return { offset: num(b?.offset) ?? 0, bucket_counts: longs(b?.bucketCounts) };
}

/** One data point's type-specific columns and `details`. */
function pointColumns(type: string, p: Msg): Partial<PointRow> {
  switch (type) {
    case "gauge":
    case "sum":
      return { value: p.value === "asInt" ? num(p.asInt) : num(p.asDouble) };
    case "histogram":
      return {
        count: num(p.count),
        sum: num(p.sum),
        min: num(p.min),
        max: num(p.max),
        bucket_counts: longs(p.bucketCounts),
        explicit_bounds: Array.isArray(p.explicitBounds) ? p.explicitBounds.map((x) => num(x) ?? 0) : [],
      };
    case "exponential_histogram":
      return {
        count: num(p.count),
        sum: num(p.sum),
        min: num(p.min),
        max: num(p.max),
        details: {
          scale: num(p.scale),
          zero_count: num(p.zeroCount),
          zero_threshold: num(p.zeroThreshold),
          positive: bucketsOf(child(p, "positive")),
          negative: bucketsOf(child(p, "negative")),
        },
      };
    case "summary":
      return {
        count: num(p.count),
        sum: num(p.sum),
        details: {
          quantile_values: list(p, "quantileValues").map((q) => ({
            quantile: num(q.quantile),
            value: num(q.value),
          })),
        },
      };
    default:
      return {};
  }
}

const DATA_TYPES: readonly [field: string, type: string][] = [
  ["gauge", "gauge"],
  ["sum", "sum"],
  ["histogram", "histogram"],
  ["exponentialHistogram", "exponential_histogram"],
  ["summary", "summary"],
];

/** ExportMetricsServiceRequest → `otel_metric_points` rows (one per data point). */
export function mapMetrics(req: Msg, origin: Origin): Mapped<PointRow> {
  const rows: PointRow[] = [];
  const rej = new Rejections();
  for (const rm of list(req, "resourceMetrics")) {
    const res = resourceInfo(rm);
    for (const sm of list(rm, "scopeMetrics")) {
      const scope = child(sm, "scope");
      for (const metric of list(sm, "metrics")) {
        const name = str(metric, "name");
        const found = DATA_TYPES.find(([field]) => metric.data === field);
        const data = found ? child(metric, found[0]) : null;
        const points = list(data, "dataPoints");
        if (!name || !found || !data) {
          rej.add(name ? `metric '${name}' has no data` : "a metric has no name");
          continue;
        }
        const type = found[1];
        const temporality = TEMPORALITY[num(data.aggregationTemporality) ?? 0] ?? null;
        for (const p of points) {
          const ts = nanosToDate(p.timeUnixNano);
          const start = nanosToDate(p.startTimeUnixNano);
          if (ts === "bad" || start === "bad") {
            rej.add("time_unix_nano is outside the supported range (years 1–9999)");
            continue;
          }
          const cols = pointColumns(type, p);
          rows.push({
            timestamp: ts ?? origin.now,
            metric_name: name,
            metric_type: type,
            description: str(metric, "description"),
            unit: str(metric, "unit"),
            temporality,
            is_monotonic: type === "sum" ? Boolean(data.isMonotonic) : null,
            service_name: res.service,
            attributes: attributes(list(p, "attributes")),
            resource_attributes: res.attrs,
            ingest_identity: origin.identity,
            ...cols,
            details: {
              ...((cols.details as Record<string, unknown> | undefined) ?? {}),
              start_time: start ?? null,
              flags: num(p.flags) ?? 0,
              scope_name: str(scope, "name"),
              scope_version: str(scope, "version"),
            },
          });
        }
      }
    }
  }
  return { rows, rejected: rej.count, reason: rej.reason };
}

/** ExportTraceServiceRequest → `otel_traces` rows (one per span). */
export function mapSpans(req: Msg, origin: Origin): Mapped<SpanRow> {
  const rows: SpanRow[] = [];
  const rej = new Rejections();
  for (const rs of list(req, "resourceSpans")) {
    const res = resourceInfo(rs);
    for (const ss of list(rs, "scopeSpans")) {
      const scope = child(ss, "scope");
      for (const span of list(ss, "spans")) {
        if (idLength(span.traceId) !== 16 || idLength(span.spanId) !== 8) {
          rej.add("a span needs a 16-byte trace_id and an 8-byte span_id");
          continue;
        }
        if (![0, 8].includes(idLength(span.parentSpanId))) {
          rej.add("parent_span_id must be 8 bytes");
          continue;
        }
        const start = nanosToDate(span.startTimeUnixNano);
        const end = nanosToDate(span.endTimeUnixNano);
        if (start === "bad" || end === "bad") {
          rej.add("span times are outside the supported range (years 1–9999)");
          continue;
        }
        const s = big(span.startTimeUnixNano);
        const e = big(span.endTimeUnixNano);
        const status = child(span, "status");
        rows.push({
          timestamp: start ?? origin.now,
          trace_id: hexId(span.traceId),
          span_id: hexId(span.spanId),
          parent_span_id: hexId(span.parentSpanId),
          name: str(span, "name"),
          kind: num(span.kind) ?? 0,
          start_time_unix_nano: s && s > 0n ? String(s) : null,
          end_time_unix_nano: e && e > 0n ? String(e) : null,
          duration_ms: s && e && e >= s ? Number(e - s) / 1e6 : null,
          service_name: res.service,
          service_version: res.version,
          service_instance: res.instance,
          scope_name: str(scope, "name"),
          scope_version: str(scope, "version"),
          status_code: num(status?.code) ?? 0,
          status_message: str(status, "message"),
          attributes: attributes(list(span, "attributes")),
          resource_attributes: res.attrs,
          events: list(span, "events").map((ev) => ({
            time: nanosToDate(ev.timeUnixNano) === "bad" ? null : nanosToDate(ev.timeUnixNano),
            name: str(ev, "name"),
            attributes: attributes(list(ev, "attributes")),
          })),
          links: list(span, "links").map((l) => ({
            trace_id: hexId(l.traceId),
            span_id: hexId(l.spanId),
            attributes: attributes(list(l, "attributes")),
          })),
          ingest_identity: origin.identity,
        });
      }
    }
  }
  return { rows, rejected: rej.count, reason: rej.reason };
}

/** A span slower than this is flagged `is_slow` in its request metric. */
export const SLOW_SPAN_MS = 1000;
const SPAN_KINDS = ["unspecified", "internal", "server", "client", "producer", "consumer"];

/**
 * Span-derived request metrics (`otel_metrics`, as the reference system keeps them): one row
 * per server/consumer span (the requests a service handled), with the HTTP/gRPC labels of the
 * stable semantic conventions or their older names.
 */
export function spanMetrics(spans: readonly SpanRow[]): TelemetryRow<"otel_metrics">[] {
  const out: TelemetryRow<"otel_metrics">[] = [];
  for (const s of spans) {
    if (s.kind !== 2 && s.kind !== 5) continue;
    const a = (s.attributes ?? {}) as Record<string, unknown>;
    const text = (...keys: string[]) => {
      for (const k of keys) {
        const v = a[k];
        if (typeof v === "string" || typeof v === "number") return String(v);
      }
      return null;
    };
    const ms = typeof s.duration_ms === "number" ? s.duration_ms : null;
    out.push({
      timestamp: s.timestamp,
      trace_id: s.trace_id,
      span_id: s.span_id,
      service_name: s.service_name,
      span_name: s.name,
      span_kind: SPAN_KINDS[Number(s.kind)] ?? null,
      metric_type: "span",
      duration_ms: ms,
      duration_seconds: ms === null ? null : ms / 1000,
      http_method: text("http.request.method", "http.method"),
      http_route: text("http.route"),
      http_status_code: text("http.response.status_code", "http.status_code"),
      grpc_service: text("rpc.service"),
      grpc_method: text("rpc.method"),
      grpc_status_code: text("rpc.grpc.status_code"),
      is_slow: ms !== null && ms >= SLOW_SPAN_MS,
      unit: "ms",
    });
  }
  return out;
}
