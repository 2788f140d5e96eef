import { createHash } from "node:crypto";
import type { AppContext } from "../kernel/context.ts";
import { isConnectionLoss } from "../storage/db-error.ts";
import type { Actor } from "./actor.ts";
import { invalidateCredentialCache } from "./credential-cache.ts";

/**
 * Credentials that still work while the database is away (decision 0311). Telemetry buffered
 * through JetStream must keep being accepted during a database restart — that is the point of
 * the buffer — but every request authenticates against the database. So each credential that
 * authenticated successfully is remembered for a few minutes, and only when the database
 * lookup fails with a *connection loss* is the remembered actor used. A credential never seen
 * before, one seen more than OUTAGE_GRACE_MS ago, or any other error still fails as before.
 * The one thing this relaxes: a token revoked on another replica shortly before the outage
 * can keep authenticating in this process until the grace ends (a revocation in this process
 * forgets it at once).
 */
const OUTAGE_GRACE_MS = 5 * 60_000;
const MAX_ENTRIES = 10_000;

interface Remembered {
  actor: Actor;
  at: number;
}

const REMEMBERED = new WeakMap<AppContext, Map<string, Remembered>>();

function memory(ctx: AppContext): Map<string, Remembered> {
  let m = REMEMBERED.get(ctx);
  if (!m) {
    m = new Map();
    REMEMBERED.set(ctx, m);
  }
  return m;
}

const keyOf = (credential: string) => createHash("sha256").update(credential).digest("base64url");

let lastOutageLog = 0;

/** Run a database-backed credential check; on connection loss fall back to a recent success. */
export async function withOutageGrace(
  ctx: AppContext,
  credential: string,
  check: () => Promise<Actor | null>,
): Promise<Actor | null> {
  const key = keyOf(credential);
  const m = memory(ctx);
  try {
    const actor = await check();
    if (actor) {
      m.delete(key); // re-insert: Map order is the eviction order
      m.set(key, { actor, at: Date.now() });
      if (m.size > MAX_ENTRIES) m.delete(m.keys().next().value as string);
    } else {
      m.delete(key);
    }
    return actor;
  } catch (err) {
    const remembered = m.get(key);
    if (!isConnectionLoss(err) || !remembered || Date.now() - remembered.at > OUTAGE_GRACE_MS) throw err;
    if (Date.now() - lastOutageLog > 10_000) {
      lastOutageLog = Date.now();
      ctx.log.warn({ err }, "database unavailable: recently verified credentials are accepted for now");
    }
    return remembered.actor;
  }
}

/** Forget every remembered credential (after a revocation in this process). */
export function forgetRememberedCredentials(ctx: AppContext): void {
  memory(ctx).clear();
  // And the credential cache, at once in this process (other replicas: the NOTIFY).
  invalidateCredentialCache(ctx);
}
