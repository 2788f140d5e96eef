/**
 * Who is making a request. Built by the access domain from a session cookie, a bearer token
 * or an API key; background jobs use SYSTEM_ACTOR. Domains check permissions on this value
 * and never look at HTTP credentials themselves.
 */
export type Role = "viewer" | "operator" | "admin";

export const ROLES: readonly Role[] = ["viewer", "operator", "admin"];

export type AuthMethod = "session" | "api_token" | "api_key" | "control_plane" | "system";

export interface Actor {
  kind: "user" | "system" | "gateway" | "agent";
  /** User id (uuid) for users; a stable name for system/control-plane actors. */
  id: string;
  email: string | null;
  role: Role;
  roleProfileId: string | null;
  /** Effective permission keys (base role ± profile grants). */
  permissions: ReadonlySet<string>;
  authMethod: AuthMethod;
  /** Bearer token id when authenticated by token. */
  tokenJti?: string;
  /** Token scopes (informational: not enforced by the JSON:API pipeline, spec §5.3). */
  scopes?: readonly string[];
  /** Session id when authenticated by cookie. */
  sessionId?: string;
  /**
   * Device partitions this actor may see; null means every partition. Queries over
   * partitioned data (devices, interfaces, SRQL) must filter by it.
   */
  partitions: readonly string[] | null;
}

/** The internal actor for background jobs: bypasses permission checks. Never built from a request. */
export const SYSTEM_ACTOR: Actor = Object.freeze({
  kind: "system",
  id: "system",
  email: null,
  role: "admin",
  roleProfileId: null,
  permissions: new Set<string>(),
  authMethod: "system",
  partitions: null,
});

export function isSystem(actor: Actor | null | undefined): boolean {
  return actor?.kind === "system";
}

export function hasPermission(actor: Actor | null | undefined, permission: string): boolean {
  if (!actor) return false;
  if (isSystem(actor)) return true;
  return actor.permissions.has(permission);
}

const RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

export function hasRole(actor: Actor | null | undefined, role: Role): boolean {
  if (!actor) return false;
  if (isSystem(actor)) return true;
  return RANK[actor.role] >= RANK[role];
}
