import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Db, Queryable } from "../../src/storage/db.ts";
import { DbError, isUniqueViolation } from "../../src/storage/db-error.ts";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
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

describe(`repeated statements (server-side prepared on PostgreSQL) (${testBackend()})`, () => {
  let db: Db;
  let url: string | null;
  beforeAll(async () => {
    ({ db, url } = await createTestDatabase());
    await db.query("CREATE TABLE prep (id integer PRIMARY KEY, name text NOT NULL UNIQUE)");
  });
  afterAll(async () => {
    await db?.close();
  });

  it("answers the same through the pool and inside transactions, across errors", async () => {
    for (let i = 1; i <= 6; i++) await db.query(sql`INSERT INTO prep (id, name) VALUES (${i}, ${`n${i}`})`);
    const read = (q: Queryable, id: number) =>
      q.one<{ name: string }>(sql`SELECT name FROM prep WHERE id = ${id}`);
    for (let i = 1; i <= 6; i++) expect((await read(db, i))?.name).toBe(`n${i}`);
    // A statement error (here a unique violation of a prepared INSERT) leaves the statement usable.
    const dup = await db.query(sql`INSERT INTO prep (id, name) VALUES (${7}, ${"n1"})`).catch((e) => e);
    expect(isUniqueViolation(dup)).toBe(true);
    await db.query(sql`INSERT INTO prep (id, name) VALUES (${7}, ${"n7"})`);
    await db
      .transaction(async (tx) => {
        expect((await read(tx, 7))?.name).toBe("n7");
        await tx.query(sql`INSERT INTO prep (id, name) VALUES (${8}, ${"n8"})`);
        expect((await read(tx, 8))?.name).toBe("n8");
        throw new Error("roll back");
      })
      .catch(() => {});
    expect(await read(db, 8)).toBeUndefined();
    await db.transaction(async (tx) => {
      await tx.query(sql`INSERT INTO prep (id, name) VALUES (${8}, ${"n8"})`);
    });
    expect((await read(db, 8))?.name).toBe("n8");
  });

  it("keeps answering after a migration changes the shape of a table read with *", async () => {
    const all = () => db.many(sql`SELECT * FROM prep WHERE id <= ${2} ORDER BY id`);
    // Enough uses that every pooled connection has the statement prepared.
    await Promise.all(Array.from({ length: 20 }, all));
    await db.query("ALTER TABLE prep ADD COLUMN extra text DEFAULT 'x'");
    const rows = await Promise.all(Array.from({ length: 20 }, all));
    for (const r of rows)
      expect(r).toEqual([
        { id: 1, name: "n1", extra: "x" },
        { id: 2, name: "n2", extra: "x" },
      ]);
  });

  it.runIf(testBackend() === "postgres")(
    "prepares a text once it repeats, at most N per connection",
    async () => {
      const one = await PostgresDb.open({
        connectionString: url as string,
        poolSize: 1,
        preparedStatements: 3,
      });
      try {
        const prepared = async () =>
          (
            await one.many<{ statement: string }>(
              "SELECT statement FROM pg_prepared_statements WHERE name LIKE 'netmon_%' ORDER BY statement",
            )
          ).map((r) => r.statement);
        await one.one(sql`SELECT name FROM prep WHERE id = ${1}`);
        expect(await prepared()).toEqual([]); // seen once: not prepared
        await one.one(sql`SELECT name FROM prep WHERE id = ${2}`);
        expect(await prepared()).toEqual(["SELECT name FROM prep WHERE id = $1"]);
        for (const col of ["id", "name", "id + 1", "length(name)", "upper(name)"]) {
          for (let i = 0; i < 3; i++) await one.one(`SELECT ${col} FROM prep WHERE id = $1`, [1]);
        }
        expect((await prepared()).length).toBe(3);
        // Beyond the cap statements still run (unnamed).
        expect(await one.one("SELECT upper(name) AS u FROM prep WHERE id = $1", [3])).toEqual({ u: "N3" });
      } finally {
        await one.close();
      }
    },
  );

  it.runIf(testBackend() === "postgres")(
    "recovers when a pooler deallocated the statements behind its back",
    async () => {
      const one = await PostgresDb.open({ connectionString: url as string, poolSize: 1 });
      try {
        for (let i = 0; i < 3; i++) await one.one(sql`SELECT name FROM prep WHERE id = ${1}`);
        await one.query("DEALLOCATE ALL"); // what a pooler's DISCARD ALL does
        expect(await one.one(sql`SELECT name FROM prep WHERE id = ${1}`)).toEqual({ name: "n1" });
        expect(await one.one(sql`SELECT name FROM prep WHERE id = ${2}`)).toEqual({ name: "n2" });
      } finally {
        await one.close();
      }
    },
  );

  it.runIf(testBackend() === "postgres")("can be turned off", async () => {
    const off = await PostgresDb.open({
      connectionString: url as string,
      poolSize: 1,
      preparedStatements: 0,
    });
    try {
      for (let i = 0; i < 5; i++) await off.one(sql`SELECT name FROM prep WHERE id = ${1}`);
      const n = await off.one<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'netmon_%'",
      );
      expect(n?.n).toBe(0);
    } finally {
      await off.close();
    }
  });
});

describe(`listen (${testBackend()})`, () => {
  let db: Db;
  let url: string | null;
  beforeAll(async () => {
    ({ db, url } = await createTestDatabase());
  });
  afterAll(async () => {
    await db?.close();
  });

  const until = async (what: () => boolean) => {
    for (let i = 0; i < 200 && !what(); i++) await new Promise((r) => setTimeout(r, 25));
    return what();
  };

  it("reports listening, and hears NOTIFY from another connection (PostgreSQL)", async () => {
    const heard: string[] = [];
    const states: boolean[] = [];
    const stop = await db.listen("contract_channel", {
      onNotify: (p) => heard.push(p),
      onState: (s) => states.push(s),
    });
    try {
      expect(states).toEqual([true]);
      if (db.kind !== "postgres") return;
      const other = await PostgresDb.open({ connectionString: url as string, poolSize: 1 });
      try {
        await other.query("SELECT pg_notify('contract_channel', 'hello')");
        await other.query("SELECT pg_notify('another_channel', 'not for us')");
      } finally {
        await other.close();
      }
      expect(await until(() => heard.length > 0)).toBe(true);
      expect(heard).toEqual(["hello"]);
    } finally {
      await stop();
    }
  });

  it.runIf(testBackend() === "postgres")("reconnects after losing its connection", async () => {
    const heard: string[] = [];
    const states: boolean[] = [];
    const stop = await db.listen("contract_reconnect", {
      onNotify: (p) => heard.push(p),
      onState: (s) => states.push(s),
    });
    try {
      await db.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE '%-listen'",
      );
      expect(await until(() => states.length >= 3)).toBe(true);
      expect(states).toEqual([true, false, true]);
      await db.query("SELECT pg_notify('contract_reconnect', 'again')");
      expect(await until(() => heard.length > 0)).toBe(true);
    } finally {
      await stop();
    }
  });
});
