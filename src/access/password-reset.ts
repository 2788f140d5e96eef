import type { AppContext } from "../kernel/context.ts";
import { InvalidRequestError } from "../kernel/errors.ts";
import { sql } from "../storage/sql.ts";
import { localLoginAllowed } from "./auth-settings.ts";
import { forgetRememberedCredentials } from "./outage-credentials.ts";
import { hashPassword } from "./passwords.ts";
import { checkPassword, findUserByEmail } from "./users.ts";
import { randomToken, sha256Hex } from "./util.ts";

/**
 * Password reset by mail (issue 17, spec 5). A request answers the same whether or not the
 * account exists, and its mail goes out in the background so the answer's timing does not tell
 * either. The link carries a random token valid for one hour and usable once (only its SHA-256
 * is stored); using it sets the password, spends every other outstanding link of the account
 * and revokes the account's sessions, so whoever held a session is signed out.
 */
export const RESET_VALIDITY_SECONDS = 3600;

export function mailConfigured(ctx: AppContext): boolean {
  return typeof ctx.config.mail?.smtpUrl === "string" && ctx.config.mail.smtpUrl !== "";
}

/** Accounts that may use a password at all: active, with local login allowed. */
async function resettableUser(ctx: AppContext, email: string) {
  const user = await findUserByEmail(ctx.db, email);
  if (user?.status !== "active") return null;
  if (!(await localLoginAllowed(ctx, user))) return null;
  return user;
}

export async function requestPasswordReset(
  ctx: AppContext,
  email: string,
  meta: { ip?: string } = {},
): Promise<void> {
  const user = await resettableUser(ctx, email);
  if (!user) {
    ctx.log.info({ event: "password_reset_requested", known: false }, "password reset requested");
    return;
  }
  const token = randomToken(32);
  const now = ctx.now();
  await ctx.db.query(sql`
    INSERT INTO password_reset_tokens (token_hash, user_id, created_at, expires_at, ip)
    VALUES (${sha256Hex(token)}, ${user.id}, ${now},
            ${new Date(now.getTime() + RESET_VALIDITY_SECONDS * 1000)}, ${meta.ip ?? null})`);
  const link = `${ctx.config.baseUrl}/auth/password-reset/${token}`;
  ctx.log.info({ event: "password_reset_requested", user_id: user.id }, "password reset requested");
  // In the background: the caller's answer must not wait on (or reveal) the mail server.
  void sendResetMail(ctx, user.email, link).catch((err) =>
    ctx.log.error(
      { err, event: "password_reset_mail_failed", user_id: user.id },
      "could not send the password reset mail",
    ),
  );
}

async function sendResetMail(ctx: AppContext, to: string, link: string): Promise<void> {
  const { default: nodemailer } = await import("nodemailer");
  const transport = nodemailer.createTransport(ctx.config.mail.smtpUrl as string);
  await transport.sendMail({
    from: ctx.config.mail.from,
    to,
    subject: "Reset your netmon password",
    text: [
      `Someone asked to reset the password of the netmon account ${to}.`,
      "",
      `To choose a new password, open this link within an hour (it works once):`,
      link,
      "",
      "If you did not ask for this, ignore this mail: your password stays as it is.",
    ].join("\n"),
  });
}

const BAD_LINK = "This password reset link is invalid, was already used, or has expired. Ask for a new one.";

/** Whether a link can still be used (for the page that shows the form). */
export async function resetLinkValid(ctx: AppContext, token: string): Promise<boolean> {
  const row = await ctx.db.one(sql`
    SELECT 1 FROM password_reset_tokens
    WHERE token_hash = ${sha256Hex(token)} AND used_at IS NULL AND expires_at > ${ctx.now()}`);
  return row != null;
}

/** Use a link: set the password, spend the account's links, revoke its sessions. */
export async function resetPassword(
  ctx: AppContext,
  token: string,
  password: unknown,
): Promise<{ userId: string }> {
  const pw = checkPassword(password);
  const hash = await hashPassword(pw);
  const now = ctx.now();
  const result = await ctx.db.transaction(async (tx) => {
    const link = await tx.one<{ user_id: string }>(sql`
      UPDATE password_reset_tokens SET used_at = ${now}
      WHERE token_hash = ${sha256Hex(token)} AND used_at IS NULL AND expires_at > ${now}
      RETURNING user_id`);
    if (!link) throw new InvalidRequestError(BAD_LINK, { code: "invalid_reset_link" });
    const user = await tx.one<{ id: string }>(sql`
      UPDATE users SET password_hash = ${hash}, updated_at = ${now}
      WHERE id = ${link.user_id} AND status = 'active' RETURNING id`);
    if (!user) throw new InvalidRequestError(BAD_LINK, { code: "invalid_reset_link" });
    await tx.query(sql`
      UPDATE password_reset_tokens SET used_at = ${now} WHERE user_id = ${user.id} AND used_at IS NULL`);
    await tx.query(sql`
      UPDATE sessions SET revoked_at = ${now} WHERE user_id = ${user.id} AND revoked_at IS NULL`);
    return { userId: user.id };
  });
  // The revoked sessions stop working in this process at once, not when the NOTIFY arrives.
  forgetRememberedCredentials(ctx);
  return result;
}
