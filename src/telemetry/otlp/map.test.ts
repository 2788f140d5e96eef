import { describe, expect, it } from "vitest";
import { IngestGate } from "../ingest-gate.ts";
import { decodeOtlp } from "./decode.ts";
import { attributes, cleanText, mapLogs, mapSpans, severityName } from "./map.ts";
import { requestType } from "./schema.ts";

const origin = { identity: "tester", now: new Date("2026-01-01T00:00:00Z") };
const asRecord = (m: unknown) => m as Record<string, unknown>;

describe("OTLP mapping", () => {
  it("maps severity numbers to their short names (OTLP logs data model)", () => {
    expect([1, 4, 5, 9, 13, 17, 21, 24].map(severityName)).toEqual([
      "TRACE",
      "TRACE",
      "DEBUG",
      "INFO",
      "WARN",
      "ERROR",
      "FATAL",
      "FATAL",
    ]);
    expect(severityName(0)).toBeNull();
    expect(severityName(25)).toBeNull();
  });

  it("keeps attribute keys from request data on a null-prototype object", () => {
    const attrs = attributes([
      { key: "__proto__", value: { value: "stringValue", stringValue: "x" } },
      { key: "constructor", value: { value: "boolValue", boolValue: true } },
    ]);
    expect(Object.getPrototypeOf(attrs)).toBeNull();
    expect(Object.keys(attrs)).toEqual(["__proto__", "constructor"]);
    expect(({} as Record<string, unknown>).x).toBeUndefined();
    expect(JSON.stringify(attrs)).toBe('{"__proto__":"x","constructor":true}');
  });

  it("replaces NUL and lone surrogates PostgreSQL cannot store", () => {
    expect(cleanText("a\u0000b\ud800c")).toBe("a\ufffdb\ufffdc");
    expect(cleanText("ok \ud83d\ude00")).toBe("ok \ud83d\ude00");
  });

  it("decodes protobuf and JSON to the same rows (hex ids in JSON, bytes in protobuf)", () => {
    const json = {
      resourceLogs: [
        {
          resource: { attributes: [{ key: "service.name", value: { stringValue: "svc" } }] },
          scopeLogs: [
            {
              scope: { name: "lib", version: "1" },
              logRecords: [
                {
                  timeUnixNano: "1767225600000000000",
                  severityNumber: 9,
                  body: { kvlistValue: { values: [{ key: "k", value: { intValue: "9007199254740993" } }] } },
                  traceId: "0af7651916cd43dd8448eb211c80319c",
                  spanId: "b7ad6b7169203331",
                  attributes: [{ key: "n", value: { arrayValue: { values: [{ doubleValue: 1.5 }] } } }],
                },
              ],
            },
          ],
        },
      ],
    };
    const fromJson = decodeOtlp("logs", Buffer.from(JSON.stringify(json)), "json");
    const type = requestType("logs");
    const proto = decodeOtlp("logs", Buffer.from(type.encode(fromJson).finish()), "protobuf");
    const a = mapLogs(asRecord(fromJson), origin);
    const b = mapLogs(asRecord(proto), origin);
    expect(a).toEqual(b);
    expect(a.rejected).toBe(0);
    expect(a.rows[0]).toMatchObject({
      timestamp: new Date("2026-01-01T00:00:00Z"),
      severity_text: "INFO",
      severity_number: 9,
      body: '{"k":"9007199254740993"}',
      trace_id: "0af7651916cd43dd8448eb211c80319c",
      span_id: "b7ad6b7169203331",
      service_name: "svc",
      scope_name: "lib",
      scope_version: "1",
      ingest_identity: "tester",
    });
    expect({ ...(a.rows[0]?.attributes as object) }).toEqual({ n: [1.5] });
  });

  it("rejects spans without proper ids and counts them for partial success", () => {
    const req = decodeOtlp(
      "traces",
      Buffer.from(
        JSON.stringify({
          resourceSpans: [
            {
              scopeSpans: [
                {
                  spans: [
                    { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", name: "ok" },
                    { traceId: "", spanId: "b7ad6b7169203331", name: "no trace id" },
                  ],
                },
              ],
            },
          ],
        }),
      ),
      "json",
    );
    const m = mapSpans(asRecord(req), origin);
    expect(m.rows.map((r) => r.name)).toEqual(["ok"]);
    expect(m.rejected).toBe(1);
    expect(m.reason).toContain("16-byte trace_id");
  });
});

describe("OTLP JSON 64-bit integers", () => {
  const logsWith = (record: Record<string, unknown>) =>
    Buffer.from(JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [record] }] }] }));

  it("keeps int64 values exactly, as strings beyond 2^53", () => {
    const m = decodeOtlp(
      "logs",
      logsWith({ timeUnixNano: "1767225600000000000", body: { intValue: "-9223372036854775808" } }),
      "json",
    );
    expect(mapLogs(asRecord(m), origin).rows[0]?.body).toBe("-9223372036854775808");
  });

  it.each([
    ["an intValue beyond int64", { body: { intValue: "99999999999999999999" } }, "intValue"],
    ["a negative fixed64 time", { timeUnixNano: "-1" }, "timeUnixNano"],
    ["a fractional time", { timeUnixNano: 1.5 }, "timeUnixNano"],
    ["a time that is not a number", { observedTimeUnixNano: "soon" }, "observedTimeUnixNano"],
  ])("refuses %s with a 400 naming the member (never wrapped modulo 2^64)", (_what, record, key) => {
    expect(() => decodeOtlp("logs", logsWith(record), "json")).toThrow(
      expect.objectContaining({ status: 400, code: "invalid_otlp", message: expect.stringContaining(key) }),
    );
  });

  it("checks every histogram bucket count", () => {
    const body = {
      resourceMetrics: [
        {
          scopeMetrics: [
            {
              metrics: [
                {
                  name: "h",
                  histogram: {
                    dataPoints: [{ count: "3", bucketCounts: ["1", "2", "18446744073709551616"] }],
                  },
                },
              ],
            },
          ],
        },
      ],
    };
    expect(() => decodeOtlp("metrics", Buffer.from(JSON.stringify(body)), "json")).toThrow(/bucketCounts/);
  });
});

describe("IngestGate", () => {
  it("lets one request through alone, refuses beyond the bound, frees permits when done", async () => {
    const gate = new IngestGate(10);
    expect(gate.tryAcquire(50)).toBe(true); // alone: a request larger than the bound still runs
    expect(gate.tryAcquire(1)).toBe(false);
    gate.release(50);
    expect(gate.tryAcquire(6)).toBe(true);
    await expect(gate.run(5, async () => "x")).rejects.toMatchObject({
      status: 503,
      headers: { "retry-after": "1" },
    });
    expect(await gate.run(4, async () => "y")).toBe("y");
    expect(gate.pending).toBe(6);
    expect(gate.refused).toBe(2);
  });
});
