import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import { waitFor } from "../../test/helpers/wait.ts";
import type { Db } from "./db.ts";
import { analyzeNow, autoMaintain } from "./maintenance.ts";
import { sql } from "./sql.ts";

describe("embedded database maintenance (autovacuum's rule)", () => {
  let db: Db;
  beforeAll(async () => {
    db = (await createTestDatabase({ migrated: false })).db;
    await db.query("CREATE TABLE maint_t (id integer PRIMARY KEY, v text)");
  });
  afterAll(async () => {
    await db?.close();
  });

  const reltuples = async () =>
    Number(
      (await db.one<{ n: number }>(sql`SELECT reltuples AS n FROM pg_class WHERE relname = 'maint_t'`))?.n,
    );
  const dead = async () =>
    Number(
      (
        await db.one<{ n: number }>(
          sql`SELECT n_dead_tup AS n FROM pg_stat_user_tables WHERE relname = 'maint_t'`,
        )
      )?.n,
    );

  it("analyzes a table after a bulk write and vacuums it after mass deletes, then rests", async () => {
    await db.query("INSERT INTO maint_t SELECT g, 'row ' || g FROM generate_series(1, 5000) g");
    // Statistics counters reach the stats views a moment after the write: wait for the pass
    // that acts on them (the server's loop runs every minute; the test asks repeatedly).
    await waitFor(async () => {
      await autoMaintain(db);
      return (await reltuples()) === 5000;
    }, "statistics for the 5,000 new rows");

    await db.query("DELETE FROM maint_t WHERE id > 1000");
    await waitFor(async () => {
      const r = await autoMaintain(db);
      return r.vacuumed.includes("maint_t") || (await dead()) === 0 ? true : null;
    }, "the dead rows reclaimed");
    await waitFor(async () => {
      await autoMaintain(db);
      return (await reltuples()) === 1000;
    }, "statistics after the delete");
    // Nothing changed since: the next pass leaves the table alone.
    const idle = await autoMaintain(db);
    expect(idle.analyzed).not.toContain("maint_t");
    expect(idle.vacuumed).not.toContain("maint_t");
  });

  it("collects statistics on request, right after a bulk write", async () => {
    await db.query("INSERT INTO maint_t SELECT g, 'more ' || g FROM generate_series(100001, 103000) g");
    await analyzeNow(db, ["maint_t"]);
    expect(await reltuples()).toBe(4000);
    await expect(analyzeNow(db, ['maint_t"; DROP TABLE maint_t; --'])).rejects.toThrow(
      /unsafe SQL identifier/,
    );
  });
});
