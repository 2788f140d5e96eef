/**
 * Typed application errors. Domain code throws these; the HTTP edge maps them to a
 * response exactly once (src/http/errors.ts), in the shape of the route's API style.
 */
import type { ErrorCode } from "./error-codes.ts";

export type { ErrorCode };

export interface ErrorSource {
  /** Query parameter that caused the error (JSON:API `source.parameter`). */
  parameter?: string;
  /** JSON pointer into the request document (JSON:API `source.pointer`). */
  pointer?: string;
  /** Header that caused the error (JSON:API `source.header`). */
  header?: string;
}

export interface AppErrorOptions {
  source?: ErrorSource;
  /** Extra members merged into plain `/api` error bodies (e.g. `retry_after`, `uids`). */
  extra?: Record<string, unknown>;
  /** Extra response headers (e.g. `retry-after`). */
  headers?: Record<string, string>;
  cause?: unknown;
}

export class AppError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly title: string;
  readonly source: ErrorSource | undefined;
  readonly extra: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(status: number, code: ErrorCode, message: string, title: string, opts: AppErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.title = title;
    this.source = opts.source;
    this.extra = opts.extra ?? {};
    this.headers = opts.headers ?? {};
  }
}

export class InvalidRequestError extends AppError {
  constructor(message: string, opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(400, opts.code ?? "invalid_request", message, "Invalid request", opts);
  }
}

export class ValidationError extends AppError {
  constructor(message: string, opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(422, opts.code ?? "validation_error", message, "Validation error", opts);
  }
}

export class AuthenticationRequiredError extends AppError {
  constructor(message = "Authentication required", opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(401, opts.code ?? "authentication_required", message, "Unauthorized", opts);
  }
}

export class ForbiddenError extends AppError {
  constructor(
    message = "You do not have permission to perform this action",
    opts: AppErrorOptions & { code?: ErrorCode } = {},
  ) {
    super(403, opts.code ?? "forbidden", message, "Forbidden", opts);
  }
}

export class NotFoundError extends AppError {
  constructor(message = "Not found", opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(404, opts.code ?? "not_found", message, "Not found", opts);
  }
}

export class ConflictError extends AppError {
  constructor(message: string, opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(409, opts.code ?? "conflict", message, "Conflict", opts);
  }
}

export class GoneError extends AppError {
  constructor(message: string, opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(410, opts.code ?? "gone", message, "Gone", opts);
  }
}

export class PayloadTooLargeError extends AppError {
  constructor(message = "Request body is too large", opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(413, opts.code ?? "payload_too_large", message, "Payload too large", opts);
  }
}

export class UnsupportedMediaTypeError extends AppError {
  constructor(message: string, opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(415, opts.code ?? "unsupported_media_type", message, "Unsupported media type", opts);
  }
}

export class NotAcceptableError extends AppError {
  constructor(message: string, opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(406, opts.code ?? "not_acceptable", message, "Not acceptable", opts);
  }
}

export class RateLimitedError extends AppError {
  constructor(retryAfterSeconds: number, opts: AppErrorOptions = {}) {
    super(429, "rate_limited", "Too many requests", "Too many requests", {
      ...opts,
      extra: { retry_after: retryAfterSeconds, ...opts.extra },
      headers: { "retry-after": String(retryAfterSeconds), ...opts.headers },
    });
  }
}

export class ServiceUnavailableError extends AppError {
  constructor(message: string, opts: AppErrorOptions & { code?: ErrorCode } = {}) {
    super(503, opts.code ?? "service_unavailable", message, "Service unavailable", opts);
  }
}

/** A state-machine operation attempted from a state that does not allow it (400, as the original). */
export class InvalidTransitionError extends AppError {
  constructor(operation: string, currentState: string, opts: AppErrorOptions = {}) {
    super(
      400,
      "invalid_transition",
      `cannot ${operation} from state '${currentState}'`,
      "Invalid state transition",
      { ...opts, extra: { operation, current_state: currentState, ...opts.extra } },
    );
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}
