/**
 * Users signed in by an identity provider (gateway proxy JWT; OIDC and SAML use the same path):
 * found by the provider's subject (`external_id`), else by email (the account is then linked to
 * that subject), else provisioned as a `viewer` (spec 5). A disabled account is refused in
 * every mode. Each sign-in records `last_login_at` and `last_auth_method`.
 */
import type { AppContext } from "../kernel/context.ts";
import { ForbiddenError } from "../kernel/errors.ts";
import { asDomainError } from "../storage/db-error.ts";
import { sql } from "../storage/sql.ts";
import type { UserRow } from "./users.ts";

export type ExternalProvider = "gateway" | "oidc" | "saml";

export interface ExternalIdentity {
  sub: string;
  email: string;
  name: string | null;
}

export async function signInExternalUser(
  ctx: AppContext,
  provider: ExternalProvider,
  who: ExternalIdentity,
): Promise<UserRow> {
  const now = ctx.now();
  const user = await ctx.db.transaction(async (tx) => {
    let row = await tx.one<UserRow>(
      sql`SELECT * FROM users WHERE external_provider = ${provider} AND external_id = ${who.sub} FOR UPDATE`,
    );
    if (!row) {
      const byEmail = await tx.one<UserRow>(
        sql`SELECT * FROM users WHERE lower(email) = lower(${who.email}) FOR UPDATE`,
      );
      if (byEmail && byEmail.external_id !== null && byEmail.external_provider === provider) {
        // The email belongs to another subject of the same provider: never merge two identities.
        throw new ForbiddenError("this email is linked to a different identity at the provider");
      }
      if (byEmail) {
        row = await tx.one<UserRow>(sql`
          UPDATE users SET external_provider = ${provider}, external_id = ${who.sub}, updated_at = ${now}
          WHERE id = ${byEmail.id} RETURNING *`);
      }
    }
    if (!row) {
      try {
        row = await tx.one<UserRow>(sql`
          INSERT INTO users (email, display_name, role, external_provider, external_id, confirmed_at,
                             local_login_enabled, inserted_at, updated_at)
          VALUES (${who.email}, ${who.name}, 'viewer', ${provider}, ${who.sub}, ${now}, false, ${now}, ${now})
          RETURNING *`);
      } catch (err) {
        throw asDomainError(err, { message: "a user with this email already exists", code: "email_taken" });
      }
    }
    if (!row) throw new Error("external sign-in produced no user");
    if (row.status !== "active")
      throw new ForbiddenError("this account is disabled", { code: "account_disabled" });
    return (await tx.one<UserRow>(sql`
      UPDATE users SET last_login_at = ${now}, authenticated_at = ${now}, last_auth_method = ${provider},
        display_name = COALESCE(display_name, ${who.name})
      WHERE id = ${row.id} RETURNING *`)) as UserRow;
  });
  ctx.log.info({ event: "sign_in", user_id: user.id, method: provider }, "signed in");
  return user;
}
