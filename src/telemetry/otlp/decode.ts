import type protobuf from "protobufjs";
import sjson from "secure-json-parse";
import { InvalidRequestError } from "../../kernel/errors.ts";
import { requestType, type SignalKind } from "./schema.ts";

/**
 * Decode an OTLP export request, protobuf or JSON (OTLP/HTTP "JSON Protobuf Encoding"), into
 * the protobufjs message of the official definition. JSON differs from the canonical proto3
 * mapping in one way the spec names: trace and span ids are hex, not base64; they are turned
 * into bytes before `fromObject`. Anything malformed is a 400 (`invalid_otlp`), never a 500.
 */
export type OtlpFormat = "protobuf" | "json";

/** JSON members holding trace/span ids (OTLP spec: hex-encoded in JSON). */
const ID_KEYS = new Set(["traceId", "spanId", "parentSpanId"]);
const MAX_JSON_DEPTH = 64;
const HEX = /^(?:[0-9a-fA-F]{2})*$/;
/**
 * JSON members of 64-bit integer types (OTLP proto: int64/sfixed64 signed, fixed64 unsigned).
 * protobufjs's `fromObject` reduces an out-of-range value modulo 2^64 without a word, so a
 * value of 10^20 would be stored as some other number: they are range-checked here instead.
 */
const INT64_KEYS: ReadonlyMap<string, "signed" | "unsigned"> = new Map([
  ["intValue", "signed"],
  ["asInt", "signed"],
  ["timeUnixNano", "unsigned"],
  ["startTimeUnixNano", "unsigned"],
  ["endTimeUnixNano", "unsigned"],
  ["observedTimeUnixNano", "unsigned"],
  ["count", "unsigned"],
  ["zeroCount", "unsigned"],
  ["bucketCounts", "unsigned"],
]);
const INT_TEXT = /^-?\d{1,20}$/;
const RANGE = {
  signed: [-(2n ** 63n), 2n ** 63n - 1n],
  unsigned: [0n, 2n ** 64n - 1n],
} as const;

/** Throw unless `v` (a JSON number or string) is an integer within the key's 64-bit range. */
function checkInt64(key: string, v: unknown, kind: "signed" | "unsigned"): void {
  if (Array.isArray(v)) {
    for (const x of v) checkInt64(key, x, kind);
    return;
  }
  if (v === null || v === undefined) return;
  let n: bigint | null = null;
  if (typeof v === "number" && Number.isInteger(v)) n = BigInt(v);
  else if (typeof v === "string" && INT_TEXT.test(v)) n = BigInt(v);
  const [min, max] = RANGE[kind];
  if (n === null || n < min || n > max) {
    const shown = typeof v === "string" ? `'${v.slice(0, 40)}'` : String(v).slice(0, 40);
    throw invalid(`${key} must be a ${kind} 64-bit integer (a JSON number or decimal string), got ${shown}`);
  }
}

function invalid(message: string, cause?: unknown): InvalidRequestError {
  return new InvalidRequestError(message, { code: "invalid_otlp", cause });
}

/**
 * Replace hex id strings by bytes and range-check 64-bit integers, in place, iteratively (a
 * deep body cannot blow the stack).
 */
function normaliseJson(doc: unknown): void {
  const stack: { value: unknown; depth: number }[] = [{ value: doc, depth: 0 }];
  while (stack.length > 0) {
    const { value, depth } = stack.pop() as { value: unknown; depth: number };
    if (value === null || typeof value !== "object") continue;
    if (depth > MAX_JSON_DEPTH)
      throw invalid(`the OTLP JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`);
    if (Array.isArray(value)) {
      for (const v of value) stack.push({ value: v, depth: depth + 1 });
      continue;
    }
    const obj = value as Record<string, unknown>;
    for (const key of Object.keys(obj)) {
      const v = obj[key];
      const intKind = INT64_KEYS.get(key);
      if (intKind) checkInt64(key, v, intKind);
      if (ID_KEYS.has(key) && typeof v === "string") {
        if (!HEX.test(v)) throw invalid(`${key} must be hex-encoded (OTLP JSON), got '${v.slice(0, 40)}'`);
        obj[key] = Buffer.from(v, "hex");
      } else if (v !== null && typeof v === "object") {
        stack.push({ value: v, depth: depth + 1 });
      }
    }
  }
}

/** Decode a request body of the given signal. Throws InvalidRequestError on malformed input. */
export function decodeOtlp(kind: SignalKind, body: Buffer, format: OtlpFormat): protobuf.Message {
  const type = requestType(kind);
  if (format === "protobuf") {
    try {
      return type.decode(body);
    } catch (err) {
      throw invalid(`the body is not a valid OTLP ${kind} protobuf message: ${(err as Error).message}`, err);
    }
  }
  let doc: unknown;
  try {
    doc = sjson.parse(body.toString("utf8"), undefined, { protoAction: "error", constructorAction: "error" });
  } catch (err) {
    throw invalid(`the body is not valid JSON: ${(err as Error).message}`, err);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    throw invalid(`an OTLP ${kind} JSON body must be an object`);
  }
  normaliseJson(doc);
  try {
    return type.fromObject(doc as Record<string, unknown>);
  } catch (err) {
    throw invalid(`the body is not a valid OTLP ${kind} JSON message: ${(err as Error).message}`, err);
  }
}
