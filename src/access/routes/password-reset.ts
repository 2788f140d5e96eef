import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import { InvalidRequestError, NotFoundError, RateLimitedError } from "../../kernel/errors.ts";
import { checkOrigin } from "../csrf.ts";
import { mailConfigured, requestPasswordReset, resetLinkValid, resetPassword } from "../password-reset.ts";
import type { RateLimiter } from "../rate-limit.ts";
import { sha256Hex } from "../util.ts";

/** Reset mails per account: enough for a typo or two, not a mail bomb. */
const RESET_ACCOUNT_BUDGET = { requests: 3, windowSeconds: 3600 };
/** Reset requests and link uses per client IP (its own budget: sign-in failures do not spend it). */
const RESET_IP_BUDGET = { requests: 20, windowSeconds: 60 };
const SENT =
  "If an account with that email may sign in with a password, a reset link is on its way. It works once, for one hour.";
const TOKEN = /^[A-Za-z0-9_-]{20,100}$/;

// A feature switched off, not a server fault: 404 with a code saying why (never a 5xx).
const mailNotConfigured = () =>
  new NotFoundError(
    "password reset by mail is not configured on this server (NETMON_SMTP_URL); ask an administrator",
    { code: "mail_not_configured" },
  );

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)} · netmon</title>
<link rel="stylesheet" href="/users/log-in.css"></head>
<body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`;
}

const requestForm = (note = "") =>
  page(
    "Reset your password",
    `${note}<form method="post" action="/auth/password-reset">
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required>
<button type="submit">Send a reset link</button></form>
<p class="hint"><a href="/users/log-in">Back to sign in</a></p>`,
  );

const newPasswordForm = (token: string, error = "") =>
  page(
    "Choose a new password",
    `${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ""}
<form method="post" action="/auth/password-reset/${escapeHtml(token)}">
<label for="password">New password</label><input id="password" name="password" type="password" autocomplete="new-password" minlength="12" required>
<button type="submit">Set the password</button></form>`,
  );

const wantsHtml = (r: FastifyRequest) => /\btext\/html\b/.test(String(r.headers.accept ?? ""));

const isForm = (r: FastifyRequest) =>
  (r.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded");

function html(reply: FastifyReply, status: number, body: string) {
  return reply.code(status).type("text/html; charset=utf-8").header("cache-control", "no-store").send(body);
}

export async function passwordResetRoutes(
  app: FastifyInstance,
  ctx: AppContext,
  limiter: RateLimiter,
): Promise<void> {
  const publicPage = { access: { public: true }, rateLimit: "none" } as const;

  app.get("/auth/password-reset", { config: publicPage }, async (_request, reply) => {
    if (!mailConfigured(ctx)) {
      return html(
        reply,
        200,
        page("Reset your password", `<p class="error">${escapeHtml(mailNotConfigured().message)}</p>`),
      );
    }
    return html(reply, 200, requestForm());
  });

  app.post("/auth/password-reset", { config: { ...publicPage, body: ["email"] } }, async (request, reply) => {
    checkOrigin(ctx, request);
    if (!mailConfigured(ctx)) throw mailNotConfigured();
    const body = (request.body ?? {}) as Record<string, unknown>;
    const email = typeof body.email === "string" ? body.email.trim() : "";
    if (email === "" || email.length > 320) {
      throw new InvalidRequestError("email is required", { source: { pointer: "/email" } });
    }
    const ip = await limiter.consume("reset_ip", request.ip, RESET_IP_BUDGET);
    if (!ip.allowed) throw new RateLimitedError(ip.retryAfter);
    // Counted for unknown addresses too, so the budget does not reveal which exist.
    const account = await limiter.consume(
      "reset_account",
      sha256Hex(email.toLowerCase()),
      RESET_ACCOUNT_BUDGET,
    );
    if (account.allowed) await requestPasswordReset(ctx, email, { ip: request.ip });
    if (isForm(request)) return html(reply, 202, requestForm(`<p role="status">${escapeHtml(SENT)}</p>`));
    return reply.code(202).send({ status: "accepted", message: SENT });
  });

  app.get<{ Params: { token: string } }>(
    "/auth/password-reset/:token",
    { config: publicPage },
    async (request, reply) => {
      const token = request.params.token;
      const valid = TOKEN.test(token) && (await resetLinkValid(ctx, token));
      // A browser gets a page; any other client the documented JSON shapes.
      if (!wantsHtml(request)) {
        if (!valid) resetPasswordInvalid();
        return reply.header("cache-control", "no-store").send({ status: "valid" });
      }
      if (!valid) {
        return html(
          reply,
          400,
          page(
            "Reset your password",
            `<p class="error" role="alert">This link is invalid, was already used, or has expired.</p><p><a href="/auth/password-reset">Ask for a new one</a></p>`,
          ),
        );
      }
      return html(reply, 200, newPasswordForm(token));
    },
  );

  app.post<{ Params: { token: string } }>(
    "/auth/password-reset/:token",
    { config: { ...publicPage, body: ["password"] } },
    async (request, reply) => {
      checkOrigin(ctx, request);
      const ip = await limiter.consume("reset_ip", request.ip, RESET_IP_BUDGET);
      if (!ip.allowed) throw new RateLimitedError(ip.retryAfter);
      const token = request.params.token;
      const body = (request.body ?? {}) as Record<string, unknown>;
      try {
        if (!TOKEN.test(token)) resetPasswordInvalid();
        const { userId } = await resetPassword(ctx, token, body.password);
        request.log.info({ event: "password_reset", user_id: userId }, "password reset");
      } catch (err) {
        if (isForm(request) && err instanceof InvalidRequestError) {
          return html(reply, 400, newPasswordForm(token, err.message));
        }
        throw err;
      }
      if (isForm(request)) return reply.code(303).header("location", "/users/log-in").send();
      return reply.send({ status: "password_changed", message: "Password changed; sign in with it." });
    },
  );
}

function resetPasswordInvalid(): never {
  throw new InvalidRequestError(
    "This password reset link is invalid, was already used, or has expired. Ask for a new one.",
    { code: "invalid_reset_link" },
  );
}
