import { createSecretKey, type KeyObject, randomUUID } from "node:crypto";
import { errors as joseErrors, jwtVerify, SignJWT } from "jose";
import type { AppContext } from "../kernel/context.ts";
import { ForbiddenError, InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import { raw, sql } from "../storage/sql.ts";
import type { Actor } from "./actor.ts";
import { type CachedCredential, credentialCache, touchInBackground } from "./credential-cache.ts";
import { forgetRememberedCredentials } from "./outage-credentials.ts";
import { isPermissionKey } from "./permissions.ts";
import {
  restrictActor,
  USER_ACTOR_COLUMNS,
  USER_ACTOR_JOIN,
  type UserActorRow,
  userActor,
} from "./principal.ts";
import { findUserByEmail } from "./users.ts";
import { deriveKey, isUuid, parseTtl } from "./util.ts";

/**
 * Bearer tokens are HS256 JWTs signed with a key derived from the instance secret:
 * `iss "netmon"`, `sub "user:<uuid>"` (or `gateway:<name>` / `agent:<name>` for control-plane
 * credentials), `typ` (`api` | `control`), `jti`, `scope` (space-separated), `iat`, `exp`.
 * The jti is recorded, so tokens can be listed and revoked; every request re-checks it.
 */
const ISSUER = "netmon";
const CLOCK_TOLERANCE_S = 60;
export const DEFAULT_TOKEN_TTL_S = 30 * 86400;
export const MAX_TOKEN_TTL_S = 366 * 86400;

/** Scope vocabulary (informational: permissions come from the owner, spec 5.3). */
export const TOKEN_SCOPES = [
  "read",
  "write",
  "admin",
  "mcp",
  "dashboard.publish",
  "plugin.publish",
  "configuration",
];

// A KeyObject (not raw bytes) so jose does not re-import the key on every verification.
const keyCache = new WeakMap<Buffer, KeyObject>();
function signingKey(secret: Buffer): KeyObject {
  let k = keyCache.get(secret);
  if (!k) {
    k = createSecretKey(deriveKey(secret, "jwt-hs256"));
    keyCache.set(secret, k);
  }
  return k;
}

export interface ApiTokenRow {
  [k: string]: unknown;
  id: string;
  jti: string;
  user_id: string;
  name: string;
  scopes: string[];
  /** The token's own permission list (a subset of the owner's); null: the owner's. */
  permissions: string[] | null;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** `owner`: the owner's permissions now, to show what the token can do (its effective permissions). */
export function serializeApiToken(t: ApiTokenRow, owner?: ReadonlySet<string>): Record<string, unknown> {
  const list = t.permissions ?? null;
  return {
    id: t.id,
    name: t.name,
    scopes: t.scopes,
    permissions: list,
    ...(owner
      ? { effective_permissions: [...owner].filter((p) => list === null || list.includes(p)).sort() }
      : {}),
    created_at: t.created_at.toISOString(),
    expires_at: t.expires_at?.toISOString() ?? null,
    revoked_at: t.revoked_at?.toISOString() ?? null,
    last_used_at: t.last_used_at?.toISOString() ?? null,
  };
}

/**
 * A token's permission list: known keys the owner holds now (a token never carries more than
 * its owner). Without `owner` (the CLI, acting for the operator) only known keys are required.
 */
function checkPermissions(list: unknown, owner: ReadonlySet<string> | undefined): string[] | null {
  if (list === undefined || list === null) return null;
  if (!Array.isArray(list) || list.some((p) => typeof p !== "string") || list.length > 500) {
    throw new InvalidRequestError("permissions must be an array of permission keys", {
      source: { pointer: "/permissions" },
    });
  }
  const unknown = list.filter((p) => !isPermissionKey(p));
  if (unknown.length > 0) {
    throw new InvalidRequestError(`unknown permission keys: ${unknown.join(", ")}`, {
      source: { pointer: "/permissions" },
    });
  }
  const notHeld = owner ? list.filter((p) => !owner.has(p)) : [];
  if (notHeld.length > 0) {
    throw new ForbiddenError(`a token cannot carry permissions its owner lacks: ${notHeld.join(", ")}`);
  }
  return [...new Set(list as string[])].sort();
}

function checkScopes(scopes: unknown): string[] {
  if (scopes === undefined || scopes === null) return ["read"];
  if (!Array.isArray(scopes) || scopes.some((s) => typeof s !== "string")) {
    throw new InvalidRequestError("scopes must be an array of strings", { source: { pointer: "/scopes" } });
  }
  const unknown = scopes.filter((s) => !TOKEN_SCOPES.includes(s));
  if (unknown.length > 0) {
    throw new InvalidRequestError(
      `unknown scope(s): ${unknown.join(", ")} (known: ${TOKEN_SCOPES.join(", ")})`,
      {
        source: { pointer: "/scopes" },
      },
    );
  }
  return [...new Set(scopes as string[])];
}

function checkTtl(expiresIn: unknown): number {
  if (expiresIn === undefined || expiresIn === null) return DEFAULT_TOKEN_TTL_S;
  let ttl: number;
  try {
    if (typeof expiresIn !== "string" && typeof expiresIn !== "number") throw new Error("must be a duration");
    ttl = parseTtl(expiresIn);
  } catch (err) {
    throw new InvalidRequestError(`expires_in ${(err as Error).message}`, {
      source: { pointer: "/expires_in" },
    });
  }
  if (ttl > MAX_TOKEN_TTL_S) {
    throw new InvalidRequestError(`expires_in must be at most ${MAX_TOKEN_TTL_S} seconds`, {
      source: { pointer: "/expires_in" },
    });
  }
  return ttl;
}

async function sign(
  ctx: AppContext,
  claims: { sub: string; typ: string; jti: string; scopes: string[] },
  iat: Date,
  exp: Date | null,
): Promise<string> {
  let jwt = new SignJWT({ typ: claims.typ, scope: claims.scopes.join(" "), scopes: claims.scopes })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuer(ISSUER)
    .setSubject(claims.sub)
    .setJti(claims.jti)
    .setIssuedAt(Math.floor(iat.getTime() / 1000));
  if (exp) jwt = jwt.setExpirationTime(Math.floor(exp.getTime() / 1000));
  return jwt.sign(signingKey(ctx.secretKey));
}

export interface CreateTokenInput {
  name?: unknown;
  scopes?: unknown;
  expires_in?: unknown;
  /** Permission keys the token is limited to (a subset of the owner's). */
  permissions?: unknown;
  /** The owner's permissions now, when the owner is the caller (the API). */
  ownerPermissions?: ReadonlySet<string>;
}

/** Issue an API token for a user. Returns the JWT (shown once) and the stored record. */
export async function createApiToken(
  ctx: AppContext,
  userId: string,
  input: CreateTokenInput,
): Promise<{ token: string; record: ApiTokenRow }> {
  const name =
    input.name === undefined ? "api token" : typeof input.name === "string" ? input.name.trim() : "";
  if (name === "" || name.length > 200) {
    throw new InvalidRequestError("name must be 1 to 200 characters", { source: { pointer: "/name" } });
  }
  const scopes = checkScopes(input.scopes);
  const permissions = checkPermissions(input.permissions, input.ownerPermissions);
  const ttl = checkTtl(input.expires_in);
  const now = ctx.now();
  const exp = new Date(now.getTime() + ttl * 1000);
  const jti = randomUUID();
  const record = await ctx.db.one<ApiTokenRow>(sql`
    INSERT INTO api_tokens (jti, user_id, name, scopes, permissions, created_at, expires_at)
    VALUES (${jti}, ${userId}, ${name}, ${scopes}, ${permissions}::text[], ${now}, ${exp}) RETURNING *`);
  if (!record) throw new Error("token insert returned nothing");
  const token = await sign(ctx, { sub: `user:${userId}`, typ: "api", jti, scopes }, now, exp);
  return { token, record };
}

/** CLI: `netmon tokens create --user EMAIL`. */
export async function createApiTokenForEmail(
  ctx: AppContext,
  email: string,
  input: CreateTokenInput,
): Promise<{ token: string; record: ApiTokenRow }> {
  const user = await findUserByEmail(ctx.db, email);
  if (!user) throw new NotFoundError(`no user with email ${email}`);
  return createApiToken(ctx, user.id, input);
}

/** A user's permissions now (role or profile), whatever credential they are calling with. */
export async function ownerPermissions(ctx: AppContext, userId: string): Promise<ReadonlySet<string>> {
  const row = await ctx.db.one<UserActorRow>(sql`
    SELECT ${raw(USER_ACTOR_COLUMNS)} FROM (SELECT ${userId}::uuid AS user_id) c ${raw(USER_ACTOR_JOIN)}`);
  return row ? userActor(row, "api_token").permissions : new Set();
}

export async function listApiTokens(ctx: AppContext, userId: string): Promise<ApiTokenRow[]> {
  return ctx.db.many<ApiTokenRow>(
    sql`SELECT * FROM api_tokens WHERE user_id = ${userId} ORDER BY created_at DESC, id`,
  );
}

/** Revoke one of the actor's own tokens; it answers 401 from the next request on. */
export async function revokeApiToken(ctx: AppContext, actor: Actor, id: string): Promise<ApiTokenRow> {
  const row = isUuid(id)
    ? await ctx.db.one<ApiTokenRow>(sql`
        UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ${ctx.now()})
        WHERE id = ${id} AND user_id = ${actor.id} RETURNING *`)
    : undefined;
  if (!row) throw new NotFoundError("api credential not found");
  forgetRememberedCredentials(ctx);
  return row;
}

/** User-wide revocation: every token and session of the user stops working. */
export async function revokeAllForUser(ctx: AppContext, userId: string): Promise<void> {
  const now = ctx.now();
  await ctx.db.transaction(async (tx) => {
    await tx.query(sql`UPDATE users SET revoked_before = ${now} WHERE id = ${userId}`);
    await tx.query(
      sql`UPDATE api_tokens SET revoked_at = ${now} WHERE user_id = ${userId} AND revoked_at IS NULL`,
    );
    await tx.query(
      sql`UPDATE sessions SET revoked_at = ${now} WHERE user_id = ${userId} AND revoked_at IS NULL`,
    );
  });
  forgetRememberedCredentials(ctx);
}

// ---- control plane ----

export interface ControlCredentialRow {
  [k: string]: unknown;
  id: string;
  jti: string;
  kind: "gateway" | "agent";
  name: string;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/**
 * A bearer credential for a gateway or agent. It authenticates as an Actor of kind
 * gateway/agent, accepted only on `{controlPlane: true}` routes, budgeted in the `control`
 * scope per credential. No expiry unless `ttlSeconds` is given.
 */
export async function issueControlPlaneToken(
  ctx: AppContext,
  opts: { kind: "gateway" | "agent"; name: string; ttlSeconds?: number },
): Promise<{ token: string; record: ControlCredentialRow }> {
  if (opts.kind !== "gateway" && opts.kind !== "agent") {
    throw new InvalidRequestError("kind must be gateway or agent");
  }
  const name = opts.name.trim();
  if (!/^[A-Za-z0-9._:-]{1,200}$/.test(name)) {
    throw new InvalidRequestError(
      "name must be 1 to 200 characters of letters, digits, '.', '_', ':' or '-'",
    );
  }
  const now = ctx.now();
  const exp = opts.ttlSeconds ? new Date(now.getTime() + opts.ttlSeconds * 1000) : null;
  const jti = randomUUID();
  const record = await ctx.db.one<ControlCredentialRow>(sql`
    INSERT INTO control_credentials (jti, kind, name, created_at, expires_at)
    VALUES (${jti}, ${opts.kind}, ${name}, ${now}, ${exp}) RETURNING *`);
  if (!record) throw new Error("credential insert returned nothing");
  const token = await sign(ctx, { sub: `${opts.kind}:${name}`, typ: "control", jti, scopes: [] }, now, exp);
  return { token, record };
}

export async function revokeControlPlaneToken(ctx: AppContext, id: string): Promise<void> {
  if (!isUuid(id)) throw new NotFoundError("control-plane credential not found");
  const res = await ctx.db.query(
    sql`UPDATE control_credentials SET revoked_at = COALESCE(revoked_at, ${ctx.now()}) WHERE id = ${id}`,
  );
  if (res.rowCount === 0) throw new NotFoundError("control-plane credential not found");
  forgetRememberedCredentials(ctx);
}

// ---- verification ----

export type TokenCheck = { actor: Actor } | { actor: null; reason: string };

const TOUCH_INTERVAL_MS = 60_000;

/**
 * Verify a bearer JWT and build its Actor, re-reading revocation, status and permissions —
 * or, for a token verified recently, from the credential cache (credential-cache.ts), which
 * every change to the token, its owner or the owner's profile evicts.
 */
export async function authenticateBearer(ctx: AppContext, token: string): Promise<TokenCheck> {
  const cache = credentialCache(ctx);
  const key = cache.active ? cache.keyOf("bearer", token) : "";
  const hit = key ? cache.get(key) : undefined;
  if (hit) {
    const now = ctx.now();
    if (now.getTime() - hit.lastUsed > TOUCH_INTERVAL_MS) {
      hit.lastUsed = now.getTime();
      const table = hit.actor.authMethod === "control_plane" ? "control_credentials" : "api_tokens";
      const jti = hit.actor.tokenJti as string;
      touchInBackground(ctx, table, () =>
        ctx.db.query(sql`UPDATE ${raw(table)} SET last_used_at = ${now} WHERE jti = ${jti}`),
      );
    }
    return { actor: { ...hit.actor } };
  }
  const generation = cache.generation;
  const res = await verifyBearer(ctx, token);
  if (key && "cached" in res && res.cached) cache.set(key, res.cached, generation);
  return res.actor ? { actor: res.actor } : res;
}

async function verifyBearer(
  ctx: AppContext,
  token: string,
): Promise<{ actor: Actor; cached?: CachedCredential } | { actor: null; reason: string }> {
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(token, signingKey(ctx.secretKey), {
      issuer: ISSUER,
      algorithms: ["HS256"],
      clockTolerance: CLOCK_TOLERANCE_S,
      currentDate: ctx.now(),
    }));
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) return { actor: null, reason: "token expired" };
    return { actor: null, reason: "invalid token" };
  }
  const jti = payload.jti;
  const sub = payload.sub;
  const iat = typeof payload.iat === "number" ? payload.iat : 0;
  if (typeof jti !== "string" || typeof sub !== "string") return { actor: null, reason: "invalid token" };
  const now = ctx.now();
  // The JWT's own expiry as jwtVerify applies it (with its clock tolerance).
  const jwtExpiresAt =
    typeof payload.exp === "number" ? new Date((payload.exp + CLOCK_TOLERANCE_S) * 1000) : null;
  const expiry = (stored: Date | null): Date | null =>
    stored && jwtExpiresAt ? (stored < jwtExpiresAt ? stored : jwtExpiresAt) : (stored ?? jwtExpiresAt);

  if (payload.typ === "control") {
    const row = await ctx.db.one<ControlCredentialRow>(
      sql`SELECT * FROM control_credentials WHERE jti = ${jti}`,
    );
    if (!row || `${row.kind}:${row.name}` !== sub) return { actor: null, reason: "unknown token" };
    if (row.revoked_at) return { actor: null, reason: "token revoked" };
    if (row.expires_at && row.expires_at <= now) return { actor: null, reason: "token expired" };
    let lastUsed = row.last_used_at?.getTime() ?? 0;
    if (now.getTime() - lastUsed > TOUCH_INTERVAL_MS) {
      lastUsed = now.getTime();
      touchInBackground(ctx, "control_credentials", () =>
        ctx.db.query(sql`UPDATE control_credentials SET last_used_at = ${now} WHERE id = ${row.id}`),
      );
    }
    const actor: Actor = {
      kind: row.kind,
      id: `${row.kind}:${row.name}`,
      email: null,
      role: "viewer",
      roleProfileId: null,
      permissions: new Set(),
      authMethod: "control_plane",
      tokenJti: jti,
      scopes: [],
      partitions: null,
    };
    return { actor, cached: { actor, userId: null, expiresAt: expiry(row.expires_at), lastUsed } };
  }

  if (payload.typ !== "api" || !sub.startsWith("user:")) return { actor: null, reason: "invalid token" };
  const row = await ctx.db.one<
    UserActorRow & {
      token_id: string;
      scopes: string[];
      token_permissions: string[] | null;
      expires_at: Date | null;
      revoked_at: Date | null;
      last_used_at: Date | null;
    }
  >(sql`
    SELECT c.id AS token_id, c.scopes, c.permissions AS token_permissions, c.expires_at, c.revoked_at, c.last_used_at, ${raw(USER_ACTOR_COLUMNS)}
    FROM api_tokens c ${raw(USER_ACTOR_JOIN)}
    WHERE c.jti = ${jti}`);
  if (!row || `user:${row.user_id}` !== sub) return { actor: null, reason: "unknown token" };
  if (row.revoked_at) return { actor: null, reason: "token revoked" };
  if (row.expires_at && row.expires_at <= now) return { actor: null, reason: "token expired" };
  if (row.user_status !== "active") return { actor: null, reason: "user disabled" };
  if (row.user_revoked_before && iat < Math.floor(row.user_revoked_before.getTime() / 1000)) {
    return { actor: null, reason: "token revoked" };
  }
  let lastUsed = row.last_used_at?.getTime() ?? 0;
  if (now.getTime() - lastUsed > TOUCH_INTERVAL_MS) {
    lastUsed = now.getTime();
    touchInBackground(ctx, "api_tokens", () =>
      ctx.db.query(sql`UPDATE api_tokens SET last_used_at = ${now} WHERE id = ${row.token_id}`),
    );
  }
  const full = userActor(row, "api_token", { tokenJti: jti, scopes: row.scopes });
  const actor = row.token_permissions ? restrictActor(full, row.token_permissions) : full;
  return { actor, cached: { actor, userId: row.user_id, expiresAt: expiry(row.expires_at), lastUsed } };
}
