import fs from "node:fs";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import { ForbiddenError, InvalidRequestError, RateLimitedError } from "../../kernel/errors.ts";
import { sql } from "../../storage/sql.ts";
import { loadAuthSettings, localLoginAllowed } from "../auth-settings.ts";
import { initialPasswordFile } from "../bootstrap.ts";
import { checkOrigin } from "../csrf.ts";
import { mailConfigured } from "../password-reset.ts";
import { verifyPassword } from "../passwords.ts";
import type { RateLimiter } from "../rate-limit.ts";
import {
  CSRF_COOKIE,
  CSRF_FIELD,
  createSession,
  csrfTokenFor,
  revokeSession,
  SESSION_COOKIE,
} from "../sessions.ts";
import { findUserByEmail, serializeUser } from "../users.ts";
import { sha256Hex } from "../util.ts";

/** Sign-in attempts per client IP (the original's 10 per 60 s). */
export const SIGN_IN_IP_BUDGET = { requests: 10, windowSeconds: 60 };
/** Failed sign-ins per account (email) before it is throttled; counted for unknown emails too. */
export const SIGN_IN_ACCOUNT_BUDGET = { requests: 5, windowSeconds: 900 };

const INVALID = "Invalid email or password";

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Served as a file: the pages' Content-Security-Policy allows no inline style. */
const SIGN_IN_CSS = `:root{color-scheme:light dark;--bg:#f6f8fa;--panel:#fff;--fg:#1f2328;--muted:#57606a;--border:#d0d7de;--accent:#0a58ca;--bad:#a40e26}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--panel:#161b22;--fg:#e6edf3;--muted:#9da7b3;--border:#30363d;--accent:#4c9aff;--bad:#ff7b72}}
body{font:15px/1.45 system-ui,sans-serif;background:var(--bg);color:var(--fg);margin:0}
main{max-width:22rem;margin:4rem auto;padding:1.5rem;background:var(--panel);border:1px solid var(--border);border-radius:10px}
h1{font-size:1.3rem;margin:0 0 1rem}label{display:block;margin:.75rem 0 .25rem}
input{width:100%;padding:.5rem;box-sizing:border-box;font:inherit;border:1px solid var(--border);border-radius:6px;background:var(--panel);color:var(--fg)}
button{margin-top:1rem;padding:.5rem 1rem;font:inherit;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer}
.error{color:var(--bad)}.hint{color:var(--muted);font-size:.9rem}code{overflow-wrap:anywhere}
`;

export function signInPage(
  opts: {
    error?: string;
    email?: string;
    returnTo?: string;
    firstStart?: { email: string; file: string };
    /** Offer "Forgot your password?" (when netmon can send mail). */
    resetLink?: boolean;
    /** Where the form posts: /users/log-in, or /auth/local/sign-in (the SSO escape hatch). */
    action?: string;
    /** An SSO mode is on: the page explains it and links the local sign-in instead of a form. */
    ssoNotice?: string;
    /** Where "Sign in with single sign-on" leads (OIDC, SAML). */
    ssoLink?: string;
  } = {},
): string {
  const err = opts.error ? `<p class="error" role="alert">${escapeHtml(opts.error)}</p>` : "";
  const first = opts.firstStart
    ? `<p class="hint">First start: sign in as <strong>${escapeHtml(opts.firstStart.email)}</strong> with the password in <code>${escapeHtml(opts.firstStart.file)}</code>, then delete that file.</p>`
    : "";
  const body = opts.ssoNotice
    ? `<p>${escapeHtml(opts.ssoNotice)}</p>${
        opts.ssoLink
          ? `<p><a class="sso" href="${escapeHtml(opts.ssoLink)}">Sign in with single sign-on</a></p>`
          : ""
      }<p class="hint">Accounts allowed to sign in with a password: <a href="/auth/local">local sign-in</a>.</p>`
    : `<form method="post" action="${escapeHtml(opts.action ?? "/users/log-in")}">
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(opts.email ?? "")}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<input type="hidden" name="return_to" value="${escapeHtml(opts.returnTo ?? "/")}">
<button type="submit">Sign in</button>
</form>${opts.resetLink ? `<p class="hint"><a href="/auth/password-reset">Forgot your password?</a></p>` : ""}`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Sign in · netmon</title>
<link rel="stylesheet" href="/users/log-in.css"></head>
<body><main><h1>Sign in to netmon</h1>${first}${err}${body}</main></body></html>`;
}

const LOCAL_OFF =
  "Password sign-in is off for this account: sign in through single sign-on, or ask an administrator to allow local sign-in";

const SSO_NOTICE: Record<string, string> = {
  proxy_jwt:
    "This instance signs you in through your organisation's gateway (single sign-on): open netmon through it.",
  oidc: "This instance signs you in with single sign-on (OpenID Connect).",
  saml: "This instance signs you in with single sign-on (SAML).",
};

/** Start the browser session: the httpOnly session cookie and the CSRF cookie. Returns the CSRF token. */
export { safeReturnTo };

export function setSessionCookies(
  ctx: AppContext,
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
): string {
  const secure = secureCookies(ctx, request);
  const csrf = csrfTokenFor(ctx, token);
  const maxAge = ctx.config.sessionAbsoluteTimeoutSeconds;
  reply.setCookie(SESSION_COOKIE, token, { path: "/", httpOnly: true, sameSite: "lax", secure, maxAge });
  reply.setCookie(CSRF_COOKIE, csrf, { path: "/", httpOnly: false, sameSite: "lax", secure, maxAge });
  return csrf;
}

function isForm(request: FastifyRequest): boolean {
  return (request.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded");
}

/** Only same-site relative paths are followed after sign-in. */
function safeReturnTo(v: unknown): string {
  return typeof v === "string" && /^\/(?![/\\])/.test(v) ? v : "/";
}

function secureCookies(ctx: AppContext, request: FastifyRequest): boolean {
  return request.protocol === "https" || ctx.config.baseUrl.startsWith("https:");
}

function clearCookies(ctx: AppContext, request: FastifyRequest, reply: FastifyReply): void {
  const secure = secureCookies(ctx, request);
  reply.clearCookie(SESSION_COOKIE, { path: "/", httpOnly: true, sameSite: "lax", secure });
  reply.clearCookie(CSRF_COOKIE, { path: "/", sameSite: "lax", secure });
}

export async function sessionRoutes(
  app: FastifyInstance,
  ctx: AppContext,
  limiter: RateLimiter,
): Promise<void> {
  const publicPage = { access: { public: true }, rateLimit: "none" } as const;
  // While the generated first-admin password file exists, the sign-in page says where it is.
  const firstStart = () => {
    const file = initialPasswordFile(ctx.config.dataDir);
    return fs.existsSync(file) ? { email: ctx.config.admin.email, file } : undefined;
  };

  const page = (local: boolean) => async (request: FastifyRequest, reply: FastifyReply) => {
    const q = request.query as Record<string, unknown>;
    const mode = (await loadAuthSettings(ctx)).mode;
    return reply
      .type("text/html; charset=utf-8")
      .header("cache-control", "no-store")
      .send(
        signInPage({
          returnTo: safeReturnTo(q.return_to),
          firstStart: firstStart(),
          resetLink: mailConfigured(ctx),
          action: local ? "/auth/local/sign-in" : "/users/log-in",
          ssoNotice: !local && mode !== "password" ? SSO_NOTICE[mode] : undefined,
          ssoLink:
            !local && (mode === "oidc" || mode === "saml")
              ? `/auth/${mode}/login?return_to=${encodeURIComponent(safeReturnTo(q.return_to))}`
              : undefined,
        }),
      );
  };
  app.get("/users/log-in", { config: publicPage }, page(false));
  // The escape hatch of the SSO modes (spec 5): a password form for accounts allowed local sign-in.
  app.get("/auth/local", { config: publicPage }, page(true));

  app.get("/users/log-in.css", { config: publicPage }, async (_request, reply) =>
    reply.type("text/css; charset=utf-8").header("cache-control", "public, max-age=3600").send(SIGN_IN_CSS),
  );

  const signIn =
    (action: string) =>
    async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
      checkOrigin(ctx, request);
      const form = isForm(request);
      const body = (request.body ?? {}) as Record<string, unknown>;
      const email = typeof body.email === "string" ? body.email.trim() : "";
      const password = typeof body.password === "string" ? body.password : "";
      const returnTo = safeReturnTo(body.return_to);
      if (email === "" || password === "") {
        if (form) {
          return reply
            .code(400)
            .type("text/html; charset=utf-8")
            .send(signInPage({ error: "Email and password are required", email, returnTo, action }));
        }
        throw new InvalidRequestError("email and password are required");
      }

      const throttled = (retryAfter: number) => {
        if (!form)
          throw new RateLimitedError(retryAfter, {
            extra: { message: "Too many sign-in attempts. Please try again later." },
          });
        return reply
          .code(429)
          .header("retry-after", String(retryAfter))
          .type("text/html; charset=utf-8")
          .send(
            signInPage({
              error: "Too many sign-in attempts. Please try again later.",
              email,
              returnTo,
              action,
            }),
          );
      };
      const ipDecision = await limiter.consume("auth_ip", request.ip, SIGN_IN_IP_BUDGET);
      if (!ipDecision.allowed) return throttled(ipDecision.retryAfter);
      // Keyed by a hash of the normalised email whether or not the account exists.
      const accountKey = sha256Hex(email.toLowerCase());
      const accountDecision = await limiter.peek("auth_account", accountKey, SIGN_IN_ACCOUNT_BUDGET);
      if (!accountDecision.allowed) return throttled(accountDecision.retryAfter);

      const user = await findUserByEmail(ctx.db, email);
      const passwordOk = await verifyPassword(user?.password_hash ?? null, password);
      if (!user || !passwordOk || user.status !== "active") {
        await limiter.consume("auth_account", accountKey, SIGN_IN_ACCOUNT_BUDGET);
        request.log.info({ event: "sign_in_failed" }, "sign-in failed");
        if (form) {
          return reply
            .code(401)
            .type("text/html; charset=utf-8")
            .send(signInPage({ error: INVALID, email, returnTo, action }));
        }
        return reply.code(401).send({ error: "invalid_credentials", message: INVALID });
      }

      // A password signs in only accounts allowed local sign-in (spec 5; the admin toggle).
      if (!(await localLoginAllowed(ctx, user))) {
        request.log.info(
          { event: "sign_in_refused", user_id: user.id },
          "local sign-in is off for this account",
        );
        if (form) {
          return reply
            .code(403)
            .type("text/html; charset=utf-8")
            .send(signInPage({ error: LOCAL_OFF, email, returnTo, action }));
        }
        throw new ForbiddenError(LOCAL_OFF, { code: "local_login_disabled" });
      }

      const now = ctx.now();
      const session = await createSession(ctx, user.id, {
        ip: request.ip,
        userAgent:
          typeof request.headers["user-agent"] === "string" ? request.headers["user-agent"] : undefined,
      });
      const updated = await ctx.db.one(sql`
      UPDATE users SET last_login_at = ${now}, authenticated_at = ${now}, last_auth_method = 'password'
      WHERE id = ${user.id} RETURNING *`);
      request.log.info({ event: "sign_in", user_id: user.id }, "signed in");
      const csrf = setSessionCookies(ctx, request, reply, session.token);
      reply.header("cache-control", "no-store");
      if (form) return reply.code(303).header("location", returnTo).send();
      return reply.send({
        user: serializeUser(updated as never),
        csrf_token: csrf,
        expires_at: session.expiresAt.toISOString(),
      });
    };
  const signInBody = { ...publicPage, body: ["email", "password", "return_to", CSRF_FIELD] };
  app.post("/users/log-in", { config: signInBody }, signIn("/users/log-in"));
  app.post("/auth/local/sign-in", { config: signInBody }, signIn("/auth/local/sign-in"));

  const signOut = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.actor?.authMethod === "session" && request.sessionToken) {
      await revokeSession(ctx, request.sessionToken);
      request.log.info({ event: "sign_out", user_id: request.actor.id }, "signed out");
    }
    clearCookies(ctx, request, reply);
    if (isForm(request)) return reply.code(303).header("location", "/users/log-in").send();
    return reply.send({ status: "signed_out" });
  };
  const optional = { access: { optional: true }, rateLimit: "none" } as const;
  app.post("/users/log-out", { config: { ...optional, body: [CSRF_FIELD] } }, signOut);
  app.delete("/users/log-out", { config: optional }, signOut);
}
