import type { AppContext } from "../kernel/context.ts";
import { ConflictError, ForbiddenError, InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { asDomainError } from "../storage/db-error.ts";
import { sql } from "../storage/sql.ts";
import { type Actor, hasPermission, hasRole, ROLES, type Role } from "./actor.ts";
import { invalidateCredentialCache } from "./credential-cache.ts";
import { effectivePermissions, isPermissionKey, PERMISSIONS, roleDefaults } from "./permissions.ts";
import { isUuid } from "./util.ts";

export interface RoleProfileRow {
  [k: string]: unknown;
  id: string;
  system_name: string | null;
  name: string;
  description: string | null;
  base_role: Role;
  grants: string[];
  revokes: string[];
  system: boolean;
  inserted_at: Date;
  updated_at: Date;
}

export function serializeRoleProfile(p: RoleProfileRow): Record<string, unknown> {
  return {
    id: p.id,
    name: p.name,
    system_name: p.system_name,
    description: p.description,
    base_role: p.base_role,
    grant: p.grants,
    revoke: p.revokes,
    permissions: [...effectivePermissions(p.base_role, p.grants, p.revokes)].sort(),
    system: p.system,
    inserted_at: p.inserted_at.toISOString(),
    updated_at: p.updated_at.toISOString(),
  };
}

/** Managing users and profiles needs the admin role AND settings.rbac.manage (rule permissions never grant it). */
export function requireRbacAdmin(actor: Actor): void {
  if (!hasRole(actor, "admin") || !hasPermission(actor, "settings.rbac.manage")) {
    throw new ForbiddenError();
  }
}

export function permissionCatalog(): Record<string, unknown>[] {
  return PERMISSIONS.map((d) => ({
    key: d.key,
    section: d.section,
    description: d.description,
    default_roles: d.roles,
  }));
}

function checkRole(role: unknown, field = "base_role"): Role {
  if (typeof role !== "string" || !(ROLES as readonly string[]).includes(role)) {
    throw new InvalidRequestError(`${field} must be one of: ${ROLES.join(", ")}`, {
      source: { pointer: `/${field}` },
    });
  }
  return role as Role;
}

function checkKeys(keys: unknown, field: string): string[] {
  if (keys === undefined || keys === null) return [];
  if (!Array.isArray(keys) || keys.some((k) => typeof k !== "string")) {
    throw new InvalidRequestError(`${field} must be an array of permission keys`);
  }
  const unknown = keys.filter((k) => !isPermissionKey(k));
  if (unknown.length > 0) {
    throw new InvalidRequestError(`unknown permission key(s) in ${field}: ${unknown.join(", ")}`, {
      extra: { unknown_keys: unknown },
    });
  }
  return [...new Set(keys as string[])].sort();
}

/** From a full permission list, the grants/revokes relative to the base role. */
function diffFromBase(base: Role, permissions: string[]): { grants: string[]; revokes: string[] } {
  const defaults = roleDefaults(base);
  const want = new Set(permissions);
  return {
    grants: permissions.filter((k) => !defaults.has(k)).sort(),
    revokes: [...defaults].filter((k) => !want.has(k)).sort(),
  };
}

export interface RoleProfileInput {
  name?: unknown;
  description?: unknown;
  base_role?: unknown;
  grant?: unknown;
  revoke?: unknown;
  /** Alternative to grant/revoke: the full permission set. */
  permissions?: unknown;
}

export async function listRoleProfiles(db: Queryable, actor: Actor): Promise<RoleProfileRow[]> {
  requireRbacAdmin(actor);
  return db.many<RoleProfileRow>(sql`SELECT * FROM role_profiles ORDER BY system DESC, lower(name)`);
}

export async function getRoleProfile(db: Queryable, actor: Actor, id: string): Promise<RoleProfileRow> {
  requireRbacAdmin(actor);
  const row = isUuid(id)
    ? await db.one<RoleProfileRow>(sql`SELECT * FROM role_profiles WHERE id = ${id}`)
    : undefined;
  if (!row) throw new NotFoundError("role profile not found");
  return row;
}

function checkName(name: unknown): string {
  if (typeof name !== "string" || name.trim() === "" || name.length > 200) {
    throw new InvalidRequestError("name is required (1 to 200 characters)", { source: { pointer: "/name" } });
  }
  return name.trim();
}

async function insertOrConflict<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw asDomainError(err, { message: "a role profile with this name already exists", code: "name_taken" });
  }
}

export async function createRoleProfile(
  ctx: AppContext,
  actor: Actor,
  input: RoleProfileInput,
): Promise<RoleProfileRow> {
  requireRbacAdmin(actor);
  const name = checkName(input.name);
  const base = checkRole(input.base_role ?? "viewer");
  let grants: string[];
  let revokes: string[];
  if (input.permissions !== undefined) {
    ({ grants, revokes } = diffFromBase(base, checkKeys(input.permissions, "permissions")));
  } else {
    grants = checkKeys(input.grant, "grant");
    revokes = checkKeys(input.revoke, "revoke");
  }
  const description = typeof input.description === "string" ? input.description : null;
  const now = ctx.now();
  return insertOrConflict(async () => {
    const row = await ctx.db.one<RoleProfileRow>(sql`
      INSERT INTO role_profiles (name, description, base_role, grants, revokes, inserted_at, updated_at)
      VALUES (${name}, ${description}, ${base}, ${grants}, ${revokes}, ${now}, ${now})
      RETURNING *`);
    return row as RoleProfileRow;
  });
}

export async function updateRoleProfile(
  ctx: AppContext,
  actor: Actor,
  id: string,
  input: RoleProfileInput,
): Promise<RoleProfileRow> {
  const current = await getRoleProfile(ctx.db, actor, id);
  if (current.system) {
    throw new ForbiddenError("built-in role profiles cannot be changed", { code: "system_profile" });
  }
  const name = input.name === undefined ? current.name : checkName(input.name);
  const base = input.base_role === undefined ? current.base_role : checkRole(input.base_role);
  let grants = current.grants;
  let revokes = current.revokes;
  if (input.permissions !== undefined) {
    ({ grants, revokes } = diffFromBase(base, checkKeys(input.permissions, "permissions")));
  } else {
    if (input.grant !== undefined) grants = checkKeys(input.grant, "grant");
    if (input.revoke !== undefined) revokes = checkKeys(input.revoke, "revoke");
  }
  const description =
    input.description === undefined
      ? current.description
      : typeof input.description === "string"
        ? input.description
        : null;
  return insertOrConflict(async () => {
    const row = await ctx.db.one<RoleProfileRow>(sql`
      UPDATE role_profiles SET name = ${name}, description = ${description}, base_role = ${base},
        grants = ${grants}, revokes = ${revokes}, updated_at = ${ctx.now()}
      WHERE id = ${id} RETURNING *`);
    invalidateCredentialCache(ctx);
    return row as RoleProfileRow;
  });
}

export async function deleteRoleProfile(ctx: AppContext, actor: Actor, id: string): Promise<void> {
  const current = await getRoleProfile(ctx.db, actor, id);
  if (current.system) {
    throw new ForbiddenError("built-in role profiles cannot be deleted", { code: "system_profile" });
  }
  const inUse = await ctx.db.one<{ n: number }>(
    sql`SELECT count(*)::int AS n FROM users WHERE role_profile_id = ${id}`,
  );
  if ((inUse?.n ?? 0) > 0) {
    throw new ConflictError(`role profile is assigned to ${inUse?.n} user(s)`, { code: "profile_in_use" });
  }
  await ctx.db.query(sql`DELETE FROM role_profiles WHERE id = ${id}`);
  invalidateCredentialCache(ctx);
}
