import { stateTable, transitionRow } from "../jsonapi/engine/transitions.ts";
import { defineStateMachine } from "../jsonapi/state-machine.ts";
import type { AppContext } from "../kernel/context.ts";
import { ConflictError, InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { asDomainError } from "../storage/db-error.ts";
import { sql } from "../storage/sql.ts";
import { type Actor, ROLES, type Role } from "./actor.ts";
import { forgetRememberedCredentials } from "./outage-credentials.ts";
import { hashPassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from "./passwords.ts";
import { requireRbacAdmin } from "./role-profiles.ts";
import { isUuid } from "./util.ts";

export const USER_STATES = ["active", "disabled"] as const;
export type UserStatus = (typeof USER_STATES)[number];

/**
 * A user's status (issue 11: written only through the state writer). Disabling a disabled user
 * and enabling an active one are accepted and change nothing but updated_at, as before the
 * machine existed (the admin console and scripts repeat them freely).
 */
export const userMachine = defineStateMachine({
  name: "user",
  attribute: "status",
  states: USER_STATES,
  initial: ["active"],
  transitions: {
    disable: { from: ["active", "disabled"], to: "disabled" },
    enable: { from: ["active", "disabled"], to: "active" },
    /** The bootstrap admin restored when no active admin is left (src/access/bootstrap.ts). */
    restore_admin: { from: ["active", "disabled"], to: "active" },
  },
});

export const usersTable = stateTable({
  machine: userMachine,
  table: "users",
  key: "id",
  keyType: "uuid",
  touch: "updated_at",
  columns: { role: "text" },
});

export interface UserRow {
  [k: string]: unknown;
  id: string;
  email: string;
  display_name: string | null;
  role: Role;
  role_profile_id: string | null;
  status: UserStatus;
  password_hash: string | null;
  external_id: string | null;
  external_provider: string | null;
  local_login_enabled: boolean;
  revoked_before: Date | null;
  confirmed_at: Date | null;
  last_login_at: Date | null;
  last_auth_method: string | null;
  authenticated_at: Date | null;
  inserted_at: Date;
  updated_at: Date;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The public shape of a user (spec 2.7). Never includes the password hash. */
export function serializeUser(u: UserRow): Record<string, unknown> {
  return {
    id: u.id,
    email: u.email,
    display_name: u.display_name,
    role: u.role,
    role_profile_id: u.role_profile_id,
    status: u.status,
    has_password: u.password_hash !== null,
    has_external_id: u.external_id !== null,
    local_login_enabled: u.local_login_enabled,
    confirmed_at: iso(u.confirmed_at),
    last_login_at: iso(u.last_login_at),
    last_auth_method: u.last_auth_method,
    authenticated_at: iso(u.authenticated_at),
    inserted_at: iso(u.inserted_at),
    updated_at: iso(u.updated_at),
  };
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;

export function normalizeEmail(email: unknown): string {
  if (typeof email !== "string" || !EMAIL.test(email.trim()) || email.length > 320) {
    throw new InvalidRequestError("email must be a valid email address", { source: { pointer: "/email" } });
  }
  return email.trim();
}

export function checkRole(role: unknown): Role {
  if (typeof role !== "string" || !(ROLES as readonly string[]).includes(role)) {
    throw new InvalidRequestError(`role must be one of: ${ROLES.join(", ")}`, {
      source: { pointer: "/role" },
    });
  }
  return role as Role;
}

export function checkPassword(password: unknown): string {
  if (
    typeof password !== "string" ||
    password.length < MIN_PASSWORD_LENGTH ||
    password.length > MAX_PASSWORD_LENGTH
  ) {
    throw new InvalidRequestError(
      `password must be between ${MIN_PASSWORD_LENGTH} and ${MAX_PASSWORD_LENGTH} characters`,
      { source: { pointer: "/password" } },
    );
  }
  return password;
}

async function checkProfileId(db: Queryable, id: unknown): Promise<string | null> {
  if (id === null || id === undefined || id === "") return null;
  if (!isUuid(id) || !(await db.one(sql`SELECT 1 FROM role_profiles WHERE id = ${id}`))) {
    throw new InvalidRequestError("role_profile_id does not name an existing role profile", {
      source: { pointer: "/role_profile_id" },
    });
  }
  return id;
}

export async function findUserById(db: Queryable, id: string): Promise<UserRow | undefined> {
  if (!isUuid(id)) return undefined;
  return db.one<UserRow>(sql`SELECT * FROM users WHERE id = ${id}`);
}

export async function findUserByEmail(db: Queryable, email: string): Promise<UserRow | undefined> {
  return db.one<UserRow>(sql`SELECT * FROM users WHERE lower(email) = lower(${email.trim()})`);
}

export interface NewUser {
  email: unknown;
  display_name?: unknown;
  role?: unknown;
  password?: unknown;
  role_profile_id?: unknown;
}

/** Create a user (no permission check: callers are the admin API, the CLI and bootstrap). */
export async function insertUser(ctx: AppContext, input: NewUser): Promise<UserRow> {
  const email = normalizeEmail(input.email);
  const role = checkRole(input.role ?? "viewer");
  const displayName =
    typeof input.display_name === "string" && input.display_name.trim() !== ""
      ? input.display_name.trim()
      : null;
  const password =
    input.password === undefined || input.password === null ? null : checkPassword(input.password);
  const profileId = await checkProfileId(ctx.db, input.role_profile_id);
  const passwordHash = password ? await hashPassword(password) : null;
  const now = ctx.now();
  try {
    const row = await ctx.db.one<UserRow>(sql`
      INSERT INTO users (email, display_name, role, role_profile_id, password_hash, confirmed_at,
                         inserted_at, updated_at)
      VALUES (${email}, ${displayName}, ${role}, ${profileId}, ${passwordHash}, ${now}, ${now}, ${now})
      RETURNING *`);
    return row as UserRow;
  } catch (err) {
    throw asDomainError(err, { message: "a user with this email already exists", code: "email_taken" });
  }
}

export async function setUserPassword(ctx: AppContext, userId: string, password: string): Promise<void> {
  const hash = await hashPassword(checkPassword(password));
  const res = await ctx.db.query(
    sql`UPDATE users SET password_hash = ${hash}, updated_at = ${ctx.now()} WHERE id = ${userId}`,
  );
  if (res.rowCount === 0) throw new NotFoundError("user not found");
  forgetRememberedCredentials(ctx);
}

// ---- admin operations (actor must be an admin holding settings.rbac.manage) ----

export interface UserListQuery {
  limit?: unknown;
  role?: unknown;
  status?: unknown;
}

export async function listUsers(db: Queryable, actor: Actor, q: UserListQuery = {}): Promise<UserRow[]> {
  requireRbacAdmin(actor);
  const parsed = typeof q.limit === "string" || typeof q.limit === "number" ? Number(q.limit) : Number.NaN;
  const limit = Number.isInteger(parsed) && parsed > 0 ? Math.min(parsed, 1000) : 100;
  // Invalid filter values are ignored, as in the original.
  const role = typeof q.role === "string" && (ROLES as readonly string[]).includes(q.role) ? q.role : null;
  const statusMap: Record<string, UserStatus> = {
    active: "active",
    disabled: "disabled",
    inactive: "disabled",
  };
  const status = typeof q.status === "string" ? (statusMap[q.status] ?? null) : null;
  return db.many<UserRow>(sql`
    SELECT * FROM users
    WHERE (${role}::text IS NULL OR role = ${role}) AND (${status}::text IS NULL OR status = ${status})
    ORDER BY inserted_at DESC, id
    LIMIT ${limit}`);
}

export async function getUser(db: Queryable, actor: Actor, id: string): Promise<UserRow> {
  requireRbacAdmin(actor);
  const u = await findUserById(db, id);
  if (!u) throw new NotFoundError("user not found");
  return u;
}

export async function createUser(ctx: AppContext, actor: Actor, input: NewUser): Promise<UserRow> {
  requireRbacAdmin(actor);
  if (input.email === undefined) {
    throw new InvalidRequestError("email is required", { source: { pointer: "/email" } });
  }
  return insertUser(ctx, input);
}

export interface UserPatch {
  display_name?: unknown;
  role?: unknown;
  role_profile_id?: unknown;
  local_login_enabled?: unknown;
}

export async function updateUser(
  ctx: AppContext,
  actor: Actor,
  id: string,
  patch: UserPatch,
): Promise<UserRow> {
  const current = await getUser(ctx.db, actor, id);
  const displayName =
    patch.display_name === undefined
      ? current.display_name
      : typeof patch.display_name === "string" && patch.display_name.trim() !== ""
        ? patch.display_name.trim()
        : null;
  const role = patch.role === undefined ? current.role : checkRole(patch.role);
  const profileId =
    patch.role_profile_id === undefined
      ? current.role_profile_id
      : await checkProfileId(ctx.db, patch.role_profile_id);
  let localLogin = current.local_login_enabled;
  if (patch.local_login_enabled !== undefined) {
    if (typeof patch.local_login_enabled !== "boolean") {
      throw new InvalidRequestError("local_login_enabled must be a boolean");
    }
    localLogin = patch.local_login_enabled;
  }
  const updated = await ctx.db.transaction(async (tx) => {
    if (role !== "admin") await assertAnotherAdminRemains(tx, id);
    const row = await tx.one<UserRow>(sql`
      UPDATE users SET display_name = ${displayName}, role = ${role}, role_profile_id = ${profileId},
        local_login_enabled = ${localLogin}, updated_at = ${ctx.now()}
      WHERE id = ${id} RETURNING *`);
    return row as UserRow;
  });
  // A role or profile change narrows (or widens) every token of the user from the next
  // request on: evict this process's cached credentials now, after the commit (the NOTIFY
  // reaches this process's listener later than the response on PostgreSQL).
  forgetRememberedCredentials(ctx);
  return updated;
}

/**
 * Refuse (409) a change that would leave the instance without an active admin: demoting or
 * deactivating `userId` when it is the last one. The active admins' rows are locked first, so
 * two admins demoting each other at once cannot both succeed.
 */
async function assertAnotherAdminRemains(tx: Queryable, userId: string): Promise<void> {
  const admins = await tx.many<{ id: string }>(
    sql`SELECT id FROM users WHERE role = 'admin' AND status = 'active' ORDER BY id FOR UPDATE`,
  );
  const isAdmin = admins.some((a) => a.id === userId);
  if (isAdmin && admins.length <= 1) {
    throw new ConflictError(
      "this is the last active admin: make another user an admin first, so the instance can still be administered",
      { code: "last_admin" },
    );
  }
}

/** Disable a user: sign-in refused, sessions revoked, every token stops working at once. */
export async function deactivateUser(ctx: AppContext, actor: Actor, id: string): Promise<UserRow> {
  await getUser(ctx.db, actor, id);
  if (actor.kind === "user" && actor.id === id) {
    throw new InvalidRequestError("you cannot deactivate your own account", {
      code: "cannot_deactivate_self",
    });
  }
  const now = ctx.now();
  const row = await ctx.db.transaction(async (tx) => {
    await assertAnotherAdminRemains(tx, id);
    await tx.query(sql`UPDATE sessions SET revoked_at = ${now} WHERE user_id = ${id} AND revoked_at IS NULL`);
    return transitionRow<UserRow>(tx, usersTable, id, "disable", {}, now);
  });
  // After the commit: an eviction before it would let a request between the two cache the
  // still-active user again.
  forgetRememberedCredentials(ctx);
  return row;
}

export async function reactivateUser(ctx: AppContext, actor: Actor, id: string): Promise<UserRow> {
  await getUser(ctx.db, actor, id);
  const row = await ctx.db.transaction((tx) =>
    transitionRow<UserRow>(tx, usersTable, id, "enable", {}, ctx.now()),
  );
  forgetRememberedCredentials(ctx);
  return row;
}
