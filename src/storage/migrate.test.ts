import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import type { Db } from "./db.ts";
import { loadMigrations, MigrationChangedError, migrate } from "./migrate.ts";

describe("migrations", () => {
  let db: Db;
  let dir: string;
  beforeAll(async () => {
    db = (await createTestDatabase({ migrated: false })).db;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-migrations-"));
  });
  afterAll(async () => {
    await db?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("refuse to run when a landed migration's text changed, naming it and the way out", async () => {
    fs.writeFileSync(path.join(dir, "0001_first.sql"), "CREATE TABLE mig_a (id integer);");
    expect((await migrate(db, loadMigrations(dir))).applied).toEqual(["1_first"]);
    fs.writeFileSync(path.join(dir, "0001_first.sql"), "CREATE TABLE mig_a (id bigint);");
    const err = await migrate(db, loadMigrations(dir)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationChangedError);
    expect((err as Error).message).toMatch(/0001_first changed after it was applied.*new migration/);
    // Restored: runs again, and later migrations apply.
    fs.writeFileSync(path.join(dir, "0001_first.sql"), "CREATE TABLE mig_a (id integer);");
    fs.writeFileSync(path.join(dir, "0002_second.sql"), "CREATE TABLE mig_b (id integer);");
    expect(await migrate(db, loadMigrations(dir))).toEqual({ applied: ["2_second"], warnings: [] });
  });

  it("accept the one known earlier revision of 0202 and restore the index it dropped", async () => {
    const fresh = (await createTestDatabase({ migrated: false })).db;
    try {
      await migrate(fresh);
      // Simulate a database migrated with the revision of 0202 that dropped the index.
      await fresh.query("DROP INDEX devices_last_seen_idx");
      await fresh.query(
        "UPDATE netmon_schema_migrations SET checksum = 'd8898b8d103c81edd4bc4f99c2c71f57cc9b66962189790fd3b1760360089248' WHERE version = 202",
      );
      await fresh.query("DELETE FROM netmon_schema_migrations WHERE version = 204");
      const r = await migrate(fresh);
      expect(r.applied).toEqual(["204_inventory_restore_last_seen_idx"]);
      expect(r.warnings).toEqual([
        "migration 202_inventory_ingest_hot was applied in an earlier revision (repaired later)",
      ]);
      const idx = await fresh.one("SELECT 1 FROM pg_indexes WHERE indexname = 'devices_last_seen_idx'");
      expect(idx).not.toBeNull();
    } finally {
      await fresh.close();
    }
  });
});
