import type { FastifyRequest } from "fastify";
import type { AppContext } from "../kernel/context.ts";
import type { Actor } from "./actor.ts";
import { authenticateApiKey } from "./api-keys.ts";
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
