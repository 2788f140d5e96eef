import { promisify } from "node:util";
import zlib from "node:zlib";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { plainBody, toAppError } from "../../http/errors.ts";
import type { AppContext } from "../../kernel/context.ts";
import {
  AppError,
  InvalidRequestError,
  PayloadTooLargeError,
  UnsupportedMediaTypeError,
} from "../../kernel/errors.ts";
import type { Intake } from "../sink.ts";
import { decodeOtlp, type OtlpFormat } from "./decode.ts";
import { storeOtlp } from "./ingest.ts";
import { responseType, type SignalKind, STATUS_TYPE } from "./schema.ts";

/**
 * OTLP/HTTP receivers (OTLP specification 1.x, "OTLP/HTTP"): POST /v1/logs, /v1/metrics and
 * /v1/traces with `application/x-protobuf` or `application/json` bodies, optionally gzip- or
 * deflate-encoded. Requires the `telemetry.ingest` permission (bearer token or X-API-Key) and
 * draws from the per-credential `ingest` budget. Answers:
 *
 * - 200 with Export*ServiceResponse in the request's encoding; `partial_success` set when some
 *   records were rejected (count and first reason), unset when all were stored;
 * - 4xx / 5xx with a google.rpc.Status body — protobuf for protobuf requests, JSON otherwise
 *   (the JSON also carries netmon's `error` code, so it is the documented plain shape too);
 * - 429 / 503 with Retry-After for back-pressure (budget, capacity, storage down): retryable.
 */
export const OTLP_PATHS: Record<SignalKind, string> = {
  logs: "/v1/logs",
  metrics: "/v1/metrics",
  traces: "/v1/traces",
};

const PROTOBUF_TYPES = new Set(["application/x-protobuf", "application/protobuf"]);
const RAW = new WeakMap<FastifyRequest, Buffer>();
const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);

/** gRPC status code of an HTTP status (OTLP/HTTP Status.code carries these). */
export function grpcCodeForStatus(status: number): number {
  if (status === 400 || status === 413 || status === 415) return 3; // INVALID_ARGUMENT
  if (status === 401) return 16; // UNAUTHENTICATED
  if (status === 403) return 7; // PERMISSION_DENIED
  if (status === 404 || status === 405) return 12; // UNIMPLEMENTED
  if (status === 429) return 8; // RESOURCE_EXHAUSTED
  if (status === 503) return 14; // UNAVAILABLE
  return 13; // INTERNAL
}

function formatOf(request: FastifyRequest): OtlpFormat | null {
  const ct = String(request.headers["content-type"] ?? "")
    .split(";")[0]
    ?.trim()
    .toLowerCase();
  if (ct && PROTOBUF_TYPES.has(ct)) return "protobuf";
  if (ct === "application/json") return "json";
  return null;
}

/** Read the raw body up to `limit` bytes (the stream is not consumed further past it). */
function readBody(payload: NodeJS.ReadableStream, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    payload.on("data", (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        done = true;
        reject(
          new PayloadTooLargeError(`the OTLP request is larger than ${limit} bytes`, {
            code: "body_too_large",
          }),
        );
        return;
      }
      chunks.push(chunk);
    });
    payload.on("end", () => {
      if (!done) resolve(Buffer.concat(chunks));
      done = true;
    });
    payload.on("error", (err) => {
      if (!done) reject(new InvalidRequestError("the request body could not be read", { cause: err }));
      done = true;
    });
    // A client that goes away mid-body: settle, so nothing waits on a stream that never ends.
    payload.on("close", () => {
      if (!done) reject(new InvalidRequestError("the request body was cut off", { code: "body_incomplete" }));
      done = true;
    });
  });
}

async function decompress(body: Buffer, encoding: string, limit: number): Promise<Buffer> {
  const tooLarge = () =>
    new PayloadTooLargeError(`the OTLP request is larger than ${limit} bytes once decompressed`, {
      code: "body_too_large",
    });
  const opts = { maxOutputLength: limit };
  try {
    if (encoding === "gzip") return await gunzip(body, opts);
    if (encoding === "deflate") return await inflate(body, opts);
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw tooLarge();
    throw new InvalidRequestError(`the body is not valid ${encoding} data`, {
      code: "invalid_encoding",
      cause: err,
    });
  }
  return body;
}

function sendStatus(request: FastifyRequest, reply: FastifyReply, err: AppError): FastifyReply {
  reply.code(err.status);
  for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
  const code = grpcCodeForStatus(err.status);
  if (formatOf(request) === "protobuf") {
    const bytes = STATUS_TYPE.encode(STATUS_TYPE.fromObject({ code, message: err.message })).finish();
    return reply.type("application/x-protobuf").send(Buffer.from(bytes));
  }
  return reply.type("application/json").send({ ...plainBody(err), code, message: err.message, details: [] });
}

/** The one error mapping of the OTLP routes: AppErrors keep their status, others are 500. */
function otlpErrorHandler(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const appError = toAppError(error);
  if (appError) {
    if (appError.status >= 500) request.log.error({ err: error }, "OTLP request failed");
    return sendStatus(request, reply, appError);
  }
  request.log.error({ err: error }, "unhandled OTLP error");
  return sendStatus(
    request,
    reply,
    new AppError(
      500,
      "internal_error",
      `An unexpected error occurred (request id ${request.id})`,
      "Internal server error",
    ),
  );
}

function responseBody(
  kind: SignalKind,
  rejected: number,
  errorMessage: string,
  format: OtlpFormat,
): Buffer | object {
  const field =
    kind === "logs" ? "rejectedLogRecords" : kind === "metrics" ? "rejectedDataPoints" : "rejectedSpans";
  const plain = rejected > 0 ? { partialSuccess: { [field]: rejected, errorMessage } } : {};
  if (format === "json") return plain;
  const type = responseType(kind);
  return Buffer.from(type.encode(type.fromObject(plain)).finish());
}

/** Register the three OTLP/HTTP routes (in their own scope: own body parser and error mapping). */
export async function otlpHttpRoutes(app: FastifyInstance, ctx: AppContext, intake: Intake): Promise<void> {
  const limit = ctx.config.ingest.otlpBodyLimit;
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // Every media type reaches the handler as raw bytes (kept aside, so the generic input guard
    // does not walk a Buffer); the handler decides protobuf / JSON / 415.
    scope.addContentTypeParser("*", (request, payload, done) => {
      const declared = Number(request.headers["content-length"]);
      if (Number.isFinite(declared) && declared > limit) {
        // Refused before reading a byte.
        done(
          new PayloadTooLargeError(`the OTLP request is larger than ${limit} bytes`, {
            code: "body_too_large",
          }),
          undefined,
        );
        return;
      }
      readBody(payload, limit).then(
        (buf) => {
          RAW.set(request, buf);
          done(null, undefined);
        },
        (err: Error) => done(err, undefined),
      );
    });
    scope.setErrorHandler(otlpErrorHandler);
    for (const kind of ["logs", "metrics", "traces"] as const) {
      scope.post(
        OTLP_PATHS[kind],
        {
          config: { access: { permission: "telemetry.ingest" }, rateLimit: "ingest", body: "validated" },
        },
        async (request, reply) => {
          const format = formatOf(request);
          if (!format) {
            throw new UnsupportedMediaTypeError(
              "OTLP/HTTP bodies must be application/x-protobuf or application/json",
              { code: "unsupported_media_type" },
            );
          }
          const encoding = String(request.headers["content-encoding"] ?? "identity")
            .trim()
            .toLowerCase();
          if (!["identity", "gzip", "deflate"].includes(encoding)) {
            throw new UnsupportedMediaTypeError(
              `content-encoding '${encoding.slice(0, 40)}' is not supported (gzip, deflate)`,
              {
                code: "unsupported_encoding",
              },
            );
          }
          const raw = await decompress(RAW.get(request) ?? Buffer.alloc(0), encoding, limit);
          const message = decodeOtlp(kind, raw, format);
          const actor = request.actor;
          const result = await storeOtlp(ctx, intake, kind, message, actor?.email ?? actor?.id ?? "unknown");
          const body = responseBody(kind, result.rejected, result.errorMessage, format);
          return reply
            .code(200)
            .type(format === "json" ? "application/json" : "application/x-protobuf")
            .send(body);
        },
      );
    }
  });
}
