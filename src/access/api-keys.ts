import type { AppContext } from "../kernel/context.ts";
import { InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import { raw, sql } from "../storage/sql.ts";
import type { Actor } from "./actor.ts";
import { credentialCache, touchInBackground } from "./credential-cache.ts";
import { forgetRememberedCredentials } from "./outage-credentials.ts";
import { USER_ACTOR_COLUMNS, USER_ACTOR_JOIN, type UserActorRow, userActor } from "./principal.ts";
import { requireRbacAdmin } from "./role-profiles.ts";
import { findUserById } from "./users.ts";
import { isUuid, parseTtl, randomToken, sha256Hex } from "./util.ts";

/**
 * `X-API-Key` credentials for automation (admin and onboarding endpoints). Created and revoked
 * by admins; the raw key (`nmk_` + 43 chars) is shown once, stored as SHA-256 with its first
 * 8 characters kept as a display prefix. A key acts as its owner user (permissions re-read
 * per request).
 */
export interface ApiKeyRow {
  [k: string]: unknown;
  id: string;
  name: string;
  key_prefix: string;
  user_id: string;
  created_by: string | null;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

export function serializeApiKey(k: ApiKeyRow): Record<string, unknown> {
  return {
    id: k.id,
    name: k.name,
    prefix: k.key_prefix,
    user_id: k.user_id,
    created_by: k.created_by,
    created_at: k.created_at.toISOString(),
    expires_at: k.expires_at?.toISOString() ?? null,
    revoked_at: k.revoked_at?.toISOString() ?? null,
    last_used_at: k.last_used_at?.toISOString() ?? null,
  };
}

const COLUMNS = raw(
  "id, name, key_prefix, user_id, created_by, created_at, expires_at, revoked_at, last_used_at",
);

export async function createApiKey(
  ctx: AppContext,
  actor: Actor,
  input: { name?: unknown; user_id?: unknown; expires_in?: unknown },
): Promise<{ key: string; record: ApiKeyRow }> {
  requireRbacAdmin(actor);
  const name = typeof input.name === "string" ? input.name.trim() : "";
  if (name === "" || name.length > 200) {
    throw new InvalidRequestError("name is required (1 to 200 characters)", { source: { pointer: "/name" } });
  }
  const ownerId = input.user_id === undefined || input.user_id === null ? actor.id : input.user_id;
  if (typeof ownerId !== "string" || !(await findUserById(ctx.db, ownerId))) {
    throw new InvalidRequestError("user_id does not name an existing user", {
      source: { pointer: "/user_id" },
    });
  }
  let expiresAt: Date | null = null;
  if (input.expires_in !== undefined && input.expires_in !== null) {
    try {
      expiresAt = new Date(ctx.now().getTime() + parseTtl(input.expires_in as string | number) * 1000);
    } catch (err) {
      throw new InvalidRequestError(`expires_in ${(err as Error).message}`);
    }
  }
  const key = `nmk_${randomToken(32)}`;
  const record = await ctx.db.one<ApiKeyRow>(sql`
    INSERT INTO api_keys (name, key_hash, key_prefix, user_id, created_by, created_at, expires_at)
    VALUES (${name}, ${sha256Hex(key)}, ${key.slice(0, 8)}, ${ownerId},
            ${actor.kind === "user" ? actor.id : null}, ${ctx.now()}, ${expiresAt})
    RETURNING ${COLUMNS}`);
  return { key, record: record as ApiKeyRow };
}

export async function listApiKeys(ctx: AppContext, actor: Actor): Promise<ApiKeyRow[]> {
  requireRbacAdmin(actor);
  return ctx.db.many<ApiKeyRow>(sql`SELECT ${COLUMNS} FROM api_keys ORDER BY created_at DESC, id`);
}

export async function revokeApiKey(ctx: AppContext, actor: Actor, id: string): Promise<ApiKeyRow> {
  requireRbacAdmin(actor);
  const row = isUuid(id)
    ? await ctx.db.one<ApiKeyRow>(sql`
        UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ${ctx.now()}) WHERE id = ${id} RETURNING ${COLUMNS}`)
    : undefined;
  if (!row) throw new NotFoundError("api key not found");
  forgetRememberedCredentials(ctx);
  return row;
}

export async function authenticateApiKey(ctx: AppContext, key: string): Promise<Actor | null> {
  if (!key.startsWith("nmk_") || key.length > 200) return null;
  const cache = credentialCache(ctx);
  const cacheKey = cache.active ? cache.keyOf("api_key", key) : "";
  const hit = cacheKey ? cache.get(cacheKey) : undefined;
  const now = ctx.now();
  if (hit) {
    if (now.getTime() - hit.lastUsed > 60_000) {
      hit.lastUsed = now.getTime();
      const hash = sha256Hex(key);
      touchInBackground(ctx, "api_keys", () =>
        ctx.db.query(sql`UPDATE api_keys SET last_used_at = ${now} WHERE key_hash = ${hash}`),
      );
    }
    return { ...hit.actor };
  }
  const generation = cache.generation;
  const row = await ctx.db.one<
    UserActorRow & {
      key_id: string;
      expires_at: Date | null;
      revoked_at: Date | null;
      last_used_at: Date | null;
    }
  >(sql`
    SELECT c.id AS key_id, c.expires_at, c.revoked_at, c.last_used_at, ${raw(USER_ACTOR_COLUMNS)}
    FROM api_keys c ${raw(USER_ACTOR_JOIN)}
    WHERE c.key_hash = ${sha256Hex(key)}`);
  if (!row || row.revoked_at || row.user_status !== "active") return null;
  if (row.expires_at && row.expires_at <= now) return null;
  let lastUsed = row.last_used_at?.getTime() ?? 0;
  if (now.getTime() - lastUsed > 60_000) {
    lastUsed = now.getTime();
    touchInBackground(ctx, "api_keys", () =>
      ctx.db.query(sql`UPDATE api_keys SET last_used_at = ${now} WHERE id = ${row.key_id}`),
    );
  }
  const actor = userActor(row, "api_key");
  if (cacheKey) {
    cache.set(cacheKey, { actor, userId: row.user_id, expiresAt: row.expires_at, lastUsed }, generation);
  }
  return actor;
}
