/**
 * Backup, restore and copy between databases (issue 19, decision 0950), as functions the CLI
 * (`src/ops/cli.ts`), the admin route and the tests share. The file format is in
 * `backup-file.ts`, the table engine in `dump.ts`.
 */
import fs from "node:fs";
import { ConflictError } from "../kernel/errors.ts";
import type { Db } from "../storage/db.ts";
import { migrate } from "../storage/migrate.ts";
import { type BackupHeader, readBackupStream } from "./backup-file.ts";
import { DumpImporter, exportDatabase, hasUserData } from "./dump.ts";

export interface TableReport {
  table: string;
  expected: number;
  found: number;
}

export interface LoadOptions {
  /** Replace a database that already holds users (default: refuse). */
  force?: boolean;
  onTable?: (name: string, rows: number) => void;
}

/**
 * Refuse to overwrite what an operator made, and a PostgreSQL database other netmon
 * processes are using (their caches and in-flight work would not match the new contents).
 */
export async function assertReplaceable(target: Db, opts: LoadOptions, what: string): Promise<void> {
  if (opts.force) return;
  if (target.kind === "postgres") {
    const r = await target.one<{ n: number }>(`
      SELECT count(*)::int8 AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'netmon' AND pid <> pg_backend_pid()`);
    if (Number(r?.n ?? 0) > 0) {
      throw new ConflictError(
        `${what}: ${r?.n} connection(s) from running netmon servers use this database; stop them first (or pass --force)`,
        { code: "database_in_use" },
      );
    }
  }
  if (await hasUserData(target)) {
    throw new ConflictError(
      `${what}: the target database already holds users and data; pass --force to replace all of it`,
      { code: "database_not_empty" },
    );
  }
}

/** Restore a backup file into `target` (migrated first), replacing its contents, verified per table. */
export async function restoreBackup(
  target: Db,
  file: string,
  opts: LoadOptions = {},
): Promise<{ header: BackupHeader; report: TableReport[] }> {
  await migrate(target);
  await assertReplaceable(target, opts, "restore");
  return target.transaction(async (tx) => {
    const importer = new DumpImporter(tx, { onTable: opts.onTable });
    const header = await readBackupStream(fs.createReadStream(file), importer);
    const report = await importer.finish();
    return { header, report };
  });
}

/**
 * Copy every table of `source` (one consistent snapshot) into `target` (migrated first),
 * replacing its contents; the target's count of each table is checked against the source's.
 */
export async function copyDatabase(source: Db, target: Db, opts: LoadOptions = {}): Promise<TableReport[]> {
  await migrate(target);
  await assertReplaceable(target, opts, "db copy");
  return target.transaction(async (tx) => {
    const importer = new DumpImporter(tx, { onTable: opts.onTable });
    const exported = await exportDatabase(source, importer);
    const report = await importer.finish();
    for (const [table, n] of exported) {
      const row = report.find((r) => r.table === table);
      if (!row || row.found !== n) {
        throw new ConflictError(
          `verification failed: ${table} has ${n} rows in the source, ${row?.found ?? 0} in the target`,
          {
            code: "backup_count_mismatch",
          },
        );
      }
    }
    return report;
  });
}
