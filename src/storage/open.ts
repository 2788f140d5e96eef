import path from "node:path";
import type { Config } from "../config/config.ts";
import type { Db } from "./db.ts";
import { PgliteDb } from "./pglite/client.ts";
import { PostgresDb } from "./postgres/client.ts";
import { makePrivateDir } from "./private-dir.ts";

/** PostgreSQL when DATABASE_URL is set, otherwise embedded PGlite under the data directory. */
export async function openDatabase(
  config: Pick<Config, "databaseUrl" | "dataDir" | "dbPoolSize"> &
    Partial<Pick<Config, "pgliteSharedBuffersMb">>,
): Promise<Db> {
  if (config.databaseUrl) {
    return PostgresDb.open({ connectionString: config.databaseUrl, poolSize: config.dbPoolSize });
  }
  makePrivateDir(config.dataDir);
  return PgliteDb.open({
    dataDir: path.join(config.dataDir, "pg"),
    sharedBuffersMb: config.pgliteSharedBuffersMb,
  });
}
