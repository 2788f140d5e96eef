import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { createPgDatabase, testBackend } from "./database.ts";

const run = promisify(execFile);
const BIN = path.resolve("bin/netmon.mjs");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliWorkspace {
  /** Data directory (PGlite database and secret key live here). */
  dir: string;
  /** Environment the `netmon` child processes run with. */
  env: Record<string, string>;
  /** PostgreSQL test database URL, or null on PGlite. */
  dbUrl: string | null;
  /** Run `netmon <args>` as a real child process; never throws on a non-zero exit. */
  netmon(...args: string[]): Promise<CliResult>;
  cleanup(): void;
}

/**
 * A place to run the real `netmon` binary against the run's backend: a temp data directory
 * (PGlite) or a fresh PostgreSQL database from the migrated template.
 */
export async function cliWorkspace(prefix: string, timeoutMs = 120_000): Promise<CliWorkspace> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  const env: Record<string, string> = {
    NETMON_DATA_DIR: dir,
    NETMON_SECRET_KEY_FILE: path.join(dir, "secret.key"),
    NETMON_LOG_LEVEL: "silent",
    // Receivers with fixed default ports stay off (tests run in parallel on one machine).
    NETMON_OTLP_GRPC_PORT: "0",
    NETMON_SYSLOG_PORT: "0",
    NETMON_SNMP_TRAP_PORT: "0",
  };
  let dbUrl: string | null = null;
  if (testBackend() === "postgres") {
    dbUrl = await createPgDatabase();
    env.DATABASE_URL = dbUrl;
  }
  return {
    dir,
    env,
    dbUrl,
    async netmon(...args) {
      try {
        const { stdout, stderr } = await run(process.execPath, [BIN, ...args], {
          env: { ...process.env, ...env },
          timeout: timeoutMs,
        });
        return { code: 0, stdout, stderr };
      } catch (err) {
        const e = err as { code: number; stdout: string; stderr: string };
        return { code: e.code, stdout: e.stdout, stderr: e.stderr };
      }
    },
    cleanup() {
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
