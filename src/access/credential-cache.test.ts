import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, testBackend } from "../../test/helpers/database.ts";
import type { Db } from "../storage/db.ts";
import { PostgresDb } from "../storage/postgres/client.ts";
import { ACCESS_CHANNEL, CREDENTIAL_CACHE_TTL_MS, CredentialCache } from "./credential-cache.ts";

describe(`credential cache (${testBackend()})`, () => {
  let db: Db;
  let url: string | null;
  beforeAll(async () => {
    ({ db, url } = await createTestDatabase());
  });
  afterAll(async () => {
    await db?.close();
  });

  const until = async (what: () => boolean) => {
    for (let i = 0; i < 400 && !what(); i++) await new Promise((r) => setTimeout(r, 25));
    return what();
  };

  it("serves nothing until it listens for changes, and nothing after it stops", async () => {
    const cache = new CredentialCache();
    cache.set("k", 1, cache.begin());
    expect(cache.get("k")).toBeUndefined();
    const detach = await cache.attach(db);
    expect(cache.enabled).toBe(true);
    cache.set("k", 1, cache.begin());
    expect(cache.get("k")).toBe(1);
    await detach();
    expect(cache.enabled).toBe(false);
    expect(cache.get("k")).toBeUndefined();
  });

  it("drops entries after the TTL and on every change; refuses a lookup a change overtook", async () => {
    let t = 0;
    const cache = new CredentialCache(() => t);
    const detach = await cache.attach(db);
    try {
      cache.set("a", "A", cache.begin());
      t += CREDENTIAL_CACHE_TTL_MS - 1;
      expect(cache.get("a")).toBe("A");
      t += 1;
      expect(cache.get("a")).toBeUndefined();

      cache.set("b", "B", cache.begin());
      cache.changed();
      expect(cache.get("b")).toBeUndefined();

      // A lookup that began before a change may have read the old row: it is not stored.
      const started = cache.begin();
      cache.changed();
      cache.set("c", "old row", started);
      expect(cache.get("c")).toBeUndefined();
      cache.set("c", "new row", cache.begin());
      expect(cache.get("c")).toBe("new row");
    } finally {
      await detach();
    }
  });

  it("stays bounded", async () => {
    const cache = new CredentialCache();
    const detach = await cache.attach(db);
    try {
      for (let i = 0; i < 10_050; i++) cache.set(`k${i}`, i, cache.begin());
      expect(cache.size).toBe(10_000);
      expect(cache.get("k0")).toBeUndefined();
      expect(cache.get("k10049")).toBe(10_049);
    } finally {
      await detach();
    }
  });

  it.runIf(testBackend() === "postgres")(
    "hears changes committed by other connections, and stops serving while it cannot hear them",
    async () => {
      const cache = new CredentialCache();
      const detach = await cache.attach(db);
      const other = await PostgresDb.open({ connectionString: url as string, poolSize: 1 });
      try {
        cache.set("k", 1, cache.begin());
        // A change committed elsewhere (migration 0102's triggers send exactly this).
        await other.query(`SELECT pg_notify('${ACCESS_CHANNEL}', 'api_tokens')`);
        expect(await until(() => cache.get("k") === undefined)).toBe(true);
        // Inside a transaction that rolls back, nothing is announced.
        const before = cache.changes;
        await other
          .transaction(async (tx) => {
            await tx.query("INSERT INTO users (email) VALUES ('rolled-back@example.test')");
            throw new Error("roll back");
          })
          .catch(() => {});
        await other.query("INSERT INTO users (email) VALUES ('cache@example.test')");
        expect(await until(() => cache.changes > before)).toBe(true);
        // A touch of a bookkeeping column announces nothing; any other column does.
        const heard: string[] = [];
        const stop = await db.listen(ACCESS_CHANNEL, { onNotify: (p) => heard.push(p) });
        try {
          await other.query("UPDATE users SET last_login_at = now() WHERE email = 'cache@example.test'");
          await other.query(`SELECT pg_notify('${ACCESS_CHANNEL}', 'sentinel')`);
          expect(await until(() => heard.includes("sentinel"))).toBe(true);
          await other.query("UPDATE users SET role = 'admin' WHERE email = 'cache@example.test'");
          expect(await until(() => heard.length === 2)).toBe(true);
          expect(heard).toEqual(["sentinel", "users"]);
        } finally {
          await stop();
        }

        await db.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE '%-listen'",
        );
        expect(await until(() => !cache.enabled)).toBe(true);
        cache.set("k", 2, cache.begin());
        expect(cache.get("k")).toBeUndefined();
        expect(await until(() => cache.enabled)).toBe(true);
        cache.set("k", 3, cache.begin());
        expect(cache.get("k")).toBe(3);
      } finally {
        await other.close();
        await detach();
      }
    },
  );
});
