/**
 * SAML 2.0 sign-in routes (spec 5): `GET /auth/saml/metadata` (this service provider, for the
 * IdP's configuration), `GET /auth/saml/login` (an AuthnRequest by HTTP-Redirect) and
 * `POST /auth/saml/consume`, the assertion consumer service the IdP posts the response to.
 */
import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import { NotFoundError, RateLimitedError } from "../../kernel/errors.ts";
import { loadAuthSettings, samlSpSettings, spEntityId } from "../auth-settings.ts";
import type { RateLimiter } from "../rate-limit.ts";
import { consumeSamlResponse, SamlError, samlLoginUrl, spMetadata } from "../saml.ts";
import { safeReturnTo } from "./session.ts";
import { finishSso, refuseSso } from "./sso-finish.ts";

/** Responses per client IP (the original's auth_saml_callback budget, 30 per 60 s). */
const CONSUME_BUDGET = { requests: 30, windowSeconds: 60 };

export async function samlRoutes(app: FastifyInstance, ctx: AppContext, limiter: RateLimiter): Promise<void> {
  const publicPage = { access: { public: true }, rateLimit: "none" } as const;

  const settings = async () => {
    const s = await loadAuthSettings(ctx);
    const sp = samlSpSettings(s, ctx.config.baseUrl);
    if (!sp) throw new NotFoundError("SAML sign-in is not enabled on this instance");
    return { s, sp };
  };

  app.get("/auth/saml/metadata", { config: publicPage }, async (_request, reply) => {
    const s = await loadAuthSettings(ctx);
    return reply
      .type("application/samlmetadata+xml; charset=utf-8")
      .send(spMetadata(ctx, spEntityId(s, ctx.config.baseUrl)));
  });

  app.get("/auth/saml/login", { config: publicPage }, async (request, reply) => {
    const { sp } = await settings();
    const q = request.query as Record<string, unknown>;
    const url = await samlLoginUrl(ctx, sp, safeReturnTo(q.return_to));
    return reply.code(302).header("location", url).header("cache-control", "no-store").send();
  });

  app.post(
    "/auth/saml/consume",
    { config: { ...publicPage, body: ["SAMLResponse", "RelayState"] } },
    async (request, reply) => {
      const budget = await limiter.consume("auth_saml_callback", request.ip, CONSUME_BUDGET);
      if (!budget.allowed) throw new RateLimitedError(budget.retryAfter);
      const { s, sp } = await settings();
      const body = (request.body ?? {}) as Record<string, unknown>;
      const response = typeof body.SAMLResponse === "string" ? body.SAMLResponse : "";
      if (response === "" || response.length > 2_000_000)
        return refuseSso(reply, 400, "No SAML response was posted.", "/auth/saml/login");
      return finishSso(
        ctx,
        request,
        reply,
        "saml",
        async () => ({
          ...(await consumeSamlResponse(ctx, sp, s.claimMappings, response)),
          returnTo: body.RelayState,
        }),
        SamlError,
      );
    },
  );
}
