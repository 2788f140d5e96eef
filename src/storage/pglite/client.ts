import { AsyncLocalStorage } from "node:async_hooks";
import fs from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { copyLine, copyStatement } from "../copy-text.ts";
import {
  DatabaseLockedError,
  type Db,
  type DbStats,
  type QueryResult,
  type Session,
  type Tx,
} from "../db.ts";
import { DbError, noteDbError } from "../db-error.ts";
import { Mutex } from "../mutex.ts";
import { BaseQueryable, FnSession, FnTx } from "../queryable.ts";
import type { SqlQuery } from "../sql.ts";

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

interface WorkerReply {
  /** A notification (LISTEN) rather than a reply. */
  notify?: string;
  payload?: string;
  id: number;
  ok: boolean;
  result?: unknown;
  error?: { message: string; code?: string; detail?: string; constraint?: string };
}

export interface PgliteOptions {
  /** Directory holding the database; omitted means in-memory. */
  dataDir?: string;
  /** A dump (from `dump()`) to start from instead of running initdb: ~0.5 s instead of 2–5 s. */
  loadDataDir?: Uint8Array;
  /**
   * PostgreSQL's shared_buffers in MiB (default 32; PGlite's own default is 128). Reads that
   * miss it are served by the OS page cache through the file system, so a large cache mostly
   * costs resident memory: bench/ops/RESULTS.md has the measurement.
   */
  sharedBuffersMb?: number;
}

/**
 * Embedded PostgreSQL (PGlite) in a worker thread. One connection: every statement and
 * transaction is serialised through a mutex so a transaction never sees another's statements.
 */
export class PgliteDb extends BaseQueryable implements Db {
  readonly kind = "pglite" as const;
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly mutex = new Mutex();
  /**
   * Marks code running inside an open transaction (or locked session). PGlite has one
   * connection, so a statement or a nested transaction issued from there through `db`
   * would wait on the mutex its own caller holds — a deadlock. Instead such calls join the
   * open transaction (nested transactions become savepoints).
   */
  private readonly holder = new AsyncLocalStorage<{ active: boolean }>();
  private savepoints = 0;
  private readonly ready: Promise<void>;
  private closed = false;
  private readonly lockFile: string | undefined;
  private readonly listeners = new Map<string, Set<(payload: string) => void>>();

  private constructor(opts: PgliteOptions, lockFile: string | undefined) {
    super();
    this.lockFile = lockFile;
    this.worker = new Worker(new URL("./worker.mjs", import.meta.url), {
      workerData: {
        dataDir: opts.dataDir,
        loadDataDir: opts.loadDataDir,
        sharedBuffersMb: opts.sharedBuffersMb ?? 32,
      },
    });
    this.ready = new Promise<void>((resolve, reject) => {
      this.pending.set(0, { resolve: () => resolve(), reject });
    });
    this.worker.on("message", (msg: WorkerReply) => {
      if (msg.notify !== undefined) {
        for (const fn of this.listeners.get(msg.notify) ?? []) fn(msg.payload ?? "");
        return;
      }
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.ok) p.resolve(msg.result);
      else p.reject(noteDbError(new DbError(msg.error?.message ?? "database error", msg.error ?? {})));
    });
    this.worker.on("error", (err) => this.failAll(err));
    this.worker.on("exit", () => this.failAll(new DbError("database worker exited")));
  }

  static async open(opts: PgliteOptions = {}): Promise<PgliteDb> {
    let lockFile: string | undefined;
    if (opts.dataDir) {
      fs.mkdirSync(opts.dataDir, { recursive: true });
      lockFile = acquireDirLock(opts.dataDir);
    }
    const db = new PgliteDb(opts, lockFile);
    try {
      await db.ready;
    } catch (err) {
      await db.worker.terminate();
      releaseDirLock(lockFile);
      throw err;
    }
    return db;
  }

  private failAll(err: unknown): void {
    this.closed = true;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  private call(op: string, payload: Record<string, unknown> = {}): Promise<unknown> {
    if (this.closed) return Promise.reject(new DbError("database is closed", { code: "08003" }));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, op, ...payload });
    });
  }

  private exec(q: SqlQuery): Promise<QueryResult> {
    return this.call("query", { text: q.text, values: q.values }) as Promise<QueryResult>;
  }

  /** COPY from an in-memory file the worker hands PGlite as `/dev/blob`. */
  private execCopy(
    table: string,
    columns: readonly string[],
    rows: readonly (readonly unknown[])[],
  ): Promise<number> {
    if (rows.length === 0) return Promise.resolve(0);
    let text = "";
    for (const row of rows) text += copyLine(row);
    return this.call("copy", {
      text: copyStatement(table, columns, "'/dev/blob'"),
      data: text,
    }) as Promise<number>;
  }

  copyIn(table: string, columns: readonly string[], rows: readonly (readonly unknown[])[]): Promise<number> {
    if (this.inHeldConnection()) return this.execCopy(table, columns, rows);
    return this.mutex.run(() => this.execCopy(table, columns, rows));
  }

  private txHandle(): FnTx {
    return new FnTx(
      (q) => this.exec(q),
      (table, columns, rows) => this.execCopy(table, columns, rows),
    );
  }

  private inHeldConnection(): boolean {
    return this.holder.getStore()?.active === true;
  }

  protected run(q: SqlQuery): Promise<QueryResult> {
    if (this.inHeldConnection()) return this.exec(q);
    return this.mutex.run(() => this.exec(q));
  }

  private async savepoint<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const name = `netmon_sp_${++this.savepoints}`;
    await this.exec({ text: `SAVEPOINT ${name}`, values: [] });
    try {
      const result = await fn(this.txHandle());
      await this.exec({ text: `RELEASE SAVEPOINT ${name}`, values: [] });
      return result;
    } catch (err) {
      await this.exec({ text: `ROLLBACK TO SAVEPOINT ${name}`, values: [] }).catch(() => {});
      throw err;
    }
  }

  /** Run `fn` holding the connection; calls made through `db` from inside join it. */
  private hold<T>(fn: () => Promise<T>): Promise<T> {
    return this.mutex.run(() => {
      const marker = { active: true };
      return this.holder.run(marker, async () => {
        try {
          return await fn();
        } finally {
          marker.active = false;
        }
      });
    });
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    if (this.inHeldConnection()) return this.savepoint(fn);
    return this.hold(async () => {
      await this.exec({ text: "BEGIN", values: [] });
      const tx = this.txHandle();
      try {
        const result = await fn(tx);
        await this.exec({ text: "COMMIT", values: [] });
        return result;
      } catch (err) {
        await this.exec({ text: "ROLLBACK", values: [] }).catch(() => {});
        throw err;
      }
    });
  }

  async withAdvisoryLock<T>(key: bigint, fn: (conn: Session) => Promise<T>): Promise<T> {
    // One process owns a PGlite directory, so the lock is taken for parity with PostgreSQL
    // while the mutex keeps the caller's statements together on the single connection.
    const locked = async () => {
      await this.exec({ text: "SELECT pg_advisory_lock($1)", values: [key.toString()] });
      try {
        return await fn(
          new FnSession(
            (q) => this.exec(q),
            async (text) => {
              await this.call("exec", { text });
            },
          ),
        );
      } finally {
        await this.exec({ text: "SELECT pg_advisory_unlock($1)", values: [key.toString()] }).catch(() => {});
      }
    };
    return this.inHeldConnection() ? locked() : this.hold(locked);
  }

  async tryAdvisoryLock(_key: bigint): Promise<(() => Promise<void>) | null> {
    // The directory lock already makes this process the only one: it is always the leader.
    return async () => {};
  }

  /** Dump the data directory (uncompressed tar) for use as a template. */
  async dump(): Promise<Uint8Array> {
    return this.mutex.run(() => this.call("dump") as Promise<Uint8Array>);
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    // One process, one connection: nothing to lose short of the database itself closing.
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
      const run = () => this.call("listen", { channel });
      await (this.inHeldConnection() ? run() : this.mutex.run(run));
    }
    const fn = (payload: string) => onNotify(payload);
    set.add(fn);
    return async () => {
      set.delete(fn);
    };
  }

  async ping(): Promise<void> {
    await this.query("SELECT 1");
  }

  stats(): DbStats {
    const queued = this.mutex.queued;
    return { total: 1, idle: queued === 0 ? 1 : 0, waiting: Math.max(0, queued - 1), max: 1 };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.mutex.run(() => this.call("close"));
    } finally {
      this.closed = true;
      await this.worker.terminate();
      releaseDirLock(this.lockFile);
    }
  }
}

/** One process per PGlite directory: a pid lock file, stale when its process is gone. */
/**
 * One process per data directory. The lock file names its holder as "pid starttime bootid":
 * a PID alone is not an identity (a container's server is PID 1 on every start, so after
 * `kill -9` the old lock named a live process — ourselves — and every restart was refused).
 * The holder is alive only if a process with that PID exists AND started at the recorded
 * time in the same boot; otherwise the lock is stale and taken over.
 */
function acquireDirLock(dir: string): string {
  const file = path.join(dir, "netmon.lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, processIdentity(process.pid), { flag: "wx", mode: 0o600 });
      return file;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if (holderAlive(fs.readFileSync(file, "utf8").trim())) throw new DatabaseLockedError(dir);
      fs.rmSync(file, { force: true });
    }
  }
  throw new DatabaseLockedError(dir);
}

function bootId(): string {
  try {
    return fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "-";
  }
}

/** Start time of `pid` in clock ticks since boot (Linux), or "-" where /proc is not there. */
function startTime(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 22, counted after the parenthesised command name (which may contain spaces).
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[19] ?? "-";
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT" && fs.existsSync("/proc/self/stat") ? null : "-";
  }
}

export function processIdentity(pid: number): string {
  return `${pid} ${startTime(pid) ?? "-"} ${bootId()}`;
}

/** Whether the process named by a lock file's content still runs. */
export function holderAlive(content: string): boolean {
  const [pidText, start, boot] = content.split(" ");
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (!isAlive(pid)) return false;
  // Old lock files hold only a PID: trust it unless it names this very process.
  if (start === undefined) return pid !== process.pid;
  if (boot !== undefined && boot !== "-" && boot !== bootId()) return false;
  const now = startTime(pid);
  if (now === null) return false;
  return start === "-" || now === "-" || now === start;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function releaseDirLock(file: string | undefined): void {
  if (file) fs.rmSync(file, { force: true });
}
