import type { SqlFragment, SqlQuery } from "./sql.ts";

export type Row = Record<string, unknown>;

export interface QueryResult<T extends Row = Row> {
  rows: T[];
  rowCount: number;
}

/** Anything that runs queries: the database itself or an open transaction. */
export interface Queryable {
  query<T extends Row = Row>(
    q: SqlFragment | SqlQuery | string,
    values?: readonly unknown[],
  ): Promise<QueryResult<T>>;
  /** First row or undefined. */
  one<T extends Row = Row>(
    q: SqlFragment | SqlQuery | string,
    values?: readonly unknown[],
  ): Promise<T | undefined>;
  many<T extends Row = Row>(q: SqlFragment | SqlQuery | string, values?: readonly unknown[]): Promise<T[]>;
}

/**
 * Bulk load in PostgreSQL's COPY text format (`copy-text.ts`): rows are arrays of values in
 * column order, written in one COPY. Both backends have it; a failure leaves nothing of the
 * rows written (inside a transaction, the transaction is then aborted like any failed statement).
 */
export interface BulkLoad {
  copyIn(table: string, columns: readonly string[], rows: readonly (readonly unknown[])[]): Promise<number>;
}

/** An open transaction: statements, and bulk loads on the same connection. */
export interface Tx extends Queryable, BulkLoad {}

export function canBulkLoad(q: Queryable): q is Queryable & BulkLoad {
  return typeof (q as Partial<BulkLoad>).copyIn === "function";
}

/** A single held connection that can also run multi-statement scripts (migrations). */
export interface Session extends Queryable {
  script(text: string): Promise<void>;
}

export type DbKind = "pglite" | "postgres";

/**
 * Connection use at this instant, for self-metrics. PostgreSQL: the pool's connections
 * (`total`, `idle`) and callers waiting for one (`waiting`). PGlite: one connection;
 * `waiting` is the statements and transactions queued behind the one running.
 */
export interface DbStats {
  total: number;
  idle: number;
  waiting: number;
  max: number;
}

/**
 * The one storage interface. Both backends run the same SQL (the common subset of
 * PostgreSQL 15 and 18) with the same type parsing:
 * int8 → number, numeric → string, timestamptz → Date, json/jsonb → parsed value, arrays → arrays.
 */
export interface Db extends Queryable, BulkLoad {
  readonly kind: DbKind;
  /** Run `fn` in a transaction; commits when it resolves, rolls back when it throws. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Hold a session-level advisory lock for the duration of `fn`, on one connection.
   * Used by migrations and leader-only jobs.
   */
  withAdvisoryLock<T>(key: bigint, fn: (conn: Session) => Promise<T>): Promise<T>;
  /**
   * Try to take a session-level advisory lock without waiting; returns a release function
   * or null when another session holds it. The lock lives as long as the connection is held:
   * `onLost` is called if that connection dies (a PostgreSQL restart), after which the
   * holder is no longer the leader and should try again.
   */
  tryAdvisoryLock(key: bigint, onLost?: (err: Error) => void): Promise<(() => Promise<void>) | null>;
  /**
   * LISTEN on `channel`: `onNotify` gets each notification's payload. PostgreSQL: on a
   * dedicated connection (not the pool's); `onLost` is called once when it dies, after which
   * nothing more is delivered (listen again to resume). PGlite: the one connection; a
   * notification raised by a statement is delivered before that statement's result.
   * Resolves once listening, with a function that stops.
   */
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onLost?: (err: Error) => void,
  ): Promise<() => Promise<void>>;
  ping(): Promise<void>;
  /** Connection use now (self-metrics). */
  stats(): DbStats;
  close(): Promise<void>;
}

export class DatabaseLockedError extends Error {
  constructor(dir: string) {
    super(
      `the data directory ${dir} is in use by another netmon process (is the server running?). ` +
        "Stop it first, or set DATABASE_URL to use PostgreSQL, which allows concurrent access.",
    );
    this.name = "DatabaseLockedError";
  }
}
