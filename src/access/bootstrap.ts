import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { transitionRow } from "../jsonapi/engine/transitions.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";
import { verifyPassword } from "./passwords.ts";
import { findUserByEmail, insertUser, setUserPassword, usersTable } from "./users.ts";

export type BootstrapOutcome =
  | "created"
  | "password_synced"
  | "exists"
  | "admin_exists"
  | "restored"
  | "no_password"
  | "generated"
  | "error";

/** Where a first start leaves the generated admin password (read it, sign in, then delete it). */
export function initialPasswordFile(dataDir: string): string {
  return path.join(dataDir, "initial-admin-password");
}

/**
 * Create the first admin at start-up (spec 5, reference 4.5):
 * password from SERVICE_ADMIN_PASSWORD, else SERVICE_ADMIN_PASSWORD_FILE (trimmed); neither →
 * one warning saying how to create an admin. If the email exists: with
 * SERVICE_ADMIN_PASSWORD_FORCE_SYNC the mounted secret is re-applied when it differs; else
 * nothing. Otherwise, if any admin exists nothing happens; else the admin is created.
 */
export async function bootstrapAdmin(ctx: AppContext): Promise<BootstrapOutcome> {
  const { email, password: envPassword, passwordFile, forceSync } = ctx.config.admin;
  let password = envPassword && envPassword.trim() !== "" ? envPassword : undefined;
  if (!password && passwordFile) {
    try {
      const text = fs.readFileSync(passwordFile, "utf8").trim();
      if (text !== "") password = text;
    } catch (err) {
      ctx.log.error(
        { file: passwordFile, code: (err as NodeJS.ErrnoException).code },
        "cannot read SERVICE_ADMIN_PASSWORD_FILE; bootstrap admin not applied",
      );
      return "error";
    }
  }

  const existing = await findUserByEmail(ctx.db, email);
  const activeAdmin = await ctx.db.one(
    sql`SELECT 1 FROM users WHERE role = 'admin' AND status = 'active' LIMIT 1`,
  );
  if (existing && !activeAdmin && password) {
    // Nobody can administer the instance (the last admin was demoted or disabled before that
    // was refused, or by hand in the database): the operator's configured secret restores one.
    await setUserPassword(ctx, existing.id, password);
    await ctx.db.transaction((tx) =>
      transitionRow(tx, usersTable, existing.id, "restore_admin", { role: "admin" }, ctx.now()),
    );
    ctx.log.warn({ email, user_id: existing.id }, "no active admin existed: bootstrap admin restored");
    return "restored";
  }
  if (existing) {
    if (password && forceSync && !(await verifyPassword(existing.password_hash, password))) {
      await setUserPassword(ctx, existing.id, password);
      ctx.log.info(
        { email, user_id: existing.id },
        "bootstrap admin password re-applied (SERVICE_ADMIN_PASSWORD_FORCE_SYNC)",
      );
      return "password_synced";
    }
    return "exists";
  }
  if (activeAdmin) return "admin_exists";
  if (!password && ctx.config.admin.generate) {
    // First start with nothing configured: a console that nobody can sign in to is useless, and
    // a fixed default password is worse. A random one goes to a 0600 file, never to the log.
    const generated = crypto.randomBytes(18).toString("base64url");
    try {
      const user = await insertUser(ctx, {
        email,
        display_name: "admin",
        role: "admin",
        password: generated,
      });
      const file = initialPasswordFile(ctx.config.dataDir);
      fs.mkdirSync(ctx.config.dataDir, { recursive: true, mode: 0o700 });
      fs.writeFileSync(file, `${generated}\n`, { mode: 0o600 });
      ctx.log.warn(
        { email, user_id: user.id, file },
        `first start: created ${email}; its password is in ${file}. Sign in, then delete the file`,
      );
      return "generated";
    } catch (err) {
      if ((err as { code?: string }).code === "email_taken") return "exists";
      throw err;
    }
  }
  if (!password) {
    ctx.log.warn(
      "no admin user exists and no bootstrap password is configured: set SERVICE_ADMIN_PASSWORD " +
        "(or SERVICE_ADMIN_PASSWORD_FILE) and restart, or run " +
        "`netmon users create --email EMAIL --role admin --password PASSWORD`",
    );
    return "no_password";
  }
  try {
    const user = await insertUser(ctx, { email, display_name: "admin", role: "admin", password });
    ctx.log.info({ email, user_id: user.id }, "bootstrap admin created");
    return "created";
  } catch (err) {
    // Another replica created it at the same moment.
    if ((err as { code?: string }).code === "email_taken") return "exists";
    throw err;
  }
}
