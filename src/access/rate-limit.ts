import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import type { Redis } from "ioredis";
import type { AppContext } from "../kernel/context.ts";
import type { Db } from "../storage/db.ts";
import { isConnectionLoss } from "../storage/db-error.ts";
import { sql } from "../storage/sql.ts";
import { LeasedBudgets } from "./rate-leases.ts";

/** The request budget a route draws from (declared per route, enforced by the access hook). */
export type RateLimitScope = "api_default" | "admin" | "control" | "mcp" | "ingest" | "none";

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
  /**
   * Both of an authenticated request's checks at once, where the store can do it in one round
   * trip: look at `guard` (never recorded) and, only when it is not exhausted, `hit` the key.
   * Same answers as the two calls in that order. Optional: RateLimiter falls back to two calls.
   */
  guardedHit?(
    guard: { key: string; limit: number; windowSec: number },
    key: string,
    limit: number,
    windowSec: number,
    nowSec: number,
  ): Promise<{
    guard: { count: number; oldest: number | null; allowed: boolean };
    hit: { count: number; oldest: number | null; allowed: boolean } | null;
  }>;
  /** Whether the store answers (shown in /health); stores without a remote part are always ok. */
  health?(): { status: "ok" | "degraded"; detail?: string };
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

type GuardedRow = {
  guard_allowed: boolean;
  guard_count: number;
  guard_oldest: number | null;
  out_allowed: boolean;
  out_count: number;
  out_oldest: number | null;
};

/**
 * Budgets shared by replicas through PostgreSQL, drawn in leases (decision 0111,
 * `rate-leases.ts`): a busy key costs a round trip per lease, not per request, and the
 * replicas together still never admit more than the limit (slots are recorded before use).
 */
export class PostgresRateStore implements RateStore {
  readonly kind = "postgres";
  private readonly leases: LeasedBudgets;

  constructor(
    private readonly db: Db,
    log?: { warn: (o: object, m: string) => void },
  ) {
    this.leases = new LeasedBudgets(
      {
        take: async (key, nowSec, windowSec, limit, want, give) => {
          const row = await this.db.one<{
            out_granted: number;
            out_count: number;
            out_oldest: number | null;
          }>(
            sql`SELECT * FROM netmon_rate_limit_take(${key}, ${nowSec}, ${windowSec}, ${limit}, ${want},
              ${give?.second ?? null}::bigint, ${give?.count ?? 0})`,
          );
          if (!row) throw new Error("netmon_rate_limit_take returned no row");
          return { granted: row.out_granted, count: row.out_count, oldest: row.out_oldest };
        },
        giveBack: async (batch) => {
          await this.db.query(sql`SELECT netmon_rate_limit_give_back(
            ${batch.map((g) => g.key)}::text[], ${batch.map((g) => g.second)}::bigint[],
            ${batch.map((g) => g.count)}::int[])`);
        },
        peek: async (key, limit, windowSec, nowSec) => {
          const row = await this.db.one<{
            out_allowed: boolean;
            out_count: number;
            out_oldest: number | null;
          }>(sql`SELECT * FROM netmon_rate_limit_hit(${key}, ${nowSec}, ${windowSec}, ${limit}, false)`);
          if (!row) throw new Error("netmon_rate_limit_hit returned no row");
          return { allowed: row.out_allowed, count: row.out_count, oldest: row.out_oldest };
        },
      },
      log,
    );
  }

  /** While PostgreSQL is unreachable, budgets are counted per process (as with Redis away). */
  private readonly fallback = new MemoryRateStore();

  async hit(key: string, limit: number, windowSec: number, nowSec: number, record: boolean) {
    try {
      return record
        ? await this.leases.hit(key, limit, windowSec, nowSec)
        : await this.leases.peek(key, limit, windowSec, nowSec);
    } catch (err) {
      // A database restart must not turn every request into a 503 on its budget check: the
      // requests that need no database (telemetry into JetStream) keep working (decision 0311).
      if (isConnectionLoss(err)) return this.fallback.hit(key, limit, windowSec, nowSec, record);
      throw err;
    }
  }

  async guardedHit(
    guard: { key: string; limit: number; windowSec: number },
    key: string,
    limit: number,
    windowSec: number,
    nowSec: number,
  ) {
    const known = this.leases.peekLocal(guard.key, guard.limit, guard.windowSec, nowSec);
    if (known || this.leases.admitsLocally(key, nowSec)) {
      // The guard is looked at first (from memory, or its own round trip) and never recorded;
      // the hit comes from the lease only when the guard allows.
      const g = known ?? (await this.hit(guard.key, guard.limit, guard.windowSec, nowSec, false));
      return { guard: g, hit: g.allowed ? await this.hit(key, limit, windowSec, nowSec, true) : null };
    }
    // Neither known here: both in one round trip (migration 0108), a lease of one for the key.
    let row: GuardedRow | undefined;
    try {
      row = await this.db.one<GuardedRow>(sql`SELECT * FROM netmon_rate_limit_guarded_hit(
        ${guard.key}, ${guard.windowSec}, ${guard.limit}, ${key}, ${nowSec}, ${windowSec}, ${limit})`);
    } catch (err) {
      if (!isConnectionLoss(err)) throw err;
      const g = await this.fallback.hit(guard.key, guard.limit, guard.windowSec, nowSec, false);
      return {
        guard: g,
        hit: g.allowed ? await this.fallback.hit(key, limit, windowSec, nowSec, true) : null,
      };
    }
    if (!row) throw new Error("netmon_rate_limit_guarded_hit returned no row");
    const g = { allowed: row.guard_allowed, count: row.guard_count, oldest: row.guard_oldest };
    this.leases.remember(guard.key, g, guard.limit, guard.windowSec, nowSec);
    if (!g.allowed) return { guard: g, hit: null };
    const hit = { allowed: row.out_allowed, count: row.out_count, oldest: row.out_oldest };
    this.leases.recorded(key, nowSec, hit, limit);
    return { guard: g, hit };
  }

  async sweep(beforeSec: number) {
    this.leases.prune();
    await this.db.query(sql`DELETE FROM rate_limit_counters WHERE second <= ${beforeSec}`);
  }

  /** Gives back every unused leased slot (so other replicas can use them at once). */
  async close() {
    await this.leases.close();
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

/**
 * Redis counters, failing fast: short connect/command timeouts, no offline queue, and a
 * circuit breaker. While Redis is unreachable the breaker is open and budgets fall back to
 * this process's memory (per replica, so still bounded), one warning per state change, and
 * /health reports `degraded`; a probe every BREAKER_MS closes it again when Redis answers.
 */
const BREAKER_MS = 5000;

export class RedisRateStore implements RateStore {
  readonly kind = "redis";
  private readonly client: Redis;
  private readonly fallback = new MemoryRateStore();
  private openUntil = 0;
  private lastError: string | undefined;

  constructor(
    url: string,
    private readonly log?: { warn: (o: object, m: string) => void; info: (o: object, m: string) => void },
  ) {
    // ioredis loads only when REDIS_URL is set, not on every start (docs/decisions/0112).
    const { Redis: RedisClient } = createRequire(import.meta.url)("ioredis") as typeof import("ioredis");
    this.client = new RedisClient(url, {
      connectTimeout: 1000,
      commandTimeout: 500,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      lazyConnect: false,
      retryStrategy: (times) => Math.min(times * 500, BREAKER_MS),
    });
    this.client.on("error", (err: Error) => {
      // Connection errors surface as an open breaker; never crash the process.
      this.lastError = err.message;
    });
  }

  private trip(err: unknown): void {
    const wasClosed = this.openUntil === 0;
    this.openUntil = Date.now() + BREAKER_MS;
    this.lastError = (err as Error)?.message ?? String(err);
    if (wasClosed)
      this.log?.warn(
        { err: this.lastError },
        "redis unreachable: request budgets fall back to this process's memory until it answers",
      );
  }

  async hit(key: string, limit: number, windowSec: number, nowSec: number, record: boolean) {
    if (this.openUntil > Date.now()) return this.fallback.hit(key, limit, windowSec, nowSec, record);
    try {
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
      if (this.openUntil !== 0) {
        this.openUntil = 0;
        this.log?.info({}, "redis answers again: request budgets are shared through it");
      }
      return { allowed: res[0] === 1, count: res[1], oldest: res[2] < 0 ? null : res[2] };
    } catch (err) {
      this.trip(err);
      return this.fallback.hit(key, limit, windowSec, nowSec, record);
    }
  }

  health(): { status: "ok" | "degraded"; detail?: string } {
    return this.openUntil === 0
      ? { status: "ok" }
      : {
          status: "degraded",
          detail: `redis unreachable (${this.lastError ?? "no answer"}); budgets per process`,
        };
  }

  async sweep(beforeSec: number) {
    await this.fallback.sweep(beforeSec);
  }

  async close() {
    this.client.disconnect();
  }
}

export function createRateStore(ctx: AppContext): RateStore {
  if (ctx.config.redisUrl) return new RedisRateStore(ctx.config.redisUrl, ctx.log);
  if (ctx.db.kind === "postgres") return new PostgresRateStore(ctx.db, ctx.log);
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

  /**
   * `peek(guard…)` and, only when that allows, `consume(bucket…)` — in one round trip where
   * the store can (PostgreSQL). `decision` is null when the guard refused.
   */
  async consumeGuarded(
    guardBucket: string,
    guardSubject: string,
    guardBudget: Budget,
    bucket: string,
    subject: string,
    budget: Budget,
  ): Promise<{ guard: RateDecision; decision: RateDecision | null }> {
    if (!this.store.guardedHit) {
      const guard = await this.peek(guardBucket, guardSubject, guardBudget);
      return { guard, decision: guard.allowed ? await this.consume(bucket, subject, budget) : null };
    }
    const nowSec = Math.floor(this.now().getTime() / 1000);
    const r = await this.store.guardedHit(
      {
        key: `${guardBucket}:${guardSubject}`,
        limit: guardBudget.requests,
        windowSec: guardBudget.windowSeconds,
      },
      `${bucket}:${subject}`,
      budget.requests,
      budget.windowSeconds,
      nowSec,
    );
    return {
      guard: this.decision(r.guard, guardBudget, nowSec),
      decision: r.hit ? this.decision(r.hit, budget, nowSec) : null,
    };
  }

  private decision(
    r: { count: number; oldest: number | null; allowed: boolean },
    budget: Budget,
    nowSec: number,
  ): RateDecision {
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
