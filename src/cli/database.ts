import { type Config, loadConfig } from "../config/config.ts";
import type { AppContext } from "../kernel/context.ts";
import { createLogger } from "../kernel/logger.ts";
import { loadOrCreateSecretKey } from "../kernel/secret-key.ts";
import type { Db } from "../storage/db.ts";
import { migrate } from "../storage/migrate.ts";
import { openDatabase } from "../storage/open.ts";
import { cliIo } from "./io.ts";

/**
 * Run a CLI command against the configured database (migrated first). On PGlite the server
 * holds the directory while it runs: the command is then forwarded to it (cli-channel.ts) and
 * runs here with the server's context. PostgreSQL allows direct access at any time.
 */
export async function withContext<T>(
  fn: (ctx: AppContext) => Promise<T>,
  config: Config = loadConfig(),
): Promise<T> {
  // Forwarded from a terminal to the running server: use the server's open database.
  const inServer = cliIo().ctx;
  if (inServer) return fn(inServer);
  // Commands are quiet unless NETMON_LOG_LEVEL asks otherwise (the server defaults to info).
  const log = createLogger(process.env.NETMON_LOG_LEVEL ? config.logLevel : "warn");
  const db: Db = await openDatabase(config);
  try {
    await migrate(db);
    const ctx: AppContext = {
      config,
      db,
      log,
      secretKey: loadOrCreateSecretKey(config.secretKeyFile),
      now: () => new Date(),
    };
    return await fn(ctx);
  } finally {
    await db.close();
  }
}
