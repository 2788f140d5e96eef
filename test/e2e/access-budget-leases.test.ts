import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { PEEK_CACHE_MS } from "../../src/access/rate-leases.ts";
import { MemoryRateStore, PostgresRateStore, RateLimiter } from "../../src/access/rate-limit.ts";
import type { Db } from "../../src/storage/db.ts";
import { DbError } from "../../src/storage/db-error.ts";
import { createTestDatabase } from "../helpers/database.ts";

// The PostgreSQL budget store in leases (decision 0111). Two stores on one database stand for
// two replicas. Runs on both backends: on PGlite the same SQL functions, one connection.
describe("request budget in leases (PostgreSQL store)", { timeout: 120_000 }, () => {
  // One database for the file (an embedded one takes seconds to open); every test uses its own keys.
  let db: Db;
  beforeAll(async () => {
    db = (await createTestDatabase()).db;
  });
  afterAll(async () => {
    await db?.close();
  });
  const open: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close();
  });

  async function twoReplicas() {
    const a = new PostgresRateStore(db);
    const b = new PostgresRateStore(db);
    open.push(a, b);
    return { db, a, b };
  }

  async function recorded(db: Db, key: string): Promise<number> {
    const row = await db.one<{ n: number | null }>(
      "SELECT sum(hits)::int AS n FROM rate_limit_counters WHERE key = $1",
      [key],
    );
    return row?.n ?? 0;
  }

  it("two replicas hammered at once never admit more than the limit, and lease after the first take", async () => {
    const { a, b } = await twoReplicas();
    const takes = vi.fn();
    const realOne = db.one.bind(db);
    open.push({
      close: async () => {
        db.one = realOne;
      },
    });
    db.one = (async (q: Parameters<Db["one"]>[0], v?: readonly unknown[]) => {
      if (JSON.stringify(q).includes("netmon_rate_limit_take")) takes();
      return realOne(q, v);
    }) as Db["one"];
    const now = Math.floor(Date.now() / 1000);
    const limit = 256; // leases up to 16
    let admitted = 0;
    let requests = 0;
    for (let wave = 0; wave < 8; wave++) {
      const all = await Promise.all(
        Array.from({ length: 48 }, (_, i) => (i % 2 === 0 ? a : b).hit("race:lease", limit, 60, now, true)),
      );
      requests += all.length;
      admitted += all.filter((r) => r.allowed).length;
      expect(await recorded(db, "race:lease")).toBeGreaterThanOrEqual(admitted);
    }
    expect(admitted).toBeLessThanOrEqual(limit);
    expect(admitted).toBeGreaterThan(limit - 2 * 16); // at most one lease per replica idle
    expect(requests).toBe(384);
    // Fewer round trips than requests: single flight and growing leases.
    expect(takes.mock.calls.length).toBeGreaterThan(0);
    expect(takes.mock.calls.length).toBeLessThan(admitted / 2);
    // Closing gives back what was leased and not used: the table holds exactly the admitted.
    await a.close();
    await b.close();
    expect(await recorded(db, "race:lease")).toBe(admitted);
  });

  it("a quiet key answers exactly as the memory store (count, remaining, retry_after)", async () => {
    const { a } = await twoReplicas();
    let now = 1_700_000_000;
    const pg = new RateLimiter(a, () => new Date(now * 1000));
    const mem = new RateLimiter(new MemoryRateStore(), () => new Date(now * 1000));
    const budget = { requests: 3, windowSeconds: 60 };
    const steps = [0, 10, 10, 0, 0, 30, 0, 19, 1, 0];
    for (const step of steps) {
      now += step;
      const [x, y] = [await pg.consume("b", "quiet", budget), await mem.consume("b", "quiet", budget)];
      expect(x).toEqual(y);
      expect(await pg.peek("b", "quiet-peek", budget)).toEqual(await mem.peek("b", "quiet-peek", budget));
    }
  });

  it("slots leased and not used are given back when their second ends, for the other replica", async () => {
    const { db, a, b } = await twoReplicas();
    const now = Math.floor(Date.now() / 1000);
    const limit = 48; // leases up to 3
    await db.query("INSERT INTO rate_limit_counters (key, second, hits) VALUES ('gb:k', $1, 44)", [now - 5]);
    expect((await a.hit("gb:k", limit, 60, now, true)).count).toBe(45); // take of 1
    const second = await a.hit("gb:k", limit, 60, now, true); // ran out: take of 2, one held
    expect(second).toEqual({ allowed: true, count: 46, oldest: now - 5 }); // held slot not counted
    expect(await recorded(db, "gb:k")).toBe(47);
    expect((await b.hit("gb:k", limit, 60, now, true)).allowed).toBe(true); // 48th
    const refused = await b.hit("gb:k", limit, 60, now, true);
    expect(refused.allowed).toBe(false); // a still holds one
    // a's second ends (wall clock): its unused slot goes back in the background.
    await vi.waitFor(async () => expect(await recorded(db, "gb:k")).toBe(47), { timeout: 5000 });
    expect((await b.hit("gb:k", limit, 60, now + 1, true)).allowed).toBe(true);
    expect((await b.hit("gb:k", limit, 60, now + 1, true)).allowed).toBe(false);
  });

  it("a denial reports retry_after from the oldest hit, and is not recorded", async () => {
    const { db, a, b } = await twoReplicas();
    let now = 1_700_000_100;
    const la = new RateLimiter(a, () => new Date(now * 1000));
    const lb = new RateLimiter(b, () => new Date(now * 1000));
    const budget = { requests: 2, windowSeconds: 60 };
    expect((await la.consume("d", "k", budget)).remaining).toBe(1);
    now += 20;
    expect((await lb.consume("d", "k", budget)).remaining).toBe(0);
    now += 5;
    const denied = await la.consume("d", "k", budget);
    expect(denied).toMatchObject({ allowed: false, count: 2, remaining: 0, retryAfter: 35 });
    expect(await recorded(db, "d:k")).toBe(2);
  });

  it("a peek sees another replica's lockout within the cache bound; a local hit drops the cached answer", async () => {
    const { a, b } = await twoReplicas();
    const now = () => Math.floor(Date.now() / 1000);
    expect((await a.hit("guard:ip", 3, 60, now(), false)).allowed).toBe(true); // cached here now
    for (let i = 0; i < 3; i++) await b.hit("guard:ip", 3, 60, now(), true);
    await new Promise((r) => setTimeout(r, PEEK_CACHE_MS + 50));
    const seen = await a.hit("guard:ip", 3, 60, now(), false);
    expect(seen).toMatchObject({ allowed: false, count: 3 });

    // A hit recorded here is seen by the next peek here at once.
    expect((await a.hit("guard:own", 2, 60, now(), false)).allowed).toBe(true);
    await a.hit("guard:own", 2, 60, now(), true);
    await a.hit("guard:own", 2, 60, now(), true);
    expect((await a.hit("guard:own", 2, 60, now(), false)).allowed).toBe(false);
  });

  it("guardedHit: the guard is looked at and never recorded; the hit only when it allows", async () => {
    const { db, a, b } = await twoReplicas();
    const now = 1_700_000_200;
    const guard = { key: "g:ip", limit: 2, windowSec: 60 };
    const first = await a.guardedHit(guard, "api:ip", 10, 60, now);
    expect(first.guard).toMatchObject({ allowed: true, count: 0 });
    expect(first.hit).toMatchObject({ allowed: true, count: 1 });
    await b.hit("g:ip", 2, 60, now, true);
    await b.hit("g:ip", 2, 60, now + 1, true);
    // Another second, no cached answer for it on b: b sees the lockout and records nothing.
    const locked = await b.guardedHit(guard, "api:ip", 10, 60, now + 2);
    expect(locked.guard.allowed).toBe(false);
    expect(locked.hit).toBeNull();
    expect(await recorded(db, "api:ip")).toBe(1);
    expect(await recorded(db, "g:ip")).toBe(2);
  });

  it("falls back to per-process counting while the database is unreachable", async () => {
    const lost = new DbError("connection terminated", { code: "08006" });
    const db = {
      kind: "postgres",
      one: async () => {
        throw lost;
      },
      query: async () => {
        throw lost;
      },
    } as unknown as Db;
    const store = new PostgresRateStore(db);
    open.push(store);
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await store.hit("down:k", 2, 60, 1_700_000_300, true));
    expect(results.map((r) => r.allowed)).toEqual([true, true, false]);
    const g = await store.guardedHit(
      { key: "down:g", limit: 1, windowSec: 60 },
      "down:k2",
      5,
      60,
      1_700_000_300,
    );
    expect(g.guard.allowed).toBe(true);
    expect(g.hit?.allowed).toBe(true);
  });
});
