import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Db } from "../../src/storage/db.ts";
import { DbError, isUniqueViolation } from "../../src/storage/db-error.ts";
import { sql } from "../../src/storage/sql.ts";
import { createTestDatabase, testBackend } from "../helpers/database.ts";

// One suite for whichever backend this run uses (CI runs it on PGlite and on PostgreSQL).
describe(`storage contract (${testBackend()})`, () => {
  let db: Db;
  beforeAll(async () => {
    db = (await createTestDatabase()).db;
    await db.query(`CREATE TABLE contract_items (
      id bigserial PRIMARY KEY,
      name text NOT NULL UNIQUE,
      n integer,
      big bigint,
      price numeric(10,2),
      at timestamptz,
      doc jsonb,
      tags text[],
      addr inet
    )`);
  });
  afterAll(async () => {
    await db?.close();
  });

  it("reports its kind", () => {
    expect(db.kind).toBe(testBackend());
  });

  it("parses types the same way on both backends", async () => {
    const at = new Date("2026-01-02T03:04:05.678Z");
    await db.query(
      sql`INSERT INTO contract_items (name, n, big, price, at, doc, tags, addr)
          VALUES (${"typed"}, ${7}, ${9007199254740991}, ${"12.50"}, ${at}, ${JSON.stringify({ a: [1, "x"] })}::jsonb, ${["a", "b"]}, ${"10.0.0.1"})`,
    );
    const row =
      await db.one(sql`SELECT n, big, price, at, doc, tags, host(addr) AS addr, count(*) OVER () AS total
                                 FROM contract_items WHERE name = ${"typed"}`);
    expect(row).toEqual({
      n: 7,
      big: 9007199254740991,
      price: "12.50",
      at,
      doc: { a: [1, "x"] },
      tags: ["a", "b"],
      addr: "10.0.0.1",
      total: 1,
    });
  });

  it("keeps hostile strings as data", async () => {
    const evil = "x'); DROP TABLE contract_items; --";
    await db.query(sql`INSERT INTO contract_items (name) VALUES (${evil})`);
    const row = await db.one<{ name: string }>(sql`SELECT name FROM contract_items WHERE name = ${evil}`);
    expect(row?.name).toBe(evil);
  });

  it("commits a transaction that resolves and rolls back one that throws", async () => {
    await db.transaction(async (tx) => {
      await tx.query(sql`INSERT INTO contract_items (name) VALUES (${"committed"})`);
    });
    await expect(
      db.transaction(async (tx) => {
        await tx.query(sql`INSERT INTO contract_items (name) VALUES (${"rolled-back"})`);
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    const names = (await db.many<{ name: string }>("SELECT name FROM contract_items")).map((r) => r.name);
    expect(names).toContain("committed");
    expect(names).not.toContain("rolled-back");
  });

  it("does not let other statements run inside an open transaction", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const txDone = db.transaction(async (tx) => {
      await tx.query(sql`INSERT INTO contract_items (name) VALUES (${"tx-isolated"})`);
      await gate;
      throw new Error("abort");
    });
    // A concurrent reader must never observe the uncommitted row.
    const seen = db.one<{ c: number }>(
      sql`SELECT count(*)::int AS c FROM contract_items WHERE name = ${"tx-isolated"}`,
    );
    setTimeout(release, 50);
    await expect(txDone).rejects.toThrow("abort");
    expect((await seen)?.c).toBe(0);
  });

  it("surfaces SQLSTATE codes as DbError", async () => {
    await db.query(sql`INSERT INTO contract_items (name) VALUES (${"dup"})`);
    const err = await db
      .query(sql`INSERT INTO contract_items (name) VALUES (${"dup"})`)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DbError);
    expect(isUniqueViolation(err)).toBe(true);
    const bad = await db.query("SELECT 'x'::int").catch((e: unknown) => e);
    expect((bad as DbError).code).toBe("22P02");
  });

  it("runs multi-statement scripts under an advisory lock", async () => {
    const result = await db.withAdvisoryLock(42n, async (conn) => {
      await conn.script("CREATE TABLE contract_script (x int); INSERT INTO contract_script VALUES (1), (2);");
      return conn.one<{ s: number }>("SELECT sum(x)::int AS s FROM contract_script");
    });
    expect(result?.s).toBe(3);
  });

  it("grants a try-lock to one holder at a time", async () => {
    const release = await db.tryAdvisoryLock(4242n);
    expect(release).not.toBeNull();
    if (db.kind === "postgres") {
      expect(await db.tryAdvisoryLock(4242n)).toBeNull();
    }
    await release?.();
    const again = await db.tryAdvisoryLock(4242n);
    expect(again).not.toBeNull();
    await again?.();
  });
});

describe(`nested use of the database inside a transaction (${testBackend()})`, () => {
  let db: Db;
  beforeAll(async () => {
    db = (await createTestDatabase()).db;
    await db.query("CREATE TABLE nest (name text PRIMARY KEY)");
  });
  afterAll(async () => {
    await db?.close();
  });

  it("a transaction opened from inside another completes instead of deadlocking", async () => {
    await db.transaction(async (tx) => {
      await tx.query(sql`INSERT INTO nest VALUES (${"outer"})`);
      await db.transaction(async (inner) => {
        await inner.query(sql`INSERT INTO nest VALUES (${"inner"})`);
      });
    });
    const names = (await db.many<{ name: string }>("SELECT name FROM nest ORDER BY name")).map((r) => r.name);
    expect(names).toEqual(["inner", "outer"]);
  });

  it("a failing inner transaction rolls back only its own work", async () => {
    await db.transaction(async (tx) => {
      await tx.query(sql`INSERT INTO nest VALUES (${"kept"})`);
      await db
        .transaction(async (inner) => {
          await inner.query(sql`INSERT INTO nest VALUES (${"dropped"})`);
          throw new Error("inner fails");
        })
        .catch(() => {});
    });
    const names = (await db.many<{ name: string }>("SELECT name FROM nest")).map((r) => r.name);
    expect(names).toContain("kept");
    expect(names).not.toContain("dropped");
  });
});
