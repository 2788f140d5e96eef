import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { loadConfig } from "../../src/config/config.ts";
import type { Feature } from "../../src/kernel/feature.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import type { Db } from "../../src/storage/db.ts";
import { createTestDatabase } from "./database.ts";

export interface TestServer extends RunningServer {
  db: Db;
  /** PostgreSQL URL of the test database (null on PGlite). */
  dbUrl: string | null;
  dataDir: string;
  /** Every log line the server wrote (for tests that assert what is never logged). */
  logs: string[];
  /** fetch relative to the server's URL. */
  fetch(pathname: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>;
}

export interface TestServerOptions {
  env?: Record<string, string>;
  features?: Feature[];
  /** Reuse a database (e.g. two servers on one PostgreSQL). Not closed by stop(). */
  db?: Db;
  dbUrl?: string | null;
}

/** A real server on an ephemeral loopback port, on a fresh database of the run's backend. */
export async function startTestServer(opts: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-srv-"));
  // With DATABASE_URL in env the server opens (and owns) that database itself, as in production.
  const fromConfig = !opts.db && opts.env?.DATABASE_URL !== undefined;
  const owned = opts.db || fromConfig ? null : await createTestDatabase();
  const db = opts.db ?? owned?.db;
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      cb();
    },
  });
  const config = loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    NETMON_DATA_DIR: dataDir,
    NETMON_LOG_LEVEL: "info",
    NETMON_EMBEDDED_AGENT: "false",
    // Tests make their own users; a generated first admin would change "last admin" arithmetic.
    NETMON_INITIAL_ADMIN: "false",
    // The non-HTTP receivers (OTLP/gRPC, syslog, SNMP traps) default to fixed ports; tests that
    // start many servers keep them off unless they ask for one (on a free port).
    NETMON_OTLP_GRPC_PORT: "0",
    NETMON_SYSLOG_PORT: "0",
    NETMON_SNMP_TRAP_PORT: "0",
    ...opts.env,
  });
  let server: RunningServer;
  try {
    server = await startServer(config, { db, features: opts.features, logDestination: sink });
  } catch (err) {
    if (owned) await owned.db.close();
    throw err;
  }
  let stopped = false;
  return {
    ...server,
    db: server.ctx.db,
    dbUrl: opts.dbUrl ?? owned?.url ?? opts.env?.DATABASE_URL ?? null,
    dataDir,
    logs,
    fetch: (pathname, init) => fetch(new URL(pathname, server.url), init),
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.close();
      if (owned) await owned.db.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
