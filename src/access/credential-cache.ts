import type { Db } from "../storage/db.ts";

/**
 * A short-lived, per-database cache of credential lookups (the joined credential + user +
 * profile row of a bearer token, API key or session, and the verified JWT claims), so a
 * request with a credential seen a moment ago costs no database round trip and no signature
 * check. Every check that decides a request (revoked, expired, idle, user disabled, tokens
 * issued before a user-wide revocation) still runs on the cached row at every request.
 *
 * Staleness is bounded three ways (docs/decisions/0100-access.md, "Credential cache"):
 * - In this process, every access mutation calls `accessChanged(db)` after it commits: the
 *   epoch moves on and every entry is dropped, so the next request on this server re-reads.
 *   A lookup that started before the change cannot store its (possibly old) row afterwards.
 * - Other processes (replicas, the CLI) on PostgreSQL: migration 0102's triggers NOTIFY
 *   `netmon_access` on every change that matters; the access feature LISTENs and drops the
 *   cache when one arrives. While that listening connection is down (and until it first
 *   listens) the cache is not used at all.
 * - A TTL of `CREDENTIAL_CACHE_TTL_MS` as a backstop for anything else (a change made with
 *   raw SQL on PGlite, a notification lost in flight).
 */
export const CREDENTIAL_CACHE_TTL_MS = 5_000;
const MAX_ENTRIES = 10_000;

/** The NOTIFY channel of migration 0102. */
export const ACCESS_CHANNEL = "netmon_access";

interface Entry {
  value: unknown;
  epoch: number;
  at: number;
}

export class CredentialCache {
  private epoch = 0;
  private readonly entries = new Map<string, Entry>();
  /** Healthy listeners: the cache is used only while changes made elsewhere can be heard. */
  private listening = 0;
  private attached = 0;
  private stopListening: (() => Promise<void>) | null = null;

  constructor(private readonly clock: () => number = () => performance.now()) {}

  get enabled(): boolean {
    return this.listening > 0;
  }

  /** Call before a lookup; pass the result to `set` so a lookup overtaken by a change is not stored. */
  begin(): number {
    return this.epoch;
  }

  get<T>(key: string): T | undefined {
    if (!this.enabled) return undefined;
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.epoch !== this.epoch || this.clock() - e.at >= CREDENTIAL_CACHE_TTL_MS) {
      this.entries.delete(key);
      return undefined;
    }
    return e.value as T;
  }

  set(key: string, value: unknown, startedAt: number): void {
    if (!this.enabled || startedAt !== this.epoch) return;
    if (this.entries.size >= MAX_ENTRIES && !this.entries.has(key)) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.delete(key);
    this.entries.set(key, { value, epoch: this.epoch, at: this.clock() });
  }

  /** Something access-related changed: forget everything, and refuse lookups already under way. */
  changed(): void {
    this.epoch++;
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  /** How many times the cache was dropped by a change (tests, diagnostics). */
  get changes(): number {
    return this.epoch;
  }

  /**
   * Start hearing changes made by other processes (the access feature, once per server; a
   * second server on the same Db object shares the listener). Returns the matching detach.
   */
  async attach(db: Db): Promise<() => Promise<void>> {
    this.attached++;
    if (this.attached === 1) {
      let up = false;
      this.stopListening = await db.listen(ACCESS_CHANNEL, {
        onNotify: () => this.changed(),
        onState: (listening) => {
          // Changes made while nobody listened are unknown: start from scratch either way.
          this.changed();
          if (listening !== up) this.listening += listening ? 1 : -1;
          up = listening;
        },
      });
    }
    let detached = false;
    return async () => {
      if (detached) return;
      detached = true;
      this.attached--;
      if (this.attached > 0) return;
      const stop = this.stopListening;
      this.stopListening = null;
      this.listening = 0;
      this.changed();
      await stop?.();
    };
  }
}

const CACHES = new WeakMap<Db, CredentialCache>();

/** The credential cache of this database (one per Db object, shared by the servers using it). */
export function credentialCache(db: Db): CredentialCache {
  let c = CACHES.get(db);
  if (!c) {
    c = new CredentialCache();
    CACHES.set(db, c);
  }
  return c;
}

/**
 * Every write to users, role_profiles, sessions, api_tokens, api_keys or
 * control_credentials calls this once it has committed (the `last_used_at` / `last_seen_at`
 * touches of the lookups themselves excepted), mirroring migration 0102's triggers.
 */
export function accessChanged(db: Db): void {
  CACHES.get(db)?.changed();
}

/** Run a write to the access tables and drop this process's cached lookups once it is done. */
export async function changingAccess<T>(db: Db, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } finally {
    accessChanged(db);
  }
}
