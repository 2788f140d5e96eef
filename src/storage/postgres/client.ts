import { createHash } from "node:crypto";
import pg from "pg";
import type { Db, ListenHandlers, QueryResult, Session, Tx } from "../db.ts";
import { DbError } from "../db-error.ts";
import { BaseQueryable, FnQueryable, FnSession } from "../queryable.ts";
import type { SqlQuery } from "../sql.ts";

// Same type parsing as PGlite: int8 as number (counts, ids within 2^53), the rest as pg defaults.
const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === 20) return (v: string) => Number(v);
    if (oid === 1016) return (v: string) => pg.types.arrayParser(v, Number);
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

function wrap(err: unknown): DbError {
  const e = err as { message?: string; code?: string; detail?: string; constraint?: string };
  return new DbError(e.message ?? String(err), { code: e.code, detail: e.detail, constraint: e.constraint });
}

/**
 * Server-side prepared statements for hot, fixed-shape queries. A parameterised text seen
 * `PREPARE_AFTER` times is sent as a named statement (name = hash of the text), so each
 * connection parses and plans it once and PostgreSQL can reuse a generic plan; node-postgres
 * then skips the Parse step on that connection. Bounded: at most `perConnection` statements
 * per connection (later texts run unnamed there), at most `MAX_TRACKED` texts counted, texts
 * longer than `MAX_TEXT` never prepared. Texts without parameters (BEGIN, scripts) stay on the
 * simple protocol.
 */
const PREPARE_AFTER = 2;
const MAX_TRACKED = 2000;
const MAX_TEXT = 8192;

export class StatementNames {
  private readonly seen = new Map<string, { uses: number; name: string | null }>();
  private readonly onConnection = new WeakMap<pg.ClientBase, Set<string>>();

  constructor(readonly perConnection: number) {}

  /** The statement name to use for `text` on `client`, or undefined to run it unnamed. */
  nameFor(client: pg.ClientBase, text: string, parameters: number): string | undefined {
    if (this.perConnection <= 0 || parameters === 0 || text.length > MAX_TEXT) return undefined;
    let entry = this.seen.get(text);
    if (!entry) {
      if (this.seen.size >= MAX_TRACKED) {
        // Forget the oldest counted text (Map keeps insertion order).
        const oldest = this.seen.keys().next().value;
        if (oldest !== undefined) this.seen.delete(oldest);
      }
      entry = { uses: 0, name: null };
      this.seen.set(text, entry);
    }
    entry.uses++;
    if (entry.uses < PREPARE_AFTER) return undefined;
    entry.name ??= `netmon_${createHash("sha1").update(text).digest("hex").slice(0, 32)}`;
    let names = this.onConnection.get(client);
    if (!names) {
      names = new Set();
      this.onConnection.set(client, names);
    }
    if (names.has(entry.name)) return entry.name;
    if (names.size >= this.perConnection) return undefined;
    names.add(entry.name);
    return entry.name;
  }
}

/**
 * A named statement the server no longer accepts on this connection: its result type changed
 * under it (a migration altered a table read with `*`), it was deallocated behind our back
 * (DISCARD ALL by a pooler: 26000), or a transaction-mode pooler handed us a server connection
 * that already has it (42P05). The connection is dropped; outside a transaction the query is
 * retried once unnamed on another connection.
 */
function isStaleStatement(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return (
    e.code === "26000" ||
    e.code === "42P05" ||
    (e.code === "0A000" && typeof e.message === "string" && e.message.includes("cached plan"))
  );
}

/** Connections that must not go back to the pool (stale statement, connection error). */
const broken = new WeakSet<pg.ClientBase>();

async function runOn(
  client: pg.ClientBase | pg.Pool,
  q: SqlQuery,
  statements?: StatementNames,
): Promise<QueryResult> {
  const name =
    statements && !(client instanceof pg.Pool)
      ? statements.nameFor(client, q.text, q.values.length)
      : undefined;
  try {
    const res: pg.QueryResult | pg.QueryResult[] = await client.query({
      name,
      text: q.text,
      values: q.values as unknown[],
      types,
    });
    // A multi-statement script (simple protocol) answers one result per statement.
    const r = Array.isArray(res) ? (res[res.length - 1] ?? { rows: [], rowCount: 0 }) : res;
    return { rows: r.rows ?? [], rowCount: r.rowCount ?? r.rows?.length ?? 0 };
  } catch (err) {
    if (name && !(client instanceof pg.Pool) && isStaleStatement(err)) {
      broken.add(client);
      throw new StaleStatementError(wrap(err));
    }
    // Not an error reported by the server (socket closed, protocol error): drop the connection.
    if (!(client instanceof pg.Pool) && !(err instanceof pg.DatabaseError)) broken.add(client);
    throw wrap(err);
  }
}

class StaleStatementError extends DbError {
  constructor(readonly original: DbError) {
    super(original.message, {
      code: original.code,
      detail: original.detail,
      constraint: original.constraint,
    });
  }
}

export interface PostgresOptions {
  connectionString: string;
  poolSize?: number;
  /** Schema to put first on the search_path (tests isolate themselves this way). */
  schema?: string;
  applicationName?: string;
  /**
   * Most server-side prepared statements per connection (see StatementNames); 0 disables
   * them (e.g. behind a transaction-mode pooler without prepared-statement support).
   */
  preparedStatements?: number;
}

export const DEFAULT_PREPARED_STATEMENTS = 100;

/** PostgreSQL through a connection pool. */
export class PostgresDb extends BaseQueryable implements Db {
  readonly kind = "postgres" as const;
  readonly pool: pg.Pool;
  readonly statements: StatementNames;
  private readonly clientConfig: pg.ClientConfig;
  private readonly listeners = new Set<() => Promise<void>>();

  private constructor(opts: PostgresOptions) {
    super();
    this.clientConfig = {
      connectionString: opts.connectionString,
      application_name: opts.applicationName ?? "netmon",
      connectionTimeoutMillis: 10_000,
      options: opts.schema ? `-c search_path=${opts.schema},public` : undefined,
    };
    this.pool = new pg.Pool({ ...this.clientConfig, max: opts.poolSize ?? 10 });
    this.statements = new StatementNames(opts.preparedStatements ?? DEFAULT_PREPARED_STATEMENTS);
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

  protected async run(q: SqlQuery): Promise<QueryResult> {
    try {
      return await this.withClient((client) => runOn(client, q, this.statements));
    } catch (err) {
      if (!(err instanceof StaleStatementError)) throw err;
      // That connection is gone; run the statement once more, unnamed, on another.
      return this.withClient((client) => runOn(client, q));
    }
  }

  /**
   * Hold one pooled connection for `fn`. Unlike pool.query, a statement error reported by the
   * server keeps the connection (and its prepared statements); a broken connection is dropped.
   */
  private async withClient<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.connect();
    // A checked-out client has no error listener: without one, a connection lost between
    // statements would be an unhandled 'error' event.
    const onError = () => broken.add(client);
    client.on("error", onError);
    try {
      return await fn(client);
    } finally {
      client.removeListener("error", onError);
      client.release(broken.has(client) ? true : undefined);
    }
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.withClient(async (client) => {
      await runOn(client, { text: "BEGIN", values: [] });
      try {
        const result = await fn(new FnQueryable((q) => runOn(client, q, this.statements)));
        await runOn(client, { text: "COMMIT", values: [] });
        return result;
      } catch (err) {
        await runOn(client, { text: "ROLLBACK", values: [] }).catch(() => {});
        throw err instanceof StaleStatementError ? err.original : err;
      }
    });
  }

  async withAdvisoryLock<T>(key: bigint, fn: (conn: Session) => Promise<T>): Promise<T> {
    return this.withClient(async (client) => {
      await runOn(client, { text: "SELECT pg_advisory_lock($1)", values: [key.toString()] });
      try {
        // Unnamed statements: migrations run here and change the tables statements would read.
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
    });
  }

  async tryAdvisoryLock(key: bigint): Promise<(() => Promise<void>) | null> {
    const client = await this.connect();
    try {
      const r = await runOn(client, {
        text: "SELECT pg_try_advisory_lock($1) AS ok",
        values: [key.toString()],
      });
      if (r.rows[0]?.ok !== true) {
        client.release();
        return null;
      }
    } catch (err) {
      client.release();
      throw err;
    }
    let released = false;
    return async () => {
      if (released) return;
      released = true;
      await runOn(client, { text: "SELECT pg_advisory_unlock($1)", values: [key.toString()] }).catch(
        () => {},
      );
      client.release();
    };
  }

  private async connect(): Promise<pg.PoolClient> {
    try {
      return await this.pool.connect();
    } catch (err) {
      throw wrap(err);
    }
  }

  async ping(): Promise<void> {
    await this.query("SELECT 1");
  }

  async listen(channel: string, handlers: ListenHandlers): Promise<() => Promise<void>> {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`refusing unsafe channel name '${channel}'`);
    let stopped = false;
    let client: pg.Client | null = null;
    let timer: NodeJS.Timeout | null = null;
    let delay = 250;
    const down = (c: pg.Client) => {
      if (client !== c) return;
      client = null;
      c.end().catch(() => {});
      handlers.onState?.(false);
      if (stopped) return;
      timer = setTimeout(() => {
        timer = null;
        void attempt();
      }, delay);
      timer.unref();
      delay = Math.min(delay * 2, 5_000);
    };
    const attempt = async () => {
      const c = new pg.Client({
        ...this.clientConfig,
        application_name: `${this.clientConfig.application_name}-listen`,
        keepAlive: true,
      });
      client = c;
      c.on("error", () => down(c));
      c.on("end", () => down(c));
      c.on("notification", (msg) => {
        if (msg.channel === channel) handlers.onNotify(msg.payload ?? "");
      });
      try {
        await c.connect();
        await c.query(`LISTEN ${channel}`);
        if (stopped || client !== c) {
          // Stopped while connecting.
          await c.end().catch(() => {});
          return;
        }
        delay = 250;
        handlers.onState?.(true);
      } catch {
        down(c);
      }
    };
    const stop = async () => {
      stopped = true;
      this.listeners.delete(stop);
      if (timer) clearTimeout(timer);
      const c = client;
      client = null;
      if (c) await c.end().catch(() => {});
    };
    this.listeners.add(stop);
    await attempt();
    return stop;
  }

  private closed = false;

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const stop of [...this.listeners]) await stop();
    await this.pool.end();
  }
}
