import cookie from "@fastify/cookie";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../kernel/context.ts";
import { AuthenticationRequiredError, ForbiddenError, RateLimitedError } from "../kernel/errors.ts";
import type { Feature } from "../kernel/feature.ts";
import { loadAuthSettings } from "./auth-settings.ts";
import { presentsCachedCredential, resolveCredentials } from "./authenticate.ts";
import { bootstrapAdmin } from "./bootstrap.ts";
import { type CredentialCache, credentialCache } from "./credential-cache.ts";
import { checkOrigin } from "./csrf.ts";
import type { RateLimitScope } from "./rate-limit.ts";
import { type Budget, createRateStore, RateLimiter } from "./rate-limit.ts";
import { createRegistry, defaultRateLimit, type RouteRecord } from "./registry.ts";
import { adminRoutes } from "./routes/admin.ts";
import { credentialRoutes } from "./routes/credentials.ts";
import { oidcRoutes } from "./routes/oidc.ts";
import { passwordResetRoutes } from "./routes/password-reset.ts";
import { proxyCredentials } from "./routes/proxy-sign-in.ts";
import { samlRoutes } from "./routes/saml.ts";
import { sessionRoutes } from "./routes/session.ts";
import { decide, ruleKind } from "./rule.ts";
import { CSRF_FIELD, CSRF_HEADER, csrfTokenMatches, SESSION_COOKIE } from "./sessions.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** Raw session cookie when the actor was authenticated by it (CSRF check). */
    sessionToken?: string;
  }
}

/** Per-server access state, reachable from the context (fixtures, other domains). */
export interface AccessState {
  limiter: RateLimiter;
  routes: RouteRecord[];
}

const STATES = new WeakMap<AppContext, AccessState>();

export function accessState(ctx: AppContext): AccessState {
  const s = STATES.get(ctx);
  if (!s) throw new Error("the access feature is not running on this context");
  return s;
}

/** Response header set when the access rule (not the handler) refused the request with 403. */
export const ACCESS_DENIED_HEADER = "x-access-denied";

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Decide a request against the route's rule (see rule.ts). */
export const enforce = decide;

function presentsCredentials(request: FastifyRequest): boolean {
  const h = request.headers;
  return (
    h.authorization !== undefined ||
    h["x-api-key"] !== undefined ||
    (typeof h.cookie === "string" && h.cookie.includes(SESSION_COOKIE))
  );
}

function budgetFor(ctx: AppContext, scope: RateLimitScope): Budget | null {
  switch (scope) {
    case "api_default":
      return ctx.config.rateLimitApiDefault;
    case "admin":
      return ctx.config.rateLimitAdmin;
    case "control":
      return ctx.config.rateLimitControl;
    case "mcp":
      return ctx.config.rateLimitMcp;
    case "ingest":
      return ctx.config.ingest.rateLimit;
    default:
      return null;
  }
}

export function createAccessFeature(): Feature {
  let state: AccessState | null = null;
  let sweepTimer: NodeJS.Timeout | null = null;
  let cache: CredentialCache | null = null;

  return {
    name: "access",
    async routes(app: FastifyInstance, ctx: AppContext) {
      await app.register(cookie);
      const routes = createRegistry(app);
      state = { limiter: new RateLimiter(createRateStore(ctx), () => ctx.now()), routes };
      STATES.set(ctx, state);
      const limiter = state.limiter;

      app.addHook("onRoute", (opts) => {
        const methods = Array.isArray(opts.method) ? opts.method : [opts.method];
        const access = opts.config?.access;
        const url = opts.url ?? opts.path;
        if (!access) {
          throw new Error(
            `route ${methods.join(",")} ${url} declares no config.access (see src/access/rule.ts)`,
          );
        }
        const rateLimit = opts.config?.rateLimit ?? defaultRateLimit(url);
        for (const method of methods) {
          if (method === "HEAD" && routes.some((r) => r.method === "GET" && r.url === url)) continue;
          routes.push({ method, url, access, rateLimit });
        }
      });

      app.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
        const config = request.routeOptions.config;
        const rule = config?.access;
        if (!rule) return; // no route matched: the 404 handler answers
        if (ruleKind(rule) !== "public") {
          // Credential guessing is budgeted per IP on its own: once exhausted, requests that
          // present credentials get 429 before any lookup (the database is not a guessing oracle).
          // A credential in the credential cache needs no lookup: its check of that budget is
          // made together with the route's budget (one round trip on PostgreSQL, issue 14).
          const failures = ctx.config.rateLimitAuthFailures;
          let guardDeferred = false;
          if (presentsCredentials(request)) {
            guardDeferred =
              presentsCachedCredential(ctx, request) && (await loadAuthSettings(ctx)).mode !== "proxy_jwt";
            if (!guardDeferred) await checkGuard(limiter, request, failures);
          }
          const creds =
            (await proxyCredentials(ctx, request, reply)) ?? (await resolveCredentials(ctx, request));
          if (creds.presented && !creds.actor) {
            // Evicted meanwhile: the look that was put off is made now, as it would have been.
            if (guardDeferred) await checkGuard(limiter, request, failures);
            guardDeferred = false;
            await limiter.consume("auth_failures", `ip:${request.ip}`, failures).catch(() => undefined);
          }
          let actor = creds.actor;
          if (ruleKind(rule) === "optional" && actor && actor.kind !== "user") actor = null;
          const denied = enforce(rule, actor, creds.presented ? creds.reason : undefined);
          if (denied) {
            // 401s are answered before the budget: they consume nothing.
            if (denied instanceof AuthenticationRequiredError) {
              if (guardDeferred) await checkGuard(limiter, request, failures);
              throw denied;
            }
          }
          request.actor = actor;
          if (actor?.authMethod === "session") request.sessionToken = creds.sessionToken;
          await applyBudget(
            ctx,
            limiter,
            request,
            reply,
            config.rateLimit ?? defaultRateLimit(request.routeOptions.url ?? ""),
            guardDeferred ? failures : null,
          );
          if (denied) {
            // Marks a denial by the route's access rule (vs. a handler's own 403, e.g. an
            // ownership check); the authorization-matrix test relies on it.
            reply.header(ACCESS_DENIED_HEADER, "rule");
            throw denied;
          }
          return;
        }
        await applyBudget(
          ctx,
          limiter,
          request,
          reply,
          config.rateLimit ?? defaultRateLimit(request.routeOptions.url ?? ""),
          null,
        );
      });

      // CSRF: a cookie-authenticated mutation must carry the session's token (header
      // x-csrf-token or form field _csrf) and, when the browser sends Origin, come from our origin.
      app.addHook("preHandler", async (request: FastifyRequest) => {
        const actor = request.actor;
        if (actor?.authMethod !== "session" || SAFE_METHODS.has(request.method)) return;
        checkOrigin(ctx, request);
        const body = request.body as Record<string, unknown> | undefined;
        const presented =
          request.headers[CSRF_HEADER] ??
          (body && typeof body === "object" && !Array.isArray(body) ? body[CSRF_FIELD] : undefined);
        if (!request.sessionToken || !csrfTokenMatches(ctx, request.sessionToken, presented)) {
          throw new ForbiddenError("missing or invalid CSRF token", { code: "csrf_invalid" });
        }
      });

      await sessionRoutes(app, ctx, limiter);
      await oidcRoutes(app, ctx, limiter);
      await samlRoutes(app, ctx, limiter);
      await passwordResetRoutes(app, ctx, limiter);
      await credentialRoutes(app, ctx);
      await adminRoutes(app, ctx);
    },

    async start(ctx: AppContext) {
      await bootstrapAdmin(ctx);
      cache = credentialCache(ctx);
      await cache.start();
      const limiter = state?.limiter;
      if (limiter && limiter.store.kind !== "redis") {
        sweepTimer = setInterval(() => {
          limiter.sweep().catch((err) => ctx.log.warn({ err }, "rate-limit sweep failed"));
          // Every minute: per-key state past its window is garbage (a spray of client
          // addresses grows it at the request rate), and the sweep is one cheap DELETE.
        }, 60_000);
        sweepTimer.unref();
      }
    },

    async stop() {
      await cache?.stop();
      cache = null;
      if (sweepTimer) clearInterval(sweepTimer);
      sweepTimer = null;
      await state?.limiter.close();
    },
  };
}

/** The failed-authentication budget of the client IP: 429 once exhausted. */
async function checkGuard(limiter: RateLimiter, request: FastifyRequest, failures: Budget): Promise<void> {
  const seen = await limiter.peek("auth_failures", `ip:${request.ip}`, failures).catch(() => null);
  if (seen && !seen.allowed) throw new RateLimitedError(seen.retryAfter);
}

/** `guard`: the failed-authentication budget still to look at (put off to be checked with this). */
async function applyBudget(
  ctx: AppContext,
  limiter: RateLimiter,
  request: FastifyRequest,
  reply: FastifyReply,
  scope: RateLimitScope,
  guard: Budget | null,
): Promise<void> {
  const actor = request.actor;
  // Gateway/agent credentials always draw from their own per-credential `control` budget.
  if (scope !== "none" && (actor?.kind === "gateway" || actor?.kind === "agent")) scope = "control";
  const budget = budgetFor(ctx, scope);
  if (!budget) {
    if (guard) await checkGuard(limiter, request, guard);
    return;
  }
  const subject =
    (scope === "control" || scope === "ingest") && actor
      ? `cred:${actor.tokenJti ?? actor.sessionId ?? actor.id}`
      : scope === "mcp" && actor
        ? `ip:${request.ip}:${actor.tokenJti ?? actor.id}`
        : `ip:${request.ip}`;
  let decision: Awaited<ReturnType<RateLimiter["consume"]>>;
  try {
    if (guard) {
      const r = await limiter.consumeGuarded(
        "auth_failures",
        `ip:${request.ip}`,
        guard,
        scope,
        subject,
        budget,
      );
      if (!r.decision) throw new RateLimitedError(r.guard.retryAfter);
      decision = r.decision;
    } else {
      decision = await limiter.consume(scope, subject, budget);
    }
  } catch (err) {
    if (err instanceof RateLimitedError) throw err;
    // The counter store is down: serve the request rather than fail the API (logged).
    request.log.warn({ err, scope }, "rate-limit store unavailable; request not budgeted");
    return;
  }
  reply.header("x-ratelimit-limit", String(decision.limit));
  reply.header("x-ratelimit-remaining", String(decision.remaining));
  reply.header("x-ratelimit-reset", String(decision.reset));
  if (!decision.allowed) throw new RateLimitedError(decision.retryAfter);
}
