import { loadConfig } from "../config/config.ts";
import { migrate } from "../storage/migrate.ts";
import { openDatabase } from "../storage/open.ts";
import type { Command } from "./command.ts";

export const migrateCommand: Command = {
  name: "migrate",
  summary: "Apply pending database migrations and exit",
  usage: `netmon migrate

Applies pending migrations to the configured database (DATABASE_URL, or PGlite in
NETMON_DATA_DIR) under an advisory lock, so it is safe while other replicas start.`,
  async run() {
    const config = loadConfig();
    const db = await openDatabase(config);
    try {
      const { applied, warnings } = await migrate(db);
      for (const w of warnings) process.stderr.write(`warning: ${w}\n`);
      process.stdout.write(
        applied.length === 0 ? "database is up to date\n" : `applied ${applied.join(", ")}\n`,
      );
    } finally {
      await db.close();
    }
    return 0;
  },
};
