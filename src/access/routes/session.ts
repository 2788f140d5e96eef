import fs from "node:fs";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import { InvalidRequestError, RateLimitedError } from "../../kernel/errors.ts";
import { sql } from "../../storage/sql.ts";
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
  } = {},
): string {
  const err = opts.error ? `<p class="error" role="alert">${escapeHtml(opts.error)}</p>` : "";
  const first = opts.firstStart
    ? `<p class="hint">First start: sign in as <strong>${escapeHtml(opts.firstStart.email)}</strong> with the password in <code>${escapeHtml(opts.firstStart.file)}</code>, then delete that file.</p>`
    : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Sign in · netmon</title>
<link rel="stylesheet" href="/users/log-in.css"></head>
<body><main><h1>Sign in to netmon</h1>${first}${err}
<form method="post" action="/users/log-in">
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(opts.email ?? "")}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<input type="hidden" name="return_to" value="${escapeHtml(opts.returnTo ?? "/")}">
<button type="submit">Sign in</button>
</form>${opts.resetLink ? `<p class="hint"><a href="/auth/password-reset">Forgot your password?</a></p>` : ""}</main></body></html>`;
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

  app.get("/users/log-in", { config: publicPage }, async (request, reply) => {
    const q = request.query as Record<string, unknown>;
    return reply
      .type("text/html; charset=utf-8")
      .header("cache-control", "no-store")
      .send(
        signInPage({
          returnTo: safeReturnTo(q.return_to),
          firstStart: firstStart(),
          resetLink: mailConfigured(ctx),
        }),
      );
  });

  app.get("/users/log-in.css", { config: publicPage }, async (_request, reply) =>
    reply.type("text/css; charset=utf-8").header("cache-control", "public, max-age=3600").send(SIGN_IN_CSS),
  );

  app.post(
    "/users/log-in",
    { config: { ...publicPage, body: ["email", "password", "return_to", CSRF_FIELD] } },
    async (request, reply) => {
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
            .send(signInPage({ error: "Email and password are required", email, returnTo }));
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
          .send(signInPage({ error: "Too many sign-in attempts. Please try again later.", email, returnTo }));
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
            .send(signInPage({ error: INVALID, email, returnTo }));
        }
        return reply.code(401).send({ error: "invalid_credentials", message: INVALID });
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
      const secure = secureCookies(ctx, request);
      const csrf = csrfTokenFor(ctx, session.token);
      const maxAge = ctx.config.sessionAbsoluteTimeoutSeconds;
      reply.setCookie(SESSION_COOKIE, session.token, {
        path: "/",
        httpOnly: true,
        sameSite: "lax",
        secure,
        maxAge,
      });
      reply.setCookie(CSRF_COOKIE, csrf, { path: "/", httpOnly: false, sameSite: "lax", secure, maxAge });
      reply.header("cache-control", "no-store");
      if (form) return reply.code(303).header("location", returnTo).send();
      return reply.send({
        user: serializeUser(updated as never),
        csrf_token: csrf,
        expires_at: session.expiresAt.toISOString(),
      });
    },
  );

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
