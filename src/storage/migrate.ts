import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Db } from "./db.ts";

/** Advisory lock key shared by every replica: only one applies migrations at a time. */
export const MIGRATION_LOCK_KEY = 0x6e65746d6f6e01n;

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

/**
 * Migrations are `NNNN_name.sql` files, applied in version order. Domains own version
 * ranges so parallel work never collides: 0001–0099 storage/kernel, 0100 access,
 * 0200 inventory, 0300 srql/telemetry, 0400 jsonapi resources, 0500 alerting,
 * 0600 monitoring, 0700 dashboards.
 */
export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  const files = fs.readdirSync(dir).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f));
  const migrations = files.map((file) => {
    const sql = fs.readFileSync(path.join(dir, file), "utf8");
    return {
      version: Number(file.slice(0, 4)),
      name: file.slice(5, -4),
      sql,
      checksum: createHash("sha256").update(sql).digest("hex"),
    };
  });
  migrations.sort((a, b) => a.version - b.version);
  for (let i = 1; i < migrations.length; i++) {
    if (migrations[i]?.version === migrations[i - 1]?.version) {
      throw new Error(`two migrations share version ${migrations[i]?.version}`);
    }
  }
  return migrations;
}

/**
 * Checksums of revisions a landed migration had before it was edited (a mistake never to
 * repeat: the lint of history is this error). Each entry names the migration that repairs it.
 * 0202 once dropped devices_last_seen_idx; 0204 recreates it.
 */
const SUPERSEDED: Readonly<Record<number, readonly string[]>> = Object.freeze({
  202: ["d8898b8d103c81edd4bc4f99c2c71f57cc9b66962189790fd3b1760360089248"],
});

/** A landed migration whose text changed: the database and the code disagree about the schema. */
export class MigrationChangedError extends Error {
  constructor(version: number, name: string) {
    super(
      `migration ${String(version).padStart(4, "0")}_${name} changed after it was applied to this database. ` +
        "Landed migrations are never edited: restore the file from the release this database was migrated with " +
        "and put the change in a new migration.",
    );
    this.name = "MigrationChangedError";
  }
}

export interface MigrateResult {
  applied: string[];
  warnings: string[];
}

/** Apply pending migrations inside the advisory lock; each migration in its own transaction. */
export async function migrate(db: Db, migrations = loadMigrations()): Promise<MigrateResult> {
  return db.withAdvisoryLock(MIGRATION_LOCK_KEY, async (conn) => {
    await conn.script(`CREATE TABLE IF NOT EXISTS netmon_schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const done = await conn.many<{ version: number; name: string; checksum: string }>(
      "SELECT version, name, checksum FROM netmon_schema_migrations",
    );
    const byVersion = new Map(done.map((r) => [r.version, r]));
    const applied: string[] = [];
    const warnings: string[] = [];
    for (const m of migrations) {
      const prior = byVersion.get(m.version);
      if (prior) {
        if (prior.checksum !== m.checksum) {
          if (SUPERSEDED[m.version]?.includes(prior.checksum)) {
            // A known earlier revision; a later migration repairs what it did differently.
            warnings.push(
              `migration ${m.version}_${m.name} was applied in an earlier revision (repaired later)`,
            );
          } else {
            throw new MigrationChangedError(m.version, m.name);
          }
        }
        continue;
      }
      await conn.script("BEGIN");
      try {
        await conn.script(m.sql);
        await conn.query(
          "INSERT INTO netmon_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
          [m.version, m.name, m.checksum],
        );
        await conn.script("COMMIT");
      } catch (err) {
        await conn.script("ROLLBACK").catch(() => {});
        throw new Error(`migration ${m.version}_${m.name} failed: ${(err as Error).message}`, { cause: err });
      }
      applied.push(`${m.version}_${m.name}`);
    }
    return { applied, warnings };
  });
}
