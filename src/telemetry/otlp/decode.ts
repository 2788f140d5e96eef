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

function invalid(message: string, cause?: unknown): InvalidRequestError {
  return new InvalidRequestError(message, { code: "invalid_otlp", cause });
}

/** Replace hex id strings by bytes, in place, iteratively (a deep body cannot blow the stack). */
function hexIdsToBytes(doc: unknown): void {
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
  hexIdsToBytes(doc);
  try {
    return type.fromObject(doc as Record<string, unknown>);
  } catch (err) {
    throw invalid(`the body is not a valid OTLP ${kind} JSON message: ${(err as Error).message}`, err);
  }
}
