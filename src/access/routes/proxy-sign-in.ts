/**
 * The gateway-proxy JWT mode at the request edge (spec 5): when the mode is on and the
 * configured header carries a gateway's JWT, it is verified and the user signed in (found or
 * provisioned), and a normal browser session started — or, when the request already carries a
 * session of that same user, that session is used. netmon's own API tokens (HMAC-signed) in
 * `Authorization` keep working beside it. Without a JWT the usual credentials apply, so an
 * existing session or API token still works, and anything else is 401.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import { isAppError } from "../../kernel/errors.ts";
import { loadAuthSettings } from "../auth-settings.ts";
import type { Credentials } from "../authenticate.ts";
import { signInExternalUser } from "../external-users.ts";
import { isNetmonToken, ProxyTokenError, verifyProxyToken } from "../proxy-jwt.ts";
import { authenticateSession, createSession, SESSION_COOKIE } from "../sessions.ts";
import { setSessionCookies } from "./session.ts";

/** Credentials from the gateway's JWT, or null when this request does not carry one. */
export async function proxyCredentials(
  ctx: AppContext,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<Credentials | null> {
  const settings = await loadAuthSettings(ctx);
  if (settings.mode !== "proxy_jwt") return null;
  const header = settings.proxyHeader.toLowerCase();
  const value = request.headers[header];
  if (typeof value !== "string" || value.trim() === "") return null;
  let token = value.trim();
  if (header === "authorization") {
    const m = /^Bearer\s+(\S+)$/i.exec(token);
    if (!m) return null; // not a bearer token: the usual credential checks answer
    token = m[1] as string;
    if (isNetmonToken(token)) return null; // one of netmon's own API tokens
  }
  let userId: string;
  try {
    const identity = await verifyProxyToken(ctx, settings, token);
    userId = (await signInExternalUser(ctx, "gateway", identity)).id;
  } catch (err) {
    if (err instanceof ProxyTokenError) {
      request.log.info({ event: "gateway_token_refused", reason: err.message }, "gateway token refused");
      return { actor: null, presented: true, reason: `invalid gateway token: ${err.message}` };
    }
    if (isAppError(err) && err.status === 403) {
      return { actor: null, presented: true, reason: err.message };
    }
    throw err;
  }
  const cookie = request.cookies?.[SESSION_COOKIE];
  if (typeof cookie === "string" && cookie !== "") {
    const current = await authenticateSession(ctx, cookie);
    if (current?.id === userId) return { actor: current, presented: true, sessionToken: cookie };
  }
  const session = await createSession(ctx, userId, {
    ip: request.ip,
    userAgent: typeof request.headers["user-agent"] === "string" ? request.headers["user-agent"] : undefined,
  });
  setSessionCookies(ctx, request, reply, session.token);
  const actor = await authenticateSession(ctx, session.token);
  return { actor, presented: true, sessionToken: session.token };
}
