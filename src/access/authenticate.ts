import type { FastifyRequest } from "fastify";
import type { AppContext } from "../kernel/context.ts";
import type { Actor } from "./actor.ts";
import { authenticateApiKey } from "./api-keys.ts";
import { credentialCache } from "./credential-cache.ts";
import { withOutageGrace } from "./outage-credentials.ts";
import { authenticateSession, SESSION_COOKIE } from "./sessions.ts";
import { authenticateBearer } from "./tokens.ts";

export interface Credentials {
  actor: Actor | null;
  /** Credentials were presented (valid or not). */
  presented: boolean;
  /** Why presented credentials were rejected (never includes the credential). */
  reason?: string;
  /** The raw session cookie when the actor came from it (for the CSRF check). */
  sessionToken?: string;
}

/**
 * Whether the credential this request presents (by the precedence below) is in the credential
 * cache now — known valid without a lookup. Looks only; the lookup is resolveCredentials'.
 */
export function presentsCachedCredential(ctx: AppContext, request: FastifyRequest): boolean {
  const cache = credentialCache(ctx);
  if (!cache.active) return false;
  const authz = request.headers.authorization;
  if (typeof authz === "string" && authz !== "") {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authz);
    return m ? cache.has(cache.keyOf("bearer", m[1] as string)) : false;
  }
  const apiKey = request.headers["x-api-key"];
  if (typeof apiKey === "string" && apiKey !== "") return cache.has(cache.keyOf("api_key", apiKey));
  const cookie = request.cookies?.[SESSION_COOKIE];
  if (typeof cookie === "string" && cookie !== "") return cache.has(cache.keyOf("session", cookie));
  return false;
}

/**
 * Resolve who is calling: `Authorization: Bearer <jwt>` first, then `X-API-Key`, then the
 * session cookie. Presented-but-invalid bearer/key credentials do not fall back to the cookie.
 */
export async function resolveCredentials(ctx: AppContext, request: FastifyRequest): Promise<Credentials> {
  const authz = request.headers.authorization;
  if (typeof authz === "string" && authz !== "") {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authz);
    if (!m) return { actor: null, presented: true, reason: "unsupported authorization scheme" };
    let reason: string | undefined;
    const actor = await withOutageGrace(ctx, m[1] as string, async () => {
      const res = await authenticateBearer(ctx, m[1] as string);
      if (!res.actor) reason = res.reason;
      return res.actor;
    });
    return actor ? { actor, presented: true } : { actor: null, presented: true, reason };
  }
  const apiKey = request.headers["x-api-key"];
  if (typeof apiKey === "string" && apiKey !== "") {
    const actor = await withOutageGrace(ctx, apiKey, () => authenticateApiKey(ctx, apiKey));
    return actor ? { actor, presented: true } : { actor: null, presented: true, reason: "invalid api key" };
  }
  const cookie = request.cookies?.[SESSION_COOKIE];
  if (typeof cookie === "string" && cookie !== "") {
    const actor = await authenticateSession(ctx, cookie);
    return actor
      ? { actor, presented: true, sessionToken: cookie }
      : { actor: null, presented: true, reason: "session expired or signed out" };
  }
  return { actor: null, presented: false };
}
