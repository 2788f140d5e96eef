import fs from "node:fs";
import pg from "pg";
import { inject } from "vitest";
import type { Db } from "../../src/storage/db.ts";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { adminUrl, databaseUrl } from "./pg-urls.ts";

export type Backend = "pglite" | "postgres";

/** The backend this test run exercises: PostgreSQL when NETMON_TEST_DATABASE_URL is set. */
export function testBackend(): Backend {
  return process.env.NETMON_TEST_DATABASE_URL ? "postgres" : "pglite";
}

let counter = 0;

export interface TestDatabase {
  db: Db;
  /** Connection URL for PostgreSQL test databases (to start separate servers on it). */
  url: string | null;
}

/**
 * A fresh, isolated database. `migrated` (default) clones the run's migrated template;
 * `migrated: false` gives an empty one (for migration tests).
 */
export async function createTestDatabase(
  opts: { migrated?: boolean; dataDir?: string } = {},
): Promise<TestDatabase> {
  const migrated = opts.migrated ?? true;
  const base = process.env.NETMON_TEST_DATABASE_URL;
  if (!base) {
    const loadDataDir = migrated ? new Uint8Array(fs.readFileSync(inject("pgliteTemplate"))) : undefined;
    return { db: await PgliteDb.open({ loadDataDir, dataDir: opts.dataDir }), url: null };
  }
  const url = await createPgDatabase(migrated);
  return { db: await PostgresDb.open({ connectionString: url, poolSize: 5 }), url };
}

/** Create a PostgreSQL database for this test (dropped by global teardown) and return its URL. */
export async function createPgDatabase(migrated = true): Promise<string> {
  const base = process.env.NETMON_TEST_DATABASE_URL;
  if (!base) throw new Error("NETMON_TEST_DATABASE_URL is not set");
  const name = `netmon_t_${inject("runId")}_${process.pid}_${counter++}`;
  const template = inject("pgTemplateDb");
  const admin = new pg.Client({ connectionString: adminUrl(base) });
  await admin.connect();
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(
          migrated && template ? `CREATE DATABASE ${name} TEMPLATE ${template}` : `CREATE DATABASE ${name}`,
        );
        break;
      } catch (err) {
        // Two clones of one template at the same instant can collide; retry briefly.
        if (attempt >= 10) throw err;
        await new Promise((r) => setTimeout(r, 100 + attempt * 100));
      }
    }
  } finally {
    await admin.end();
  }
  return databaseUrl(base, name);
}
