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
