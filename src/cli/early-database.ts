import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type Config, loadConfig } from "../config/config.ts";
import type { Db } from "../storage/db.ts";
import { openDatabase } from "../storage/open.ts";

/**
 * `netmon serve`'s database, opened before the rest of the program is loaded. The embedded
 * database (PGlite) starts in a worker thread and spends most of a restart compiling and
 * booting its WebAssembly; the main thread meanwhile loads and compiles the server's modules.
 * Started one after the other they added up (issue 14 goal 5: bench/ops/RESULTS.md); started
 * here they overlap on two cores.
 */
let early: { config: Config; db: Promise<Db> } | undefined;

/** Start opening the database when the command line is a plain `serve`; no-op otherwise. */
export function openServeDatabaseEarly(argv: readonly string[]): void {
  if (argv.length !== 1 || argv[0] !== "serve") return;
  let config: Config;
  try {
    config = loadConfig();
  } catch {
    // serve loads the configuration again and reports the error itself.
    return;
  }
  const db = initialiseInChild(config).then(() => openDatabase(config));
  // Handled by whoever takes it (serve awaits it); an unclaimed failure is not unhandled.
  db.catch(() => {});
  early = { config, db };
}

/**
 * The database opened early for this configuration, at most once; undefined when none was
 * opened. One opened for a different configuration is closed (its directory lock released)
 * and undefined returned, so the caller opens its own.
 */
export async function takeEarlyDatabase(config: Config): Promise<Db | undefined> {
  const taken = early;
  early = undefined;
  if (!taken) return undefined;
  const same =
    taken.config.databaseUrl === config.databaseUrl &&
    taken.config.dataDir === config.dataDir &&
    taken.config.pgliteSharedBuffersMb === config.pgliteSharedBuffersMb &&
    taken.config.dbPoolSize === config.dbPoolSize;
  if (same) return taken.db;
  const db = await taken.db.catch(() => undefined);
  await db?.close();
  return undefined;
}

/**
 * A new embedded database is created (initdb) and migrated by a short-lived `netmon migrate`
 * child, not in this process. PGlite's WebAssembly memory only grows, and the memory its thread
 * allocated stays with this process after the thread ends: a first start that did that work
 * itself idled ~100 MB (about 40 %) above every later start. Resolves when the child is done;
 * on any failure the server's own migration runs as before and reports the error itself.
 */
function initialiseInChild(config: Config): Promise<void> {
  // This package's own entry point (src/cli or dist/cli → bin), whatever script started us.
  const script = fileURLToPath(new URL("../../bin/netmon.mjs", import.meta.url));
  if (config.databaseUrl || !fs.existsSync(script)) return Promise.resolve();
  if (fs.existsSync(path.join(config.dataDir, "pg", "PG_VERSION"))) return Promise.resolve();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...process.execArgv, script, "migrate"], {
      stdio: ["ignore", "ignore", "ignore"],
      env: process.env,
    });
    child.on("error", () => resolve());
    child.on("exit", () => resolve());
  });
}
