/**
 * OIDC sign-in routes (spec 5): `GET /auth/oidc/login` sends the browser to the identity
 * provider; `GET /auth/oidc/callback` (the redirect URI `{NETMON_BASE_URL}/auth/oidc/callback`)
 * validates the answer, signs the user in (found by subject, linked by email or provisioned as a
 * viewer; disabled accounts refused) and starts a browser session.
 */
import type { FastifyInstance, FastifyReply } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import { isAppError, NotFoundError, RateLimitedError } from "../../kernel/errors.ts";
import { loadAuthSettings, oidcClientSettings } from "../auth-settings.ts";
import { signInExternalUser } from "../external-users.ts";
import { finishOidcLogin, OidcError, startOidcLogin } from "../oidc.ts";
import type { RateLimiter } from "../rate-limit.ts";
import { createSession } from "../sessions.ts";
import { safeReturnTo, setSessionCookies, signInPage } from "./session.ts";

/** Callbacks per client IP (the original's auth_oidc_callback budget, 30 per 60 s). */
const CALLBACK_BUDGET = { requests: 30, windowSeconds: 60 };

export async function oidcRoutes(app: FastifyInstance, ctx: AppContext, limiter: RateLimiter): Promise<void> {
  const publicPage = { access: { public: true }, rateLimit: "none" } as const;

  const settings = async () => {
    const s = await loadAuthSettings(ctx);
    const rp = oidcClientSettings(ctx, s);
    if (!rp) throw new NotFoundError("OIDC sign-in is not enabled on this instance");
    return { s, rp };
  };

  const refuse = (reply: FastifyReply, status: number, message: string) =>
    reply
      .code(status)
      .type("text/html; charset=utf-8")
      .header("cache-control", "no-store")
      .send(
        signInPage({
          error: message,
          ssoNotice: "Single sign-on did not complete.",
          ssoLink: "/auth/oidc/login",
        }),
      );

  app.get("/auth/oidc/login", { config: publicPage }, async (request, reply) => {
    const { rp } = await settings();
    const q = request.query as Record<string, unknown>;
    try {
      const url = await startOidcLogin(ctx, rp, safeReturnTo(q.return_to));
      return reply.code(302).header("location", url).header("cache-control", "no-store").send();
    } catch (err) {
      if (!(err instanceof OidcError)) throw err;
      request.log.warn({ event: "oidc_unavailable", reason: err.message }, "OIDC login could not start");
      return refuse(reply, 502, `The identity provider cannot be reached: ${err.message}`);
    }
  });

  app.get("/auth/oidc/callback", { config: publicPage }, async (request, reply) => {
    const budget = await limiter.consume("auth_oidc_callback", request.ip, CALLBACK_BUDGET);
    if (!budget.allowed) throw new RateLimitedError(budget.retryAfter);
    const { s, rp } = await settings();
    const query = (request.raw.url ?? "").split("?")[1] ?? "";
    try {
      const who = await finishOidcLogin(ctx, rp, s.claimMappings, query);
      const user = await signInExternalUser(ctx, "oidc", who);
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
      if (err instanceof OidcError) {
        request.log.info({ event: "oidc_sign_in_failed", reason: err.message }, "OIDC sign-in failed");
        return refuse(reply, 401, err.message);
      }
      if (isAppError(err) && err.status === 403) return refuse(reply, 403, err.message);
      throw err;
    }
  });
}
