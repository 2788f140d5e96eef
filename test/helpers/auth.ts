import { randomBytes } from "node:crypto";
import { type Role, SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { createRoleProfile as createProfile } from "../../src/access/role-profiles.ts";
import { createApiToken, TOKEN_SCOPES } from "../../src/access/tokens.ts";
import { insertUser } from "../../src/access/users.ts";
import type { RunningServer } from "../../src/server.ts";

/**
 * Credentials for end-to-end tests, created through the access domain functions on
 * `server.ctx` (not over HTTP, so they consume no request budget).
 */
type ServerLike = Pick<RunningServer, "ctx">;

let seq = 0;
function unique(): string {
  seq += 1;
  return `${Date.now().toString(36)}${seq}${randomBytes(3).toString("hex")}`;
}

export interface TestUser {
  id: string;
  email: string;
  password: string;
}

export async function createUser(
  server: ServerLike,
  opts: {
    role: Role;
    email?: string;
    password?: string;
    roleProfileId?: string | null;
    displayName?: string;
  },
): Promise<TestUser> {
  const email = opts.email ?? `${opts.role}-${unique()}@example.test`;
  const password = opts.password ?? `pw-${randomBytes(12).toString("hex")}`;
  const user = await insertUser(server.ctx, {
    email,
    password,
    role: opts.role,
    role_profile_id: opts.roleProfileId ?? null,
    display_name: opts.displayName,
  });
  return { id: user.id, email: user.email, password };
}

/**
 * A bearer JWT. A role string creates a fresh user of that role; `{ id }` issues a token for an
 * existing user. The token carries every scope (scopes are informational; permissions come
 * from the owner), so it also works where a scope such as `dashboard.publish` is required.
 */
export async function tokenFor(
  server: ServerLike,
  roleOrUser: Role | { id: string },
  opts: { scopes?: string[]; expiresIn?: string | number } = {},
): Promise<string> {
  const userId =
    typeof roleOrUser === "string" ? (await createUser(server, { role: roleOrUser })).id : roleOrUser.id;
  const { token } = await createApiToken(server.ctx, userId, {
    name: "test token",
    scopes: opts.scopes ?? TOKEN_SCOPES,
    expires_in: opts.expiresIn,
  });
  return token;
}

export function authHeaders(token: string): { authorization: string } {
  return { authorization: `Bearer ${token}` };
}

/** A custom RBAC profile: the base role's defaults plus `grant`, minus `revoke`. Returns its id. */
export async function createRoleProfile(
  server: ServerLike,
  opts: { baseRole: Role; grant?: string[]; revoke?: string[]; name?: string },
): Promise<{ id: string; permissions: string[] }> {
  const row = await createProfile(server.ctx, SYSTEM_ACTOR, {
    name: opts.name ?? `profile-${unique()}`,
    base_role: opts.baseRole,
    grant: opts.grant ?? [],
    revoke: opts.revoke ?? [],
  });
  const { effectivePermissions } = await import("../../src/access/permissions.ts");
  return {
    id: row.id,
    permissions: [...effectivePermissions(row.base_role, row.grants, row.revokes)].sort(),
  };
}
