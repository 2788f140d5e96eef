import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { copyLine, copyStatement } from "../copy-text.ts";
import type { Db, DbStats, QueryResult, Session, Tx } from "../db.ts";
import { connectionFailureCode, DbError, noteDbError } from "../db-error.ts";
import { BaseQueryable, FnSession, FnTx } from "../queryable.ts";
import type { SqlQuery } from "../sql.ts";

// Same type parsing as PGlite: int8 as number (counts, ids within 2^53), the rest as pg defaults.
const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === 20) return (v: string) => Number(v);
    if (oid === 1016) {
      // int8[] (histogram bucket counts): pg's own array parser gives strings; numbers here.
      const getParser = pg.types.getTypeParser as (oid: number, format: "text") => (v: string) => unknown;
      const strings = getParser(1016, "text");
      const toNumbers = (a: unknown): unknown =>
        Array.isArray(a) ? a.map(toNumbers) : a === null ? null : Number(a);
      return (v: string) => toNumbers(strings(v));
    }
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

function wrap(err: unknown): DbError {
  const e = err as { message?: string; code?: string; detail?: string; constraint?: string };
  const message = e.message ?? String(err);
  // Socket errors and pool timeouts carry no SQLSTATE: name them 08006 so callers and the
  // HTTP edge see one kind of "the database went away" on both backends.
  const code = connectionFailureCode(e.code, message);
  return noteDbError(new DbError(message, { code, detail: e.detail, constraint: e.constraint }));
}

async function runOn(client: pg.ClientBase | pg.Pool, q: SqlQuery): Promise<QueryResult> {
  try {
    const res: pg.QueryResult | pg.QueryResult[] = await client.query({
      text: q.text,
      values: q.values as unknown[],
      types,
    });
    // A multi-statement script (simple protocol) answers one result per statement.
    const r = Array.isArray(res) ? (res[res.length - 1] ?? { rows: [], rowCount: 0 }) : res;
    return { rows: r.rows ?? [], rowCount: r.rowCount ?? r.rows?.length ?? 0 };
  } catch (err) {
    throw wrap(err);
  }
}

/** COPY … FROM STDIN on one connection; resolves with the rows written. */
async function copyOn(
  client: pg.ClientBase,
  table: string,
  columns: readonly string[],
  rows: readonly (readonly unknown[])[],
): Promise<number> {
  if (rows.length === 0) return 0;
  const stream = client.query(copyFrom(copyStatement(table, columns, "STDIN")));
  // Lines go out in chunks of ~64 KiB: one string per row would cost a write call each, one
  // string for the whole batch would hold it all twice (text and buffer).
  function* chunks(): Generator<string> {
    let chunk = "";
    for (const row of rows) {
      chunk += copyLine(row);
      if (chunk.length >= 65_536) {
        yield chunk;
        chunk = "";
      }
    }
    if (chunk) yield chunk;
  }
  try {
    await pipeline(Readable.from(chunks()), stream);
  } catch (err) {
    throw wrap(err);
  }
  return stream.rowCount;
}

export interface PostgresOptions {
  connectionString: string;
  poolSize?: number;
  /** Schema to put first on the search_path (tests isolate themselves this way). */
  schema?: string;
  applicationName?: string;
}

/** PostgreSQL through a connection pool. */
export class PostgresDb extends BaseQueryable implements Db {
  readonly kind = "postgres" as const;
  readonly pool: pg.Pool;
  readonly #max: number;
  readonly #clientConfig: pg.ClientConfig;
  readonly #listeners = new Set<pg.Client>();

  private constructor(opts: PostgresOptions) {
    super();
    this.#max = opts.poolSize ?? 10;
    this.#clientConfig = {
      connectionString: opts.connectionString,
      application_name: opts.applicationName ?? "netmon",
      connectionTimeoutMillis: 10_000,
      options: opts.schema ? `-c search_path=${opts.schema},public` : undefined,
    };
    this.pool = new pg.Pool({ ...this.#clientConfig, max: opts.poolSize ?? 10 });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    this.pool.on("error", () => {});
  }

  static async open(opts: PostgresOptions): Promise<PostgresDb> {
    const db = new PostgresDb(opts);
    try {
      await db.ping();
    } catch (err) {
      await db.pool.end().catch(() => {});
      throw err;
    }
    return db;
  }

  protected run(q: SqlQuery): Promise<QueryResult> {
    return runOn(this.pool, q);
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const { client, release } = await this.checkout();
    try {
      await runOn(client, { text: "BEGIN", values: [] });
      const result = await fn(
        new FnTx(
          (q) => runOn(client, q),
          (table, columns, rows) => copyOn(client, table, columns, rows),
        ),
      );
      await runOn(client, { text: "COMMIT", values: [] });
      return result;
    } catch (err) {
      await runOn(client, { text: "ROLLBACK", values: [] }).catch(() => {});
      throw err;
    } finally {
      release();
    }
  }

  async copyIn(
    table: string,
    columns: readonly string[],
    rows: readonly (readonly unknown[])[],
  ): Promise<number> {
    const { client, release } = await this.checkout();
    try {
      return await copyOn(client, table, columns, rows);
    } finally {
      release();
    }
  }

  async withAdvisoryLock<T>(key: bigint, fn: (conn: Session) => Promise<T>): Promise<T> {
    const { client, release } = await this.checkout();
    try {
      await runOn(client, { text: "SELECT pg_advisory_lock($1)", values: [key.toString()] });
      try {
        return await fn(
          new FnSession(
            (q) => runOn(client, q),
            async (text) => {
              // No parameters: pg uses the simple protocol, which accepts several statements.
              await runOn(client, { text, values: [] });
            },
          ),
        );
      } finally {
        await runOn(client, { text: "SELECT pg_advisory_unlock($1)", values: [key.toString()] }).catch(
          () => {},
        );
      }
    } finally {
      release();
    }
  }

  async tryAdvisoryLock(key: bigint, onLost?: (err: Error) => void): Promise<(() => Promise<void>) | null> {
    let held = false;
    const { client, release } = await this.checkout((err) => {
      // The session holding the lock is gone (PostgreSQL restarted, the connection dropped):
      // so is the lock. Give the dead connection back (destroyed) and tell the holder, so it
      // stops acting as the leader.
      if (!held) return;
      held = false;
      release();
      onLost?.(err);
    });
    try {
      const r = await runOn(client, {
        text: "SELECT pg_try_advisory_lock($1) AS ok",
        values: [key.toString()],
      });
      if (r.rows[0]?.ok !== true) {
        release();
        return null;
      }
    } catch (err) {
      release();
      throw err;
    }
    held = true;
    let released = false;
    return async () => {
      if (released) return;
      released = true;
      held = false;
      await runOn(client, { text: "SELECT pg_advisory_unlock($1)", values: [key.toString()] }).catch(
        () => {},
      );
      release();
    };
  }

  /**
   * A pooled connection for exclusive use. While it is checked out, the pool's own error
   * listener is off: without ours, a connection dying under a held client (a PostgreSQL
   * restart) would be an unhandled 'error' event and crash the process. A broken connection
   * is destroyed on release instead of going back to the pool.
   */
  private async checkout(
    onError?: (err: Error) => void,
  ): Promise<{ client: pg.PoolClient; release: () => void }> {
    const client = await this.connect();
    let broken: Error | undefined;
    const listener = (err: Error) => {
      broken = err;
      onError?.(err);
    };
    client.on("error", listener);
    let done = false;
    return {
      client,
      release: () => {
        if (done) return;
        done = true;
        client.off("error", listener);
        client.release(broken ?? false);
      },
    };
  }

  private async connect(): Promise<pg.PoolClient> {
    try {
      return await this.pool.connect();
    } catch (err) {
      throw wrap(err);
    }
  }

  async listen(
    channel: string,
    onNotify: (payload: string) => void,
    onLost?: (err: Error) => void,
  ): Promise<() => Promise<void>> {
    if (this.closed) throw new DbError("database is closed", { code: "08003" });
    // Its own connection (not the pool's): it must stay open and LISTENing, and keepalive
    // notices a peer that vanished without closing the socket.
    const client = new pg.Client({
      ...this.#clientConfig,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    let stopped = false;
    let lost = false;
    const lose = (err: Error) => {
      if (lost || stopped) return;
      lost = true;
      this.#listeners.delete(client);
      client.end().catch(() => {});
      if (!this.closed) onLost?.(err);
    };
    client.on("error", (err) => lose(err));
    client.on("end", () => lose(new Error("listen connection closed")));
    client.on("notification", (msg) => {
      if (msg.channel === channel) onNotify(msg.payload ?? "");
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${channel.replace(/"/g, '""')}"`);
    } catch (err) {
      stopped = true;
      await client.end().catch(() => {});
      throw wrap(err);
    }
    this.#listeners.add(client);
    return async () => {
      if (stopped) return;
      stopped = true;
      this.#listeners.delete(client);
      await client.end().catch(() => {});
    };
  }

  async ping(): Promise<void> {
    await this.query("SELECT 1");
  }

  stats(): DbStats {
    return {
      total: this.pool.totalCount,
      idle: this.pool.idleCount,
      waiting: this.pool.waitingCount,
      max: this.#max,
    };
  }

  private closed = false;

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.#listeners) await c.end().catch(() => {});
    this.#listeners.clear();
    await this.pool.end();
  }
}
