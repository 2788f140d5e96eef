/**
 * Leases for a shared request-budget store (decision 0111): instead of one round trip per
 * request, a replica reserves slots of a key's budget in the current second ahead of use
 * (`take`, recorded as hits at once, so every replica counts them) and admits requests from
 * them locally. Since a slot is recorded before it is used, the replicas together can never
 * admit more than the limit in a window: the store's count is always ≥ the requests admitted.
 * The price is the opposite error, bounded: slots one replica holds unused until its second
 * ends are invisible capacity for the others for that second (they are given back then).
 *
 * Pure bookkeeping over an injected backend (PostgreSQL in rate-limit.ts), so it can be tested
 * without a database.
 */

export interface Hit {
  count: number;
  oldest: number | null;
  allowed: boolean;
}

export interface TakeResult {
  granted: number;
  /** Hits in the window after the take (including the slots granted). */
  count: number;
  oldest: number | null;
}

export interface GiveBack {
  key: string;
  second: number;
  count: number;
}

export interface LeaseBackend {
  /** Reserve up to `want` slots at `nowSec` (after giving back `give`, an older second's). */
  take(
    key: string,
    nowSec: number,
    windowSec: number,
    limit: number,
    want: number,
    give: { second: number; count: number } | null,
  ): Promise<TakeResult>;
  /** Subtract unused slots from the hits of their (key, second), many keys at once. */
  giveBack(batch: readonly GiveBack[]): Promise<void>;
  /** Count without recording (the guard's look). */
  peek(key: string, limit: number, windowSec: number, nowSec: number): Promise<Hit>;
}

/**
 * How long an allowed peek (the failed-authentication guard's look) may be answered from this
 * process's memory: a lockout recorded on another replica is seen here within this time. A
 * hit recorded here on the key drops the cached answer at once.
 */
export const PEEK_CACHE_MS = 1000;

/** Leases never exceed this fraction of the limit, so little capacity can sit idle. */
const LEASE_FRACTION = 16;

interface KeyState {
  /** The second `held` slots are recorded in (they are usable in that second only). */
  second: number;
  /** Leased slots not used yet. */
  held: number;
  /** The window's count as last known, without this replica's unused slots. */
  committed: number;
  oldest: number | null;
  /** Size of the next take (adaptive: doubles while leases run out within a second). */
  size: number;
  /** The second of the last take (a second take in it means the lease ran out). */
  lastTake: number;
  /** A second in which the store reported the key full: refuse locally for the rest of it. */
  full: number;
  inflight: Promise<TakeResult> | null;
  /** Requests for this key waiting for a slot (the next take asks for at least that many). */
  pending: number;
}

interface CachedPeek {
  hit: Hit;
  /** Allowed answers: wall-clock expiry (PEEK_CACHE_MS). */
  untilMs: number;
  /** Denied answers: valid while nowSec is below this (oldest + window, the retry_after). */
  untilSec: number;
  limit: number;
  windowSec: number;
}

export interface LeaseLog {
  warn(o: object, m: string): void;
}

/** Key states kept before a new key triggers a prune of idle ones (see `state`). */
export const PRUNE_AT = 10_000;

export class LeasedBudgets {
  private readonly keys = new Map<string, KeyState>();
  private readonly peeks = new Map<string, CachedPeek>();
  private readonly peeksInflight = new Map<string, { promise: Promise<Hit>; stale: boolean }>();
  private queue: GiveBack[] = [];
  private timer: NodeJS.Timeout | null = null;
  private latestSec = 0;
  private closed = false;
  private prunedAtMs = 0;

  constructor(
    private readonly backend: LeaseBackend,
    private readonly log?: LeaseLog,
    private readonly wallMs: () => number = Date.now,
  ) {}

  /** Admit one request for `key` at `nowSec` (from the lease, or after one take). */
  async hit(key: string, limit: number, windowSec: number, nowSec: number): Promise<Hit> {
    this.invalidatePeek(key);
    this.latestSec = Math.max(this.latestSec, nowSec);
    const s = this.state(key);
    s.pending++;
    try {
      for (;;) {
        const give = this.roll(s, key, nowSec);
        if (s.held > 0) {
          if (give) this.enqueue(give);
          s.held--;
          s.committed++;
          return { allowed: true, count: s.committed, oldest: s.oldest ?? nowSec };
        }
        if (s.full === nowSec && !s.inflight) {
          if (give) this.enqueue(give);
          return { allowed: false, count: s.committed, oldest: s.oldest };
        }
        if (s.inflight) {
          if (give) this.enqueue(give);
          // Single flight: wait for the take under way (its failure is this request's too),
          // then look again.
          await s.inflight;
          continue;
        }
        await this.takeFor(s, key, limit, windowSec, nowSec, give);
      }
    } finally {
      s.pending--;
    }
  }

  /** Reserve slots for `key`; other requests for it wait on this one take. */
  private async takeFor(
    s: KeyState,
    key: string,
    limit: number,
    windowSec: number,
    nowSec: number,
    give: { second: number; count: number } | null,
  ): Promise<void> {
    const cap = Math.max(1, Math.floor(limit / LEASE_FRACTION));
    // A second take in the same second: the lease ran out, so the next one is bigger.
    if (s.lastTake === nowSec) s.size = Math.min(cap, s.size * 2);
    s.lastTake = nowSec;
    const want = Math.max(Math.min(s.size, cap), s.pending);
    const p = this.backend.take(key, nowSec, windowSec, limit, want, give);
    s.inflight = p;
    try {
      const r = await p;
      s.second = nowSec;
      s.held = r.granted;
      s.committed = r.count - r.granted;
      s.oldest = r.oldest;
      if (r.count >= limit) s.full = nowSec;
      if (r.granted > 0) this.scheduleFlush();
    } finally {
      s.inflight = null;
    }
  }

  /**
   * Look at `key` without recording, from memory when this process knows enough: its own
   * unused lease (allowed), a refusal in this second, or a cached answer (see PEEK_CACHE_MS).
   */
  async peek(key: string, limit: number, windowSec: number, nowSec: number): Promise<Hit> {
    const local = this.peekLocal(key, limit, windowSec, nowSec);
    if (local) return local;
    const running = this.peeksInflight.get(key);
    if (running) return running.promise;
    const entry = { promise: this.backend.peek(key, limit, windowSec, nowSec), stale: false };
    this.peeksInflight.set(key, entry);
    try {
      const hit = await entry.promise;
      if (!entry.stale) this.remember(key, hit, limit, windowSec, nowSec);
      return hit;
    } finally {
      if (this.peeksInflight.get(key) === entry) this.peeksInflight.delete(key);
    }
  }

  /** The answer `peek` would give without a round trip, or null when it needs one. */
  peekLocal(key: string, limit: number, windowSec: number, nowSec: number): Hit | null {
    const s = this.keys.get(key);
    if (s && s.second >= nowSec && s.held > 0) return { allowed: true, count: s.committed, oldest: s.oldest };
    if (s && s.full === nowSec && s.held === 0 && !s.inflight)
      return { allowed: false, count: s.committed, oldest: s.oldest };
    const c = this.peeks.get(key);
    if (!c || c.limit !== limit || c.windowSec !== windowSec) return null;
    if (c.hit.allowed ? this.wallMs() < c.untilMs : nowSec < c.untilSec) return c.hit;
    this.peeks.delete(key);
    return null;
  }

  /** Whether a hit on `key` at `nowSec` would be answered without a round trip of its own. */
  admitsLocally(key: string, nowSec: number): boolean {
    const s = this.keys.get(key);
    return !!s && (s.inflight !== null || (s.second >= nowSec && s.held > 0) || s.full === nowSec);
  }

  /**
   * Account for a hit the caller recorded itself in one round trip with something else (the
   * guarded hit): no lease, the answer as the store gave it. Refused only when `key` needs a take.
   */
  recorded(key: string, nowSec: number, hit: Hit, limit: number): void {
    this.invalidatePeek(key);
    this.latestSec = Math.max(this.latestSec, nowSec);
    const s = this.state(key);
    const give = this.roll(s, key, nowSec);
    if (give) this.enqueue(give);
    if (s.held === 0) s.second = nowSec; // held slots keep the second they are recorded in
    s.lastTake = nowSec;
    s.committed = hit.count;
    s.oldest = hit.oldest;
    if (!hit.allowed || hit.count >= limit) s.full = nowSec;
  }

  /** Cache a guard's answer obtained elsewhere (same rules as `peek`). */
  remember(key: string, hit: Hit, limit: number, windowSec: number, nowSec: number): void {
    this.peeks.set(key, {
      hit,
      untilMs: this.wallMs() + PEEK_CACHE_MS,
      untilSec: (hit.oldest ?? nowSec) + windowSec,
      limit,
      windowSec,
    });
  }

  /** Keys with state held now (tests, housekeeping). */
  get keyCount(): number {
    return this.keys.size;
  }

  /** Forget idle keys and expired cached peeks (housekeeping). */
  prune(): void {
    this.prunedAtMs = this.wallMs();
    const now = this.currentSec();
    for (const [key, s] of this.keys) {
      if (s.held === 0 && !s.inflight && s.pending === 0 && s.second < now - 1 && s.full < now) {
        this.keys.delete(key);
      }
    }
    const ms = this.wallMs();
    for (const [key, c] of this.peeks) if (c.hit.allowed && c.untilMs <= ms) this.peeks.delete(key);
  }

  /** Give back every unused slot (ended seconds and the current one) and stop. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await Promise.allSettled([...this.keys.values()].map((s) => s.inflight));
    for (const [key, s] of this.keys) {
      if (s.held > 0) this.queue.push({ key, second: s.second, count: s.held });
      s.held = 0;
    }
    await this.send();
    this.keys.clear();
    this.peeks.clear();
  }

  private state(key: string): KeyState {
    let s = this.keys.get(key);
    if (!s) {
      // Many distinct keys (a spray of client addresses) would otherwise pile up until the
      // next sweep: past PRUNE_AT keys, forget idle ones at most once a second.
      if (this.keys.size >= PRUNE_AT && this.wallMs() - this.prunedAtMs >= 1000) this.prune();
      // A new (or quiet) key starts with leases of one: one take per request, as before leases.
      s = {
        second: 0,
        held: 0,
        committed: 0,
        oldest: null,
        size: 1,
        lastTake: 0,
        full: 0,
        inflight: null,
        pending: 0,
      };
      this.keys.set(key, s);
    }
    return s;
  }

  /**
   * The key's second moved on: its unused slots (usable only in their own second) are to be
   * given back, and the lease shrinks when slots were left over (it was bigger than needed).
   */
  private roll(s: KeyState, key: string, nowSec: number): GiveBack | null {
    // A request stamped with an earlier second than the lease's (it raced the boundary) may
    // use the later slots: a hit recorded later than it happened stays in the window longer.
    if (s.second >= nowSec || s.inflight) return null;
    let give: GiveBack | null = null;
    if (s.held > 0) {
      give = { key, second: s.second, count: s.held };
      s.size = Math.max(1, Math.floor(s.size / 2));
    }
    s.held = 0;
    s.second = nowSec;
    return give;
  }

  private invalidatePeek(key: string): void {
    this.peeks.delete(key);
    const running = this.peeksInflight.get(key);
    if (running) running.stale = true;
  }

  private enqueue(g: GiveBack): void {
    this.queue.push(g);
    this.scheduleFlush();
  }

  private currentSec(): number {
    return Math.max(this.latestSec, Math.floor(this.wallMs() / 1000));
  }

  /** Just after the next second boundary, give back the slots of leases whose second ended. */
  private scheduleFlush(): void {
    if (this.timer || this.closed) return;
    const delay = 1000 - (this.wallMs() % 1000) + 10;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush();
    }, delay);
    this.timer.unref();
  }

  private flush(): void {
    const now = this.currentSec();
    let holding = false;
    for (const [key, s] of this.keys) {
      if (s.held === 0 || s.inflight) continue;
      if (s.second < now) {
        this.queue.push({ key, second: s.second, count: s.held });
        s.held = 0;
        s.size = Math.max(1, Math.floor(s.size / 2));
      } else holding = true;
    }
    this.prune();
    void this.send();
    if (holding) this.scheduleFlush();
  }

  /** One statement for the whole queue; a failure only leaves slots counted until they expire. */
  private async send(): Promise<void> {
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    try {
      await this.backend.giveBack(batch);
    } catch (err) {
      this.log?.warn(
        { err, keys: batch.length },
        "rate-limit: giving back unused leased slots failed (they stay counted until they leave the window)",
      );
    }
  }
}
