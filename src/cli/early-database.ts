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
  const db = openDatabase(config);
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
