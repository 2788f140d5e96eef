import type { Actor } from "../../access/actor.ts";
import type { AccessRule } from "../../access/rule.ts";
import { decide, ruleKind, rulePermission, satisfies } from "../../access/rule.ts";

export { satisfies };

/**
 * Enforce a rule in the engine as well as in the access hook (defence in depth): no actor →
 * 401, an actor lacking it → 403. `optional` rules never throw here.
 */
export function enforce(rule: AccessRule, actor: Actor | null): Actor | null {
  const denied = decide(rule, actor);
  if (denied) throw denied;
  return actor;
}

/** The route-level rule for a read policy ("hide" → optional with the permission). */
export function routeRuleForRead(rule: AccessRule, whenDenied: "forbid" | "hide" | undefined): AccessRule {
  if (whenDenied !== "hide") return rule;
  const permission = ruleKind(rule) === "permission" ? rulePermission(rule) : undefined;
  return permission ? { optional: true, permission } : { optional: true };
}
