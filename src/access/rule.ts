import { AuthenticationRequiredError, ForbiddenError } from "../kernel/errors.ts";
import { type Actor, hasPermission, hasRole, isSystem } from "./actor.ts";

/**
 * Every route declares who may call it and which request budget it draws from. The access
 * hook enforces it, and the authorization-matrix test derives expected statuses from it,
 * so a route cannot ship without a policy.
 */
export type AccessRule =
  /** No credentials needed (health, sign-in page, published OpenAPI copy). */
  | { public: true }
  /** Any authenticated principal. */
  | { authenticated: true }
  /** Authenticated and holding this permission key. */
  | { permission: string }
  /** Authenticated with at least this role. */
  | { role: "viewer" | "operator" | "admin" }
  /**
   * Credentials are optional; the handler decides (e.g. event-rule lists answer an empty
   * `data` to anonymous callers, spec 4.1 rule behaviour 2).
   */
  | { optional: true; permission?: string }
  /**
   * Control-plane principals (gateways, agents); admins' user credentials are accepted too.
   * With `permission`, a user holding that permission is accepted instead of requiring admin
   * (e.g. `{ controlPlane: true, permission: "infrastructure.manage" }`: either suffices).
   */
  | { controlPlane: true; permission?: string };

/**
 * The one access-rule evaluator (the access hook and the JSON:API engine both call it).
 *
 * Rules are read with own-property checks only: a rule object must never gain a meaning
 * through its prototype chain (issue 10: `filter[__proto__][optional]=1` once put `optional`
 * on Object.prototype, and `"optional" in rule` then opened every route).
 */
export type RuleKind = "public" | "optional" | "authenticated" | "controlPlane" | "permission" | "role";

const FLAG_KINDS = ["public", "optional", "authenticated", "controlPlane"] as const;

export function ruleKind(rule: AccessRule): RuleKind {
  const r = rule as Readonly<Record<string, unknown>>;
  for (const k of FLAG_KINDS) if (Object.hasOwn(r, k) && r[k] === true) return k;
  if (Object.hasOwn(r, "permission") && typeof r.permission === "string") return "permission";
  if (Object.hasOwn(r, "role") && typeof r.role === "string") return "role";
  throw new Error(`malformed access rule ${JSON.stringify(rule)}`);
}

/** The rule's own permission key, if it names one (for `optional`/`controlPlane` it is extra). */
export function rulePermission(rule: AccessRule): string | undefined {
  const r = rule as Readonly<Record<string, unknown>>;
  return Object.hasOwn(r, "permission") && typeof r.permission === "string" ? r.permission : undefined;
}

function ruleRole(rule: AccessRule): "viewer" | "operator" | "admin" {
  const r = rule as Readonly<Record<string, unknown>>;
  return r.role as "viewer" | "operator" | "admin";
}

/** Decide a request against a rule. Returns the error to throw, or null to proceed. */
export function decide(rule: AccessRule, actor: Actor | null, reason?: string): Error | null {
  const kind = ruleKind(rule);
  if (kind === "public" || kind === "optional") return null;
  if (!actor) {
    return new AuthenticationRequiredError(
      reason ? `Authentication required: ${reason}` : "Authentication required",
    );
  }
  if (isSystem(actor)) return null;
  const permission = rulePermission(rule);
  const controlPlaneActor = actor.kind === "gateway" || actor.kind === "agent";
  if (kind === "controlPlane") {
    if (controlPlaneActor) return null;
    if (permission) return hasPermission(actor, permission) ? null : new ForbiddenError();
    return hasRole(actor, "admin")
      ? null
      : new ForbiddenError("this endpoint is for gateway and agent credentials");
  }
  if (controlPlaneActor) {
    return new ForbiddenError("control-plane credentials are only accepted on control-plane endpoints");
  }
  if (kind === "authenticated") return null;
  if (kind === "permission") return hasPermission(actor, permission as string) ? null : new ForbiddenError();
  return hasRole(actor, ruleRole(rule)) ? null : new ForbiddenError();
}

/** Whether `actor` satisfies `rule` (for `optional` rules: holds its permission, if any). */
export function satisfies(rule: AccessRule, actor: Actor | null): boolean {
  if (ruleKind(rule) === "optional") {
    const permission = rulePermission(rule);
    return permission ? hasPermission(actor, permission) : true;
  }
  return decide(rule, actor) === null;
}
