import { ConflictError, type ErrorCode, ValidationError } from "../kernel/errors.ts";

/** A database error carrying PostgreSQL's SQLSTATE, identical for both backends. */
export class DbError extends Error {
  readonly code: string | undefined;
  readonly detail: string | undefined;
  readonly constraint: string | undefined;

  constructor(message: string, fields: { code?: string; detail?: string; constraint?: string } = {}) {
    super(message);
    this.name = "DbError";
    this.code = fields.code;
    this.detail = fields.detail;
    this.constraint = fields.constraint;
  }
}

export const SQLSTATE = {
  uniqueViolation: "23505",
  foreignKeyViolation: "23503",
  checkViolation: "23514",
  notNullViolation: "23502",
  invalidTextRepresentation: "22P02",
  serializationFailure: "40001",
  deadlockDetected: "40P01",
} as const;

/**
 * The database is unreachable or went away: SQLSTATE class 08 (connection exceptions) and
 * 57P01–57P03 (the server is shutting down, crashed or starting). A restart of PostgreSQL
 * produces these; the HTTP edge answers them with 503 and Retry-After (issue 19), and the
 * pool reconnects by itself once the server is back.
 */
export function isConnectionLoss(err: unknown): boolean {
  if (!(err instanceof DbError) || !err.code) return false;
  return err.code.startsWith("08") || err.code === "57P01" || err.code === "57P02" || err.code === "57P03";
}

/** Driver-level failures without a SQLSTATE (socket errors, pool timeouts), as SQLSTATE 08006. */
const CONNECTION_FAILURE =
  /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN)$|Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|the database system is (starting up|shutting down)/i;

export function connectionFailureCode(code: string | undefined, message: string): string | undefined {
  if (code && /^[0-9A-Z]{5}$/.test(code)) return code;
  if ((code && CONNECTION_FAILURE.test(code)) || CONNECTION_FAILURE.test(message)) return "08006";
  return code;
}

/**
 * The one translation of constraint violations into the errors an API answers (issue 11):
 * unique → 409 (with the caller's message and code, e.g. "a user with this email already
 * exists", `email_taken`), foreign key → 422 `invalid_reference`, check and not-null → 422.
 * Anything else is returned unchanged. Use as `catch (err) { throw asDomainError(err, …) }`.
 */
export function asDomainError(err: unknown, unique: { message?: string; code?: ErrorCode } = {}): unknown {
  if (!(err instanceof DbError)) return err;
  switch (err.code) {
    case SQLSTATE.uniqueViolation:
      return new ConflictError(unique.message ?? "a resource with the same key already exists", {
        code: unique.code ?? "conflict",
        cause: err,
      });
    case SQLSTATE.foreignKeyViolation:
      return new ValidationError("a referenced resource does not exist", {
        code: "invalid_reference",
        cause: err,
      });
    case SQLSTATE.checkViolation:
      return new ValidationError(`value out of range (${err.constraint ?? "check"})`, { cause: err });
    case SQLSTATE.notNullViolation:
      return new ValidationError("a required value is missing", { cause: err });
    default:
      return err;
  }
}

export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  return (
    err instanceof DbError &&
    err.code === SQLSTATE.uniqueViolation &&
    (constraint === undefined || err.constraint === constraint)
  );
}

/** SQLSTATE 53100 (PostgreSQL) and the file-system codes PGlite reports when the disk is full. */
export const DISK_FULL_CODES: ReadonlySet<string> = new Set(["53100", "ENOSPC", "EDQUOT"]);

let diskFullAt = 0;

/** Both clients call this for every error, so /health can say the storage is full. */
export function noteDbError(err: DbError): DbError {
  if (err.code && DISK_FULL_CODES.has(err.code)) diskFullAt = Date.now();
  return err;
}

/** Whether a write failed for lack of space within `windowMs` (cleared by time, not restart). */
export function storageFullRecently(windowMs = 30_000): boolean {
  return diskFullAt !== 0 && Date.now() - diskFullAt < windowMs;
}

export function isDiskFull(err: unknown): boolean {
  return err instanceof DbError && err.code !== undefined && DISK_FULL_CODES.has(err.code);
}
