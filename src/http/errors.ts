import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import {
  AppError,
  AuthenticationRequiredError,
  InvalidRequestError,
  isAppError,
  NotFoundError,
  PayloadTooLargeError,
  ServiceUnavailableError,
  UnsupportedMediaTypeError,
} from "../kernel/errors.ts";
import { DbError, isConnectionLoss, isDiskFull } from "../storage/db-error.ts";

export const JSONAPI_MEDIA_TYPE = "application/vnd.api+json";

export type ErrorStyle = "plain" | "jsonapi" | "query";

/**
 * `/api/v2` speaks JSON:API; `POST /api/query` answers `{"error": "<message>"}` (spec 4.2 and
 * 7.2: its `error` member is the message, with the machine code beside it as `code`);
 * everything else answers `{error: <code>, message}`.
 */
export function errorStyleFor(url: string): ErrorStyle {
  if (url === "/api/v2" || url.startsWith("/api/v2/") || url.startsWith("/api/v2?")) return "jsonapi";
  if (url === "/api/query" || url.startsWith("/api/query?")) return "query";
  return "plain";
}

export function toAppError(err: unknown): AppError | null {
  if (isAppError(err)) return err;
  const e = err as FastifyError & {
    validation?: { instancePath?: string; message?: string }[];
    validationContext?: string;
  };
  switch (e?.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      // Fastify's text names "application/json" even for JSON:API bodies: keep our own wording.
      return new InvalidRequestError("malformed JSON body: the body is not valid JSON", {
        code: "malformed_json",
      });
    case "FST_ERR_BAD_URL":
      return new InvalidRequestError("the URL is not validly percent-encoded UTF-8", { code: "invalid_url" });
    case "FST_ERR_MAX_PARAM_LENGTH":
      return new AppError(414, "uri_too_long", "a path parameter exceeds the length limit", "URI too long");
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new InvalidRequestError("malformed JSON body: the body is empty", { code: "malformed_json" });
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new PayloadTooLargeError("request body exceeds the configured limit");
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new UnsupportedMediaTypeError(e.message);
    case "FST_ERR_VALIDATION": {
      const v = e.validation?.[0];
      const where = `${e.validationContext ?? "request"}${v?.instancePath ?? ""}`;
      return new InvalidRequestError(`${where} ${v?.message ?? "is invalid"}`, {
        source:
          e.validationContext === "querystring"
            ? { parameter: v?.instancePath?.slice(1) || undefined }
            : undefined,
      });
    }
  }
  if (isDiskFull(err)) {
    return new AppError(
      507,
      "storage_full",
      "the database cannot write: the disk holding its data is full. Free space; netmon recovers without a restart",
      "Insufficient storage",
      { headers: { "retry-after": "60" } },
    );
  }
  if (isConnectionLoss(err)) {
    // PostgreSQL restarting or unreachable (issue 19): a retry is the client's move. A write
    // answered this way was not acknowledged; one cut off during its commit may have landed.
    return new ServiceUnavailableError(
      "the database is not reachable right now (restarting or down); retry shortly",
      { code: "database_unavailable", headers: { "retry-after": "5" } },
    );
  }
  if (err instanceof DbError && err.code && (err.code.startsWith("22") || err.code === "54001")) {
    // Data exceptions (value out of range, invalid text, untranslatable character, datetime
    // overflow) and over-deep values come from request data the edge checks let through:
    // the client's to fix, so 400, never 500. The edge checks (input-guard.ts) name the member;
    // this is the backstop.
    return new InvalidRequestError(
      `a value in the request is out of range or not valid for its field (${err.message})`,
      { code: "invalid_value" },
    );
  }
  if (e instanceof SyntaxError && "body" in (e as object)) {
    return new InvalidRequestError(`malformed JSON body: ${e.message}`, { code: "malformed_json" });
  }
  if (typeof e?.statusCode === "number" && e.statusCode >= 400 && e.statusCode < 500) {
    if (e.statusCode === 401) return new AuthenticationRequiredError(e.message);
    if (e.statusCode === 404) return new NotFoundError(e.message);
    if (e.statusCode === 413) return new PayloadTooLargeError(e.message);
    if (e.statusCode === 415) return new UnsupportedMediaTypeError(e.message);
    // Fastify's own codes (FST_ERR_…) are internals: answer the catalogued generic code.
    return new AppError(e.statusCode, "bad_request", e.message, "Bad request");
  }
  return null;
}

export function plainBody(err: AppError): Record<string, unknown> {
  return { error: err.code, message: err.message, ...err.extra };
}

/** Spec 7.2's shape. A 429 keeps the shape spec 7.3 gives every route (`error: "rate_limited"`). */
export function queryBody(err: AppError): Record<string, unknown> {
  if (err.status === 429) return plainBody(err);
  return { ...err.extra, error: err.message, code: err.code };
}

/** The body of an error in a route's style (plain and query styles are JSON). */
export function errorBody(style: ErrorStyle, err: AppError): Record<string, unknown> {
  if (style === "jsonapi") return jsonApiBody(err);
  return style === "query" ? queryBody(err) : plainBody(err);
}

export function jsonApiBody(err: AppError, requestId?: string): Record<string, unknown> {
  const item: Record<string, unknown> = {
    status: String(err.status),
    code: err.code,
    title: err.title,
    detail: err.message,
  };
  if (err.source && Object.keys(err.source).length > 0) item.source = err.source;
  const meta: Record<string, unknown> = { ...err.extra };
  if (requestId) meta.request_id = requestId;
  if (Object.keys(meta).length > 0) item.meta = meta;
  return { errors: [item], jsonapi: { version: "1.1" } };
}

export function sendError(request: FastifyRequest, reply: FastifyReply, err: AppError): FastifyReply {
  for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
  reply.code(err.status);
  const style = errorStyleFor(request.url);
  if (style === "jsonapi") {
    return reply.type(JSONAPI_MEDIA_TYPE).send(jsonApiBody(err));
  }
  return reply.type("application/json; charset=utf-8").send(errorBody(style, err));
}

/** The single error → response mapping. Unknown errors become a 500 carrying only the request id. */
export function errorHandler(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const appError = toAppError(error);
  if (appError) {
    if (appError.status >= 500) request.log.error({ err: error }, "request failed");
    return sendError(request, reply, appError);
  }
  request.log.error({ err: error }, "unhandled error");
  const internal = new AppError(
    500,
    "internal_error",
    `An unexpected error occurred (request id ${request.id})`,
    "Internal server error",
    { extra: { request_id: request.id } },
  );
  return sendError(request, reply, internal);
}

export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const path = request.url.split("?")[0];
  return sendError(
    request,
    reply,
    new NotFoundError(`no route for ${request.method} ${path}`, { code: "not_found" }),
  );
}
