import type { Actor, AuthMethod, Role } from "./actor.ts";
import { effectivePermissions, roleDefaults } from "./permissions.ts";

/**
 * Columns every credential lookup selects so one query yields an Actor: the user plus the
 * profile's base role and grants/revokes. Permissions are computed from this row on every
 * request, so a profile or role change applies on the next request with the same token.
 */
export const USER_ACTOR_COLUMNS = `u.id AS user_id, u.email AS user_email, u.role AS user_role,
  u.role_profile_id AS user_role_profile_id, u.status AS user_status,
  u.revoked_before AS user_revoked_before,
  p.base_role AS profile_base_role, p.grants AS profile_grants, p.revokes AS profile_revokes`;

export const USER_ACTOR_JOIN =
  "JOIN users u ON u.id = c.user_id LEFT JOIN role_profiles p ON p.id = u.role_profile_id";

export interface UserActorRow {
  [k: string]: unknown;
  user_id: string;
  user_email: string;
  user_role: Role;
  user_role_profile_id: string | null;
  user_status: string;
  user_revoked_before: Date | null;
  profile_base_role: Role | null;
  profile_grants: string[] | null;
  profile_revokes: string[] | null;
}

export function userActor(
  row: UserActorRow,
  authMethod: AuthMethod,
  extra: Partial<Pick<Actor, "tokenJti" | "scopes" | "sessionId">> = {},
): Actor {
  const permissions = row.profile_base_role
    ? effectivePermissions(row.profile_base_role, row.profile_grants ?? [], row.profile_revokes ?? [])
    : new Set(roleDefaults(row.user_role));
  return {
    kind: "user",
    id: row.user_id,
    email: row.user_email,
    role: row.user_role,
    roleProfileId: row.user_role_profile_id,
    permissions,
    authMethod,
    partitions: null,
    ...extra,
  };
}

const RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

/**
 * A credential restricted to `allowed` permissions (issue 17): it holds the intersection of
 * them and its owner's, and the highest role (up to the owner's) whose default permissions it
 * still holds in full — so a read-only token of an admin passes no admin-role rule either.
 */
export function restrictActor(actor: Actor, allowed: readonly string[]): Actor {
  const permissions = new Set([...actor.permissions].filter((p) => allowed.includes(p)));
  let role: Role = "viewer";
  for (const r of ["operator", "admin"] as const) {
    if (RANK[r] <= RANK[actor.role] && [...roleDefaults(r)].every((p) => permissions.has(p))) role = r;
  }
  return { ...actor, permissions, role };
}
