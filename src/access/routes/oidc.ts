/**
 * OIDC sign-in routes (spec 5): `GET /auth/oidc/login` sends the browser to the identity
 * provider; `GET /auth/oidc/callback` (the redirect URI `{NETMON_BASE_URL}/auth/oidc/callback`)
 * validates the answer, signs the user in (found by subject, linked by email or provisioned as a
 * viewer; disabled accounts refused) and starts a browser session.
 */
import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import { NotFoundError, RateLimitedError } from "../../kernel/errors.ts";
import { loadAuthSettings, oidcClientSettings } from "../auth-settings.ts";
import { finishOidcLogin, OidcError, startOidcLogin } from "../oidc.ts";
import type { RateLimiter } from "../rate-limit.ts";
import { safeReturnTo } from "./session.ts";
import { finishSso, refuseSso } from "./sso-finish.ts";

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

  app.get("/auth/oidc/login", { config: publicPage }, async (request, reply) => {
    const { rp } = await settings();
    const q = request.query as Record<string, unknown>;
    try {
      const url = await startOidcLogin(ctx, rp, safeReturnTo(q.return_to));
      return reply.code(302).header("location", url).header("cache-control", "no-store").send();
    } catch (err) {
      if (!(err instanceof OidcError)) throw err;
      request.log.warn({ event: "oidc_unavailable", reason: err.message }, "OIDC login could not start");
      return refuseSso(
        reply,
        502,
        `The identity provider cannot be reached: ${err.message}`,
        "/auth/oidc/login",
      );
    }
  });

  app.get("/auth/oidc/callback", { config: publicPage }, async (request, reply) => {
    const budget = await limiter.consume("auth_oidc_callback", request.ip, CALLBACK_BUDGET);
    if (!budget.allowed) throw new RateLimitedError(budget.retryAfter);
    const { s, rp } = await settings();
    const query = (request.raw.url ?? "").split("?")[1] ?? "";
    return finishSso(
      ctx,
      request,
      reply,
      "oidc",
      () => finishOidcLogin(ctx, rp, s.claimMappings, query),
      OidcError,
    );
  });
}
