import { createHmac, timingSafeEqual } from "node:crypto";
import type { AppContext } from "../kernel/context.ts";
import { raw, sql } from "../storage/sql.ts";
import type { Actor } from "./actor.ts";
import { credentialCache, invalidateCredentialCache, touchInBackground } from "./credential-cache.ts";
import { USER_ACTOR_COLUMNS, USER_ACTOR_JOIN, type UserActorRow, userActor } from "./principal.ts";
import { deriveKey, randomToken, sha256Hex } from "./util.ts";

/**
 * Server-side browser sessions. The cookie holds 32 random bytes; the table holds only their
 * SHA-256, so a database leak yields no usable session. Idle and absolute timeouts come from
 * NETMON_SESSION_IDLE_TIMEOUT_SECONDS / NETMON_SESSION_ABSOLUTE_TIMEOUT_SECONDS.
 */
export const SESSION_COOKIE = "netmon_session";
export const CSRF_COOKIE = "netmon_csrf";
export const CSRF_HEADER = "x-csrf-token";
export const CSRF_FIELD = "_csrf";

const TOUCH_INTERVAL_MS = 60_000;

export async function createSession(
  ctx: AppContext,
  userId: string,
  meta: { ip?: string; userAgent?: string } = {},
): Promise<{ token: string; id: string; expiresAt: Date }> {
  const token = randomToken(32);
  const now = ctx.now();
  const expiresAt = new Date(now.getTime() + ctx.config.sessionAbsoluteTimeoutSeconds * 1000);
  const row = await ctx.db.one<{ id: string }>(sql`
    INSERT INTO sessions (token_hash, user_id, created_at, last_seen_at, expires_at, ip, user_agent)
    VALUES (${sha256Hex(token)}, ${userId}, ${now}, ${now}, ${expiresAt}, ${meta.ip ?? null},
            ${meta.userAgent?.slice(0, 500) ?? null})
    RETURNING id`);
  return { token, id: row?.id as string, expiresAt };
}

export async function revokeSession(ctx: AppContext, token: string): Promise<void> {
  await ctx.db.query(
    sql`UPDATE sessions SET revoked_at = ${ctx.now()} WHERE token_hash = ${sha256Hex(token)} AND revoked_at IS NULL`,
  );
  invalidateCredentialCache(ctx);
}

export async function revokeSessionById(ctx: AppContext, id: string): Promise<void> {
  await ctx.db.query(
    sql`UPDATE sessions SET revoked_at = ${ctx.now()} WHERE id = ${id} AND revoked_at IS NULL`,
  );
  invalidateCredentialCache(ctx);
}

/**
 * The Actor of a session cookie, or null when unknown, revoked, expired, idle or the user is
 * disabled. A session verified recently comes from the credential cache (credential-cache.ts).
 */
export async function authenticateSession(ctx: AppContext, token: string): Promise<Actor | null> {
  if (token.length < 20 || token.length > 200) return null;
  const cache = credentialCache(ctx);
  const key = cache.active ? cache.keyOf("session", token) : "";
  const hit = key ? cache.get(key) : undefined;
  const idleMs = ctx.config.sessionIdleTimeoutSeconds * 1000;
  if (hit) {
    const now = ctx.now();
    // Idle by the last touch this process knows of: the database may know a later one
    // (another replica's), so an idle-looking entry is looked up again rather than refused.
    if (now.getTime() - hit.lastUsed <= idleMs) {
      if (now.getTime() - hit.lastUsed > TOUCH_INTERVAL_MS) {
        hit.lastUsed = now.getTime();
        const id = hit.actor.sessionId as string;
        touchInBackground(ctx, "sessions", () =>
          ctx.db.query(sql`UPDATE sessions SET last_seen_at = ${now} WHERE id = ${id}`),
        );
      }
      return { ...hit.actor };
    }
    cache.delete(key);
  }
  const generation = cache.generation;
  const row = await ctx.db.one<
    UserActorRow & { session_id: string; expires_at: Date; revoked_at: Date | null; last_seen_at: Date }
  >(sql`
    SELECT c.id AS session_id, c.expires_at, c.revoked_at, c.last_seen_at, ${raw(USER_ACTOR_COLUMNS)}
    FROM sessions c ${raw(USER_ACTOR_JOIN)}
    WHERE c.token_hash = ${sha256Hex(token)}`);
  if (!row || row.revoked_at || row.user_status !== "active") return null;
  const now = ctx.now();
  if (row.expires_at <= now) return null;
  if (now.getTime() - row.last_seen_at.getTime() > idleMs) return null;
  let lastUsed = row.last_seen_at.getTime();
  if (now.getTime() - lastUsed > TOUCH_INTERVAL_MS) {
    lastUsed = now.getTime();
    touchInBackground(ctx, "sessions", () =>
      ctx.db.query(sql`UPDATE sessions SET last_seen_at = ${now} WHERE id = ${row.session_id}`),
    );
  }
  const actor = userActor(row, "session", { sessionId: row.session_id });
  if (key) cache.set(key, { actor, userId: row.user_id, expiresAt: row.expires_at, lastUsed }, generation);
  return actor;
}

/** The CSRF token bound to a session: HMAC of the session cookie value (nothing stored). */
export function csrfTokenFor(ctx: AppContext, sessionToken: string): string {
  return createHmac("sha256", deriveKey(ctx.secretKey, "csrf")).update(sessionToken).digest("base64url");
}

export function csrfTokenMatches(ctx: AppContext, sessionToken: string, presented: unknown): boolean {
  if (typeof presented !== "string" || presented === "") return false;
  const want = Buffer.from(csrfTokenFor(ctx, sessionToken));
  const got = Buffer.from(presented);
  return want.length === got.length && timingSafeEqual(want, got);
}
