import { createHash } from "node:crypto";
import type { AppContext } from "../kernel/context.ts";
import type { Actor } from "./actor.ts";

/**
 * Verified credentials kept in memory (issue 14), so a request with a known bearer token, API
 * key or session cookie needs no credential lookup. Keyed by a SHA-256 of the presented
 * credential (never the credential itself); at most NETMON_CREDENTIAL_CACHE_ENTRIES entries
 * (least recently used evicted first), each at most NETMON_CREDENTIAL_CACHE_SECONDS old.
 *
 * Invalidation: migration 0107's triggers raise NOTIFY netmon_credentials on every change to
 * users, role profiles, API tokens, API keys, sessions and control-plane credentials (not on
 * the last-use touches), with the user id or '*'. Every replica LISTENs on a connection of its
 * own and evicts that user's entries (or all). On PGlite the notification reaches this process
 * before the writing statement returns; on PostgreSQL the revocation paths of this process
 * also evict at once (`invalidateCredentialCache`), and other replicas within the NOTIFY's
 * delivery. While the LISTEN connection is down nothing is served from the cache (and nothing
 * is stored): every request looks its credential up, as without a cache, until it is back.
 *
 * Per-entry expiry (`expiresAt`: the credential's own, checked against ctx.now() on every hit)
 * is honoured exactly; a session's idle timeout is checked against the last touch this process
 * knows of (older than the database's, so at worst the lookup is made again).
 */
export const CREDENTIALS_CHANNEL = "netmon_credentials";

export interface CachedCredential {
  actor: Actor;
  /** The owner user's id; null for control-plane credentials (evicted by '*' only). */
  userId: string | null;
  /** When the credential stops being valid (ctx.now() clock); null: never. */
  expiresAt: Date | null;
  /** Last recorded use (last_used_at / last_seen_at), ms on the ctx.now() clock. */
  lastUsed: number;
}

interface Entry extends CachedCredential {
  storedAt: number;
  secret: Buffer;
}

const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 5_000;

export class CredentialCache {
  private readonly entries = new Map<string, Entry>();
  private readonly users = new Map<string, { row: Record<string, unknown>; storedAt: number }>();
  /** Bumped by every eviction: a lookup started before one must not store its result. */
  private gen = 0;
  private listening = false;
  private stopped = true;
  private stopListen: (() => Promise<void>) | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs = RECONNECT_MIN_MS;
  private readonly maxAgeMs: number;
  private readonly maxEntries: number;
  /** Counters for tests and the bench. */
  readonly stats = { hits: 0, misses: 0, evictions: 0, notifications: 0 };

  constructor(private readonly ctx: AppContext) {
    this.maxAgeMs = ctx.config.credentialCache.seconds * 1000;
    this.maxEntries = ctx.config.credentialCache.entries;
  }

  /** Whether entries are served and stored now (listening, and not turned off). */
  get active(): boolean {
    return this.listening && this.maxAgeMs > 0;
  }

  get generation(): number {
    return this.gen;
  }

  /** Listen for invalidations; the cache serves nothing until the LISTEN is in place. */
  async start(): Promise<void> {
    if (this.maxAgeMs <= 0 || !this.stopped) return;
    this.stopped = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.listening = false;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const stop = this.stopListen;
    this.stopListen = null;
    this.clear();
    await stop?.().catch(() => {});
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    try {
      const stop = await this.ctx.db.listen(
        CREDENTIALS_CHANNEL,
        (payload) => this.onNotify(payload),
        (err) => this.onLost(err),
      );
      if (this.stopped) {
        await stop().catch(() => {});
        return;
      }
      this.stopListen = stop;
      // Whatever changed while nobody listened: start empty.
      this.clear();
      this.listening = true;
      if (this.retryMs > RECONNECT_MIN_MS) {
        this.ctx.log.info({}, "credential cache: invalidation listener back; cache in use again");
      }
      this.retryMs = RECONNECT_MIN_MS;
    } catch (err) {
      this.onLost(err as Error);
    }
  }

  private onLost(err: Error): void {
    const was = this.listening;
    this.listening = false;
    this.stopListen = null;
    this.clear();
    if (this.stopped) return;
    if (was) {
      this.ctx.log.warn(
        { err },
        "credential cache: invalidation listener lost; every request looks its credential up until it is back",
      );
    }
    if (this.retryTimer) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, RECONNECT_MAX_MS);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect();
    }, delay);
    this.retryTimer.unref();
  }

  private onNotify(payload: string): void {
    this.stats.notifications++;
    if (payload === "*" || payload === "") this.clear();
    else this.evictUser(payload);
  }

  /** SHA-256 of the presented credential, per kind (the raw secret is never kept). */
  keyOf(kind: string, credential: string): string {
    return createHash("sha256").update(kind).update("\0").update(credential).digest("base64url");
  }

  /** A live entry (expired ones are dropped and reported as a miss). */
  get(key: string): CachedCredential | undefined {
    if (!this.active) return undefined;
    const e = this.entries.get(key);
    if (!e) {
      this.stats.misses++;
      return undefined;
    }
    if (
      performance.now() - e.storedAt > this.maxAgeMs ||
      e.secret !== this.ctx.secretKey ||
      (e.expiresAt && e.expiresAt.getTime() <= this.ctx.now().getTime())
    ) {
      this.entries.delete(key);
      this.stats.misses++;
      return undefined;
    }
    // Map order is the eviction order: a hit moves the entry to the end.
    this.entries.delete(key);
    this.entries.set(key, e);
    this.stats.hits++;
    return e;
  }

  /** Whether `key` has a live entry (no statistics, no LRU move). */
  has(key: string): boolean {
    if (!this.active) return false;
    const e = this.entries.get(key);
    return (
      e !== undefined &&
      performance.now() - e.storedAt <= this.maxAgeMs &&
      e.secret === this.ctx.secretKey &&
      !(e.expiresAt && e.expiresAt.getTime() <= this.ctx.now().getTime())
    );
  }

  /** Store a verified credential, unless an eviction happened since `generation` was read. */
  set(key: string, value: CachedCredential, generation: number): void {
    if (!this.active || generation !== this.gen) return;
    this.entries.delete(key);
    this.entries.set(key, { ...value, storedAt: performance.now(), secret: this.ctx.secretKey });
    while (this.entries.size > this.maxEntries) {
      this.entries.delete(this.entries.keys().next().value as string);
    }
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  /** A user's record (as `users` holds it), kept with the same invalidation. */
  getUser<T extends Record<string, unknown>>(id: string): T | undefined {
    if (!this.active) return undefined;
    const e = this.users.get(id);
    if (!e) return undefined;
    if (performance.now() - e.storedAt > this.maxAgeMs) {
      this.users.delete(id);
      return undefined;
    }
    return e.row as T;
  }

  setUser(id: string, row: Record<string, unknown>, generation: number): void {
    if (!this.active || generation !== this.gen) return;
    this.users.delete(id);
    this.users.set(id, { row, storedAt: performance.now() });
    while (this.users.size > this.maxEntries) {
      this.users.delete(this.users.keys().next().value as string);
    }
  }

  evictUser(userId: string): void {
    this.gen++;
    this.stats.evictions++;
    this.users.delete(userId);
    for (const [k, e] of this.entries) if (e.userId === userId) this.entries.delete(k);
  }

  clear(): void {
    this.gen++;
    this.stats.evictions++;
    this.entries.clear();
    this.users.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}

const CACHES = new WeakMap<AppContext, CredentialCache>();

/** This context's credential cache (serves nothing until `start()`ed by the access feature). */
export function credentialCache(ctx: AppContext): CredentialCache {
  let c = CACHES.get(ctx);
  if (!c) {
    c = new CredentialCache(ctx);
    CACHES.set(ctx, c);
  }
  return c;
}

/** Evict everything at once in this process (a revocation made here: no wait for the NOTIFY). */
export function invalidateCredentialCache(ctx: AppContext, userId?: string): void {
  const c = CACHES.get(ctx);
  if (!c) return;
  if (userId) c.evictUser(userId);
  else c.clear();
}

/**
 * Record a credential's use off the request path: the UPDATE runs in the background and a
 * failure is logged, never answered (the touch is bookkeeping, already throttled per minute).
 */
export function touchInBackground(ctx: AppContext, what: string, run: () => Promise<unknown>): void {
  run().catch((err) => ctx.log.debug({ err, what }, "credential last-use update failed"));
}
