import { describe, expect, it } from "vitest";
import { type GiveBack, type LeaseBackend, LeasedBudgets, PRUNE_AT } from "./rate-leases.ts";

/** A store in memory with the take/give-back semantics of migration 0109, recording calls. */
function fakeBackend() {
  const hits = new Map<string, number>(); // `${key}@${second}` → hits
  const takes: { want: number; granted: number }[] = [];
  const givenBack: GiveBack[] = [];
  let release: (() => void) | null = null;
  let gate: Promise<void> | null = null;
  const count = (key: string, now: number, window: number) => {
    let n = 0;
    let oldest: number | null = null;
    for (const [k, h] of hits) {
      const [kk, s] = k.split("@") as [string, string];
      if (kk === key && Number(s) > now - window && h > 0) {
        n += h;
        oldest = oldest === null ? Number(s) : Math.min(oldest, Number(s));
      }
    }
    return { n, oldest };
  };
  const backend: LeaseBackend = {
    async take(key, now, window, limit, want, give) {
      if (gate) await gate;
      if (give) hits.set(`${key}@${give.second}`, (hits.get(`${key}@${give.second}`) ?? 0) - give.count);
      const { n, oldest } = count(key, now, window);
      const granted = Math.max(0, Math.min(want, limit - n));
      hits.set(`${key}@${now}`, (hits.get(`${key}@${now}`) ?? 0) + granted);
      takes.push({ want, granted });
      return { granted, count: n + granted, oldest: granted > 0 ? (oldest ?? now) : oldest };
    },
    async giveBack(batch) {
      givenBack.push(...batch);
      for (const g of batch)
        hits.set(`${g.key}@${g.second}`, (hits.get(`${g.key}@${g.second}`) ?? 0) - g.count);
    },
    async peek(key, limit, window, now) {
      const { n, oldest } = count(key, now, window);
      return { allowed: n < limit, count: n, oldest };
    },
  };
  return {
    backend,
    takes,
    givenBack,
    recorded: (key: string) =>
      [...hits].filter(([k]) => k.startsWith(`${key}@`)).reduce((a, [, h]) => a + h, 0),
    hold() {
      gate = new Promise((r) => {
        release = () => {
          gate = null;
          r();
        };
      });
    },
    release: () => release?.(),
  };
}

describe("leased budgets", () => {
  it("a quiet key takes one slot per request; a busy one doubles its lease up to limit/16", async () => {
    const f = fakeBackend();
    const l = new LeasedBudgets(f.backend, undefined, () => 0);
    const r1 = await l.hit("k", 160, 60, 100);
    expect(r1).toEqual({ allowed: true, count: 1, oldest: 100 });
    for (let i = 0; i < 30; i++) await l.hit("k", 160, 60, 100);
    expect(f.takes.map((t) => t.want)).toEqual([1, 2, 4, 8, 10, 10]);
    await l.close();
  });

  it("concurrent requests wait on one take that asks for all of them", async () => {
    const f = fakeBackend();
    const l = new LeasedBudgets(f.backend, undefined, () => 0);
    f.hold();
    const all = Array.from({ length: 5 }, () => l.hit("k", 1000, 60, 100));
    f.release();
    const res = await Promise.all(all);
    // The first take started alone; the four that queued behind it share the next one.
    expect(f.takes).toEqual([
      { want: 1, granted: 1 },
      { want: 4, granted: 4 },
    ]);
    expect(res.map((r) => r.count).sort()).toEqual([1, 2, 3, 4, 5]);
    await l.close();
  });

  it("counts reported exclude unused slots; ended seconds give them back; refusals stay exact", async () => {
    const f = fakeBackend();
    const l = new LeasedBudgets(f.backend, undefined, () => 0);
    await l.hit("k", 64, 60, 100);
    const r = await l.hit("k", 64, 60, 100); // second take: 2 slots, one used
    expect(r.count).toBe(2);
    expect(f.recorded("k")).toBe(3);
    expect(await l.peek("k", 64, 60, 100)).toMatchObject({ allowed: true, count: 2 });
    await l.hit("k", 64, 60, 101); // the take of 101 gives back 100's unused slot
    expect(f.recorded("k")).toBe(3);
    // Full: refusals within the second without a round trip, retry from the oldest.
    const small = new LeasedBudgets(f.backend, undefined, () => 0);
    await small.hit("s", 1, 60, 200);
    const before = f.takes.length;
    expect(await small.hit("s", 1, 60, 200)).toEqual({ allowed: false, count: 1, oldest: 200 });
    expect(await small.hit("s", 1, 60, 200)).toEqual({ allowed: false, count: 1, oldest: 200 });
    expect(f.takes.length).toBe(before);
    await l.close();
    await small.close();
  });

  it("a spray of distinct keys is pruned as it grows, not only at the sweep", async () => {
    // Every take granted: this is about the map of key states, not the store.
    const grant: LeaseBackend = {
      take: async (_k, now, _w, _l, want) => ({ granted: want, count: want, oldest: now }),
      giveBack: async () => {},
      peek: async () => ({ allowed: true, count: 0, oldest: null }),
    };
    let ms = 100_000;
    const l = new LeasedBudgets(grant, undefined, () => ms);
    // Each key is used once in its own (long past) second, as one request per client address.
    for (let i = 0; i < PRUNE_AT * 3; i++) {
      if (i % 1000 === 0) ms += 1000;
      await l.hit(`ip-${i}`, 100, 60, Math.floor(ms / 1000));
    }
    expect(l.keyCount).toBeLessThanOrEqual(PRUNE_AT + 1000);
    await l.close();
  });
});
