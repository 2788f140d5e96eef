import { loadConfig } from "../config/config.ts";
import { migrate } from "../storage/migrate.ts";
import { openDatabase } from "../storage/open.ts";
import type { Command } from "./command.ts";
import { cliIo, stderr, stdout } from "./io.ts";

export const migrateCommand: Command = {
  name: "migrate",
  summary: "Apply pending database migrations and exit",
  usage: `netmon migrate

Applies pending migrations to the configured database (DATABASE_URL, or PGlite in
NETMON_DATA_DIR) under an advisory lock, so it is safe while other replicas start.`,
  async run() {
    const report = ({ applied, warnings }: { applied: string[]; warnings: string[] }) => {
      for (const w of warnings) stderr(`warning: ${w}\n`);
      stdout(applied.length === 0 ? "database is up to date\n" : `applied ${applied.join(", ")}\n`);
    };
    // Forwarded to a running server: its database, already open.
    const inServer = cliIo().ctx;
    if (inServer) {
      report(await migrate(inServer.db));
      return 0;
    }
    const db = await openDatabase(loadConfig());
    try {
      report(await migrate(db));
    } finally {
      await db.close();
    }
    return 0;
  },
};
