import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import type { AppContext } from "../kernel/context.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";

/**
 * Sliding-window request budgets (second resolution), as the original rate limiter: count the
 * hits of a key in (now − window, now]; when the count has reached the limit the request is
 * denied and NOT recorded, with retry_after = max(1, oldest + window − now).
 *
 * Stores: in memory (one process, the embedded PGlite default), the PostgreSQL table
 * `rate_limit_counters` (replicas on one database share one budget), or Redis (REDIS_URL).
 */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  /** Hits in the window after this request (or at denial). */
  count: number;
  remaining: number;
  /** Epoch seconds: now + window (as the original's x-ratelimit-reset). */
  reset: number;
  /** Seconds until a slot frees; set when denied. */
  retryAfter: number;
}

export interface RateStore {
  readonly kind: "memory" | "postgres" | "redis";
  /**
   * Count the key's hits in the window ending at `nowSec`; if below `limit` and `record`,
   * record one hit. Returns the count (after recording) and the oldest hit's second.
   */
  hit(
    key: string,
    limit: number,
    windowSec: number,
    nowSec: number,
    record: boolean,
  ): Promise<{ count: number; oldest: number | null; allowed: boolean }>;
  /** Drop data older than `beforeSec` (housekeeping). */
  sweep(beforeSec: number): Promise<void>;
  close(): Promise<void>;
}

export class MemoryRateStore implements RateStore {
  readonly kind = "memory";
  private readonly hits = new Map<string, number[]>();

  async hit(key: string, limit: number, windowSec: number, nowSec: number, record: boolean) {
    const floor = nowSec - windowSec;
    let list = this.hits.get(key) ?? [];
    if (list.length > 0 && (list[0] as number) <= floor) list = list.filter((s) => s > floor);
    const count = list.length;
    const oldest = list[0] ?? null;
    if (count >= limit) {
      this.hits.set(key, list);
      return { count, oldest, allowed: false };
    }
    if (record) list.push(nowSec);
    if (list.length > 0) this.hits.set(key, list);
    else this.hits.delete(key);
    return { count: list.length, oldest: list[0] ?? null, allowed: true };
  }

  async sweep(beforeSec: number) {
    for (const [key, list] of this.hits) {
      const kept = list.filter((s) => s > beforeSec);
      if (kept.length === 0) this.hits.delete(key);
      else if (kept.length !== list.length) this.hits.set(key, kept);
    }
  }

  async close() {
    this.hits.clear();
  }
}

/** Most hits one lease takes ahead of demand (see PostgresRateStore). */
export const MAX_LEASE = 100;
/** A lease ahead of demand never exceeds this share of a budget (1/16), so leases only matter for large budgets. */
const LEASE_SHARE = 16;

interface KeyState {
  /** Second of the current lease (its hits are recorded at this second), or -1. */
  second: number;
  /** Leased hits not handed out yet. */
  left: number;
  /** The key's window count when the lease was taken, the whole lease included. */
  count: number;
  oldest: number | null;
  limit: number;
  windowSec: number;
  /** performance.now() when the lease was taken (unused hits go back after a second). */
  takenAt: number;
  /** Hits handed out in `servedSecond`, and in the second before it. */
  servedSecond: number;
  served: number;
  servedBefore: number;
  /** Requests waiting for the call in flight. */
  waiting: number;
  pending: Promise<void> | null;
}

/**
 * The PostgreSQL store: replicas on one database share one budget per key, and never hand out
 * more than it. Each replica takes hits in leases: one call of `netmon_rate_limit_take`
 * (migration 0104) records several hits at once at the current second — as many as this
 * replica handed out for the key in the previous second (at most MAX_LEASE and 1/16 of the
 * budget), or as many requests as are waiting — and hands them out locally until the second
 * ends. Hits leased but not handed out are given back within about a second. So a busy key
 * costs one round trip per second or so instead of one per request; a key used about once a
 * second or less, or with a budget under 32, still costs one call per hit (exactly as before).
 *
 * What this changes: the count in the table can include up to one lease of hits this replica
 * took but has not used yet (given back within about a second), so another replica may deny a
 * request that many hits early; `x-ratelimit-remaining` counts this replica's unused lease as
 * unused (exact on one replica, as of the lease on several).
 */
export class PostgresRateStore implements RateStore {
  readonly kind = "postgres";
  private readonly keys = new Map<string, KeyState>();
  private readonly timer: NodeJS.Timeout;
  /** Database calls made (tests, diagnostics). */
  calls = 0;

  constructor(
    private readonly db: Db,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.timer = setInterval(() => {
      this.giveBack(false).catch(() => {});
    }, 1000);
    this.timer.unref();
  }

  async hit(key: string, limit: number, windowSec: number, nowSec: number, record: boolean) {
    if (!record) {
      // A look: the table's count (which includes unused leased hits: conservative).
      const r = await this.take(key, nowSec, windowSec, limit, 0, null);
      return { allowed: r.count < limit, count: r.count, oldest: r.oldest };
    }
    let st = this.keys.get(key);
    if (!st) {
      st = {
        second: -1,
        left: 0,
        count: 0,
        oldest: null,
        limit,
        windowSec,
        takenAt: this.clock(),
        servedSecond: -1,
        served: 0,
        servedBefore: 0,
        waiting: 0,
        pending: null,
      };
      this.keys.set(key, st);
    }
    for (;;) {
      if (st.second === nowSec && st.left > 0 && st.limit === limit && st.windowSec === windowSec) {
        st.left--;
        this.served(st, nowSec);
        return { allowed: true, count: st.count - st.left, oldest: st.oldest };
      }
      if (st.pending) {
        st.waiting++;
        try {
          await st.pending;
        } finally {
          st.waiting--;
        }
        continue;
      }
      // Take a lease. Hits left of a lease we cannot use (an earlier second, another budget)
      // go back in the same call; nobody hands them out meanwhile.
      const state = st;
      const want = this.leaseSize(state, nowSec, limit);
      const back = state.left > 0 ? { second: state.second, hits: state.left } : null;
      state.left = 0;
      let denied: { count: number; oldest: number | null } | null = null;
      state.pending = (async () => {
        const r = await this.take(key, nowSec, windowSec, limit, want, back);
        if (r.granted === 0) {
          denied = { count: r.count, oldest: r.oldest };
          return;
        }
        state.second = nowSec;
        state.left = r.granted;
        state.count = r.count;
        state.oldest = r.oldest;
        state.limit = limit;
        state.windowSec = windowSec;
        state.takenAt = this.clock();
      })().finally(() => {
        state.pending = null;
      });
      await state.pending;
      if (denied) {
        const d = denied as { count: number; oldest: number | null };
        return { allowed: false, count: d.count, oldest: d.oldest };
      }
    }
  }

  private served(st: KeyState, nowSec: number): void {
    if (st.servedSecond !== nowSec) {
      st.servedBefore = st.servedSecond === nowSec - 1 ? st.served : 0;
      st.servedSecond = nowSec;
      st.served = 0;
    }
    st.served++;
  }

  /** Hits to ask for: the requests waiting now, or what last second's demand says is still to come. */
  private leaseSize(st: KeyState, nowSec: number, limit: number): number {
    const lastSecond =
      st.servedSecond === nowSec ? st.servedBefore : st.servedSecond === nowSec - 1 ? st.served : 0;
    const soFar = st.servedSecond === nowSec ? st.served : 0;
    const ahead = Math.min(MAX_LEASE, Math.floor(limit / LEASE_SHARE), lastSecond - soFar);
    return Math.max(1, st.waiting + 1, ahead);
  }

  private async take(
    key: string,
    nowSec: number,
    windowSec: number,
    limit: number,
    want: number,
    back: { second: number; hits: number } | null,
  ): Promise<{ granted: number; count: number; oldest: number | null }> {
    // One round trip: lock, give back, expire, count and record happen inside
    // netmon_rate_limit_take (migration 0104) under a per-key advisory lock.
    this.calls++;
    const row = await this.db.one<{ out_granted: number; out_count: number; out_oldest: number | null }>(
      sql`SELECT * FROM netmon_rate_limit_take(${key}, ${nowSec}, ${windowSec}, ${limit}, ${want},
                                                ${back?.second ?? 0}, ${back?.hits ?? 0})`,
    );
    if (!row) throw new Error("netmon_rate_limit_take returned no row");
    return { granted: row.out_granted, count: row.out_count, oldest: row.out_oldest };
  }

  /**
   * Give back leased hits not handed out: those older than a second (`all` false, every
   * second), or all of them (on close). Also forgets keys idle for a while.
   */
  async giveBack(all: boolean): Promise<void> {
    const now = this.clock();
    for (const [key, st] of this.keys) {
      if (st.pending) continue;
      if (st.left > 0 && (all || now - st.takenAt >= 1000)) {
        const back = { second: st.second, hits: st.left };
        st.left = 0;
        st.pending = this.take(key, st.second, st.windowSec, st.limit, 0, back)
          .then(() => {})
          .catch(() => {})
          .finally(() => {
            st.pending = null;
          });
        await st.pending;
      } else if (st.left === 0 && st.waiting === 0 && now - st.takenAt >= 10_000) {
        this.keys.delete(key);
      }
    }
  }

  async sweep(beforeSec: number) {
    await this.db.query(sql`DELETE FROM rate_limit_counters WHERE second <= ${beforeSec}`);
  }

  async close() {
    clearInterval(this.timer);
    await this.giveBack(true).catch(() => {});
  }
}

const REDIS_SCRIPT = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
local oldest = -1
if first[2] then oldest = tonumber(first[2]) end
if count >= limit then return {0, count, oldest} end
if ARGV[4] == '1' then
  redis.call('ZADD', key, now, ARGV[5])
  redis.call('EXPIRE', key, window + 1)
  count = count + 1
  if oldest < 0 then oldest = now end
end
return {1, count, oldest}
`;

export class RedisRateStore implements RateStore {
  readonly kind = "redis";
  private readonly client: Redis;
  constructor(url: string) {
    this.client = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: false });
    this.client.on("error", () => {
      // Connection errors surface on the commands that fail; don't crash the process.
    });
  }

  async hit(key: string, limit: number, windowSec: number, nowSec: number, record: boolean) {
    const res = (await this.client.eval(
      REDIS_SCRIPT,
      1,
      `netmon:rl:${key}`,
      nowSec,
      windowSec,
      limit,
      record ? "1" : "0",
      randomUUID(),
    )) as [number, number, number];
    return { allowed: res[0] === 1, count: res[1], oldest: res[2] < 0 ? null : res[2] };
  }

  async sweep() {}

  async close() {
    this.client.disconnect();
  }
}

export function createRateStore(ctx: AppContext): RateStore {
  if (ctx.config.redisUrl) return new RedisRateStore(ctx.config.redisUrl);
  if (ctx.db.kind === "postgres") return new PostgresRateStore(ctx.db);
  return new MemoryRateStore();
}

export interface Budget {
  requests: number;
  windowSeconds: number;
}

export class RateLimiter {
  constructor(
    readonly store: RateStore,
    private readonly now: () => Date,
  ) {}

  /** Check and (when allowed) record one hit. */
  async consume(bucket: string, subject: string, budget: Budget, record = true): Promise<RateDecision> {
    const nowSec = Math.floor(this.now().getTime() / 1000);
    const r = await this.store.hit(
      `${bucket}:${subject}`,
      budget.requests,
      budget.windowSeconds,
      nowSec,
      record,
    );
    return {
      allowed: r.allowed,
      limit: budget.requests,
      count: r.count,
      remaining: Math.max(0, budget.requests - r.count),
      reset: nowSec + budget.windowSeconds,
      retryAfter: r.allowed ? 0 : Math.max(1, (r.oldest ?? nowSec) + budget.windowSeconds - nowSec),
    };
  }

  /** Look without recording (e.g. per-account failed sign-ins are only recorded on failure). */
  peek(bucket: string, subject: string, budget: Budget): Promise<RateDecision> {
    return this.consume(bucket, subject, budget, false);
  }

  async sweep(maxWindowSeconds = 3600): Promise<void> {
    await this.store.sweep(Math.floor(this.now().getTime() / 1000) - maxWindowSeconds);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
