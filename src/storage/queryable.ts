import type { Queryable, QueryResult, Row, Session, Tx } from "./db.ts";
import { type SqlFragment, type SqlQuery, toQuery } from "./sql.ts";

/** Derives `one` and `many` from a single `run` so every backend shares them. */
export abstract class BaseQueryable implements Queryable {
  protected abstract run(q: SqlQuery): Promise<QueryResult>;

  query<T extends Row = Row>(
    q: SqlFragment | SqlQuery | string,
    values?: readonly unknown[],
  ): Promise<QueryResult<T>> {
    return this.run(toQuery(q, values)) as Promise<QueryResult<T>>;
  }

  async one<T extends Row = Row>(
    q: SqlFragment | SqlQuery | string,
    values?: readonly unknown[],
  ): Promise<T | undefined> {
    return (await this.query<T>(q, values)).rows[0];
  }

  async many<T extends Row = Row>(
    q: SqlFragment | SqlQuery | string,
    values?: readonly unknown[],
  ): Promise<T[]> {
    return (await this.query<T>(q, values)).rows;
  }
}

/** Adapts a plain run function (a transaction handle, a locked connection). */
export class FnQueryable extends BaseQueryable {
  constructor(private readonly fn: (q: SqlQuery) => Promise<QueryResult>) {
    super();
  }
  protected run(q: SqlQuery): Promise<QueryResult> {
    return this.fn(q);
  }
}

/** A held connection that can also run multi-statement scripts. */
export class FnSession extends FnQueryable implements Session {
  constructor(
    fn: (q: SqlQuery) => Promise<QueryResult>,
    private readonly scriptFn: (text: string) => Promise<void>,
  ) {
    super(fn);
  }
  script(text: string): Promise<void> {
    return this.scriptFn(text);
  }
}

/** A transaction handle: a run function and the same connection's bulk load. */
export class FnTx extends FnQueryable implements Tx {
  constructor(
    fn: (q: SqlQuery) => Promise<QueryResult>,
    private readonly copyFn: Tx["copyIn"],
  ) {
    super(fn);
  }
  copyIn(table: string, columns: readonly string[], rows: readonly (readonly unknown[])[]): Promise<number> {
    return this.copyFn(table, columns, rows);
  }
}
