import { type Actor, hasPermission, hasRole, isSystem } from "../../access/actor.ts";
import type { AccessRule } from "../../http/route-config.ts";
import { AuthenticationRequiredError, ForbiddenError } from "../../kernel/errors.ts";

/** Whether `actor` satisfies `rule` (for `optional` rules: holds its permission, if any). */
export function satisfies(rule: AccessRule, actor: Actor | null): boolean {
  if ("public" in rule) return true;
  if ("optional" in rule) return rule.permission ? hasPermission(actor, rule.permission) : true;
  if (!actor) return false;
  if (isSystem(actor)) return true;
  if ("authenticated" in rule) return true;
  if ("controlPlane" in rule) {
    // Control-plane principals; users with the permission (or admins when none is named).
    if (actor.kind === "gateway" || actor.kind === "agent") return true;
    return rule.permission
      ? hasPermission(actor, rule.permission)
      : actor.kind === "user" && hasRole(actor, "admin");
  }
  if ("permission" in rule) return hasPermission(actor, rule.permission);
  if ("role" in rule) return actor.kind === "user" && hasRole(actor, rule.role);
  return false;
}

/**
 * Enforce a rule in the engine as well as in the access hook (defence in depth): no actor →
 * 401, an actor lacking it → 403. `optional` rules never throw here.
 */
export function enforce(rule: AccessRule, actor: Actor | null): Actor | null {
  if ("public" in rule || "optional" in rule) return actor;
  if (!actor) throw new AuthenticationRequiredError();
  if (!satisfies(rule, actor)) throw new ForbiddenError();
  return actor;
}

/** The route-level rule for a read policy ("hide" → optional with the permission). */
export function routeRuleForRead(rule: AccessRule, whenDenied: "forbid" | "hide" | undefined): AccessRule {
  if (whenDenied !== "hide") return rule;
  if ("permission" in rule) return { optional: true, permission: rule.permission };
  return { optional: true };
}
