/**
 * The end every browser SSO flow shares (OIDC callback, SAML assertion consumer): sign the
 * identity in (found, linked or provisioned; disabled accounts refused), start a browser
 * session, send the browser where it was going — or answer the sign-in page with the reason.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import { isAppError } from "../../kernel/errors.ts";
import { type ExternalIdentity, type ExternalProvider, signInExternalUser } from "../external-users.ts";
import { createSession } from "../sessions.ts";
import { safeReturnTo, setSessionCookies, signInPage } from "./session.ts";

/** The sign-in page with why single sign-on did not complete, and a way to try again. */
export function refuseSso(reply: FastifyReply, status: number, message: string, retry: string): FastifyReply {
  return reply
    .code(status)
    .type("text/html; charset=utf-8")
    .header("cache-control", "no-store")
    .send(signInPage({ error: message, ssoNotice: "Single sign-on did not complete.", ssoLink: retry }));
}

/**
 * Run `verify` (the provider-specific validation, throwing `protocolError` for anything not to
 * be trusted), then sign in and redirect.
 */
export async function finishSso(
  ctx: AppContext,
  request: FastifyRequest,
  reply: FastifyReply,
  provider: ExternalProvider,
  verify: () => Promise<ExternalIdentity & { returnTo: unknown }>,
  protocolError: new (...args: never[]) => Error,
): Promise<FastifyReply> {
  const retry = `/auth/${provider}/login`;
  try {
    const who = await verify();
    const user = await signInExternalUser(ctx, provider, who);
    const session = await createSession(ctx, user.id, {
      ip: request.ip,
      userAgent:
        typeof request.headers["user-agent"] === "string" ? request.headers["user-agent"] : undefined,
    });
    setSessionCookies(ctx, request, reply, session.token);
    return reply
      .code(303)
      .header("location", safeReturnTo(who.returnTo))
      .header("cache-control", "no-store")
      .send();
  } catch (err) {
    if (err instanceof protocolError) {
      request.log.info({ event: `${provider}_sign_in_failed`, reason: err.message }, "single sign-on failed");
      return refuseSso(reply, 401, err.message, retry);
    }
    if (isAppError(err) && err.status === 403) return refuseSso(reply, 403, err.message, retry);
    throw err;
  }
}
