/**
 * Route match expressions (reference 7.3):
 *   combinators  {"all": [...]}, {"any": [...]}, {"not": {...}}  (the combinator is the only key)
 *   predicate    {"field": "alert.severity", "<op>": value}  with op ∈ equals|in|contains|exists|matches
 *   shorthand    {"alert.severity": "critical", ...}  = AND of equals
 *   {}           matches everything
 * Saving rejects predicates without an operator, `equals: ""`, bad regexes and oversized trees.
 */

import { ValidationError } from "../../kernel/errors.ts";
import { compileUserPattern, matchesUserPattern } from "../../kernel/user-pattern.ts";
import { lookupPath } from "../match.ts";

const OPS = ["equals", "in", "contains", "exists", "matches"] as const;
const MAX_DEPTH = 8;
const MAX_NODES = 100;
const MAX_LIST = 100;

function fail(msg: string, pointer: string): never {
  throw new ValidationError(msg, { source: { pointer } });
}

/**
 * Field paths are read from `{alert, device, check}` (match-context.ts): a path outside those roots can
 * never match, so a route saved with `{"severity": "critical"}` would silently never fire
 * (issue 13). Refused with the fix in the message.
 */
const FIELD_ROOTS = ["alert.", "device.", "check."];

function checkFieldPath(
  path: string,
  pointer: string,
  fail: (message: string, pointer: string) => never,
): void {
  if (!FIELD_ROOTS.some((r) => path.startsWith(r) && path.length > r.length)) {
    fail(
      `field '${path}' matches nothing: field paths start with alert., device. or check. (e.g. alert.${path.replace(/^(alert|device|check)\.?/, "") || "severity"})`,
      pointer,
    );
  }
}

export function validateMatchExpression(expr: unknown, pointer = "/data/attributes/match_expression"): void {
  let nodes = 0;
  const walk = (e: unknown, depth: number, p: string): void => {
    nodes++;
    if (nodes > MAX_NODES) fail(`match expression has more than ${MAX_NODES} nodes`, pointer);
    if (depth > MAX_DEPTH) fail(`match expression is nested deeper than ${MAX_DEPTH}`, pointer);
    if (!e || typeof e !== "object" || Array.isArray(e)) fail("match expression must be an object", p);
    const obj = e as Record<string, unknown>;
    const keys = Object.keys(obj);
    if (keys.length === 0) return;
    for (const comb of ["all", "any", "not"]) {
      if (Object.hasOwn(obj, comb)) {
        if (keys.length !== 1) fail(`'${comb}' must be the only key of its object`, p);
        if (comb === "not") {
          walk(obj.not, depth + 1, `${p}/not`);
          return;
        }
        const list = obj[comb];
        if (!Array.isArray(list) || list.length === 0)
          fail(`'${comb}' takes a non-empty array`, `${p}/${comb}`);
        if (list.length > MAX_LIST) fail(`'${comb}' takes at most ${MAX_LIST} items`, `${p}/${comb}`);
        for (const [i, item] of list.entries()) walk(item, depth + 1, `${p}/${comb}/${i}`);
        return;
      }
    }
    if ("field" in obj) {
      if (typeof obj.field !== "string" || !obj.field) fail("field must be a non-empty string", `${p}/field`);
      checkFieldPath(obj.field, `${p}/field`, fail);
      const ops = keys.filter((k) => k !== "field");
      if (ops.length === 0) fail(`predicate on '${obj.field}' needs an operator (${OPS.join(", ")})`, p);
      if (ops.length > 1) fail("a predicate takes exactly one operator", p);
      const op = ops[0] as string;
      if (!(OPS as readonly string[]).includes(op))
        fail(`unknown operator '${op}' (allowed: ${OPS.join(", ")})`, `${p}/${op}`);
      const v = obj[op];
      if (op === "equals" && v === "") fail("equals must not be empty", `${p}/equals`);
      if (op === "in" && (!Array.isArray(v) || v.length === 0 || v.length > MAX_LIST)) {
        fail(`in takes a non-empty array of at most ${MAX_LIST} values`, `${p}/in`);
      }
      if (op === "exists" && typeof v !== "boolean") fail("exists takes a boolean", `${p}/exists`);
      if (op === "contains" && (typeof v !== "string" || v === ""))
        fail("contains takes a non-empty string", `${p}/contains`);
      if (op === "matches") {
        if (typeof v !== "string") fail("matches takes a regular expression string", `${p}/matches`);
        try {
          compileUserPattern(v, `${p}/matches`);
        } catch (err) {
          fail(`matches: ${(err as Error).message}`, `${p}/matches`);
        }
      }
      return;
    }
    // Shorthand: every key is a field path with a scalar value.
    for (const [k, v] of Object.entries(obj)) {
      checkFieldPath(k, `${p}/${k}`, fail);
      if (v === "" || (v !== null && typeof v === "object"))
        fail(`shorthand '${k}' takes a non-empty scalar`, `${p}/${k}`);
    }
  };
  walk(expr ?? {}, 0, pointer);
}

function eq(a: unknown, b: unknown): boolean {
  if (a === undefined || a === null) return b === null;
  return String(a).toLowerCase() === String(b).toLowerCase();
}

/** Evaluate against a context such as `{alert: {...}, device: {...}}`. */
export function evaluateMatchExpression(expr: unknown, context: Record<string, unknown>): boolean {
  if (!expr || typeof expr !== "object" || Array.isArray(expr)) return false;
  const obj = expr as Record<string, unknown>;
  const keys = Object.keys(obj);
  if (keys.length === 0) return true;
  if (Array.isArray(obj.all)) return obj.all.every((e) => evaluateMatchExpression(e, context));
  if (Array.isArray(obj.any)) return obj.any.some((e) => evaluateMatchExpression(e, context));
  if ("not" in obj) return !evaluateMatchExpression(obj.not, context);
  if (typeof obj.field === "string") {
    const actual = lookupPath(context, obj.field);
    if ("equals" in obj) return eq(actual, obj.equals);
    if ("in" in obj) return Array.isArray(obj.in) && obj.in.some((v) => eq(actual, v));
    if ("exists" in obj) return (actual !== undefined && actual !== null) === obj.exists;
    if ("contains" in obj) {
      if (Array.isArray(actual)) return actual.some((v) => eq(v, obj.contains));
      return typeof actual === "string" && actual.toLowerCase().includes(String(obj.contains).toLowerCase());
    }
    if ("matches" in obj) {
      return (
        actual !== undefined && actual !== null && matchesUserPattern(String(obj.matches), String(actual))
      );
    }
    return false;
  }
  return Object.entries(obj).every(([k, v]) => eq(lookupPath(context, k), v));
}
