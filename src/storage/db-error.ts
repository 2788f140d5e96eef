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
