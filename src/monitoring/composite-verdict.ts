/**
 * The verdict of a composite check from its inputs' states (pure; docs/decisions/0610). A stale
 * input is `unknown` for the verdict; `status` applies the same rule to the last known states,
 * so a reader sees both "we cannot vouch for it" and "what it last said".
 */

export const VERDICTS = ["healthy", "degraded", "down", "unknown"] as const;
export type Verdict = (typeof VERDICTS)[number];

export const COMPOSITE_RULES = ["all_healthy", "any_healthy"] as const;
export type CompositeRule = (typeof COMPOSITE_RULES)[number];

export interface InputState {
  key: string;
  /** The input's latest state as observed, staleness ignored. */
  last: Verdict;
  stale: boolean;
  critical: boolean;
}

export interface VerdictOutcome {
  verdict: Verdict;
  status: Verdict;
  message: string;
}

function effective(i: InputState, honourStaleness: boolean): Verdict {
  return honourStaleness && i.stale ? "unknown" : i.last;
}

/**
 * all_healthy: a critical input down → down; any input down or degraded → degraded; otherwise
 * any unknown input → unknown; else healthy. Known trouble outranks ignorance.
 * any_healthy (redundant paths): all healthy → healthy; some healthy → degraded; none healthy →
 * down if one is known down, else degraded if one is degraded, else unknown.
 */
function decide(rule: CompositeRule, inputs: readonly InputState[], honourStaleness: boolean): Verdict {
  if (inputs.length === 0) return "unknown";
  const states = inputs.map((i) => ({ i, s: effective(i, honourStaleness) }));
  const has = (v: Verdict) => states.some((x) => x.s === v);
  if (rule === "any_healthy") {
    if (states.every((x) => x.s === "healthy")) return "healthy";
    if (has("healthy")) return "degraded";
    if (has("down")) return "down";
    if (has("degraded")) return "degraded";
    return "unknown";
  }
  if (states.some((x) => x.s === "down" && x.i.critical)) return "down";
  if (has("down") || has("degraded")) return "degraded";
  if (has("unknown")) return "unknown";
  return "healthy";
}

function describe(verdict: Verdict, inputs: readonly InputState[]): string {
  if (inputs.length === 0) return "unknown: the composite has no inputs";
  const stale = inputs.filter((i) => i.stale).map((i) => i.key);
  const bad = inputs.filter((i) => !i.stale && i.last !== "healthy").map((i) => `${i.key} ${i.last}`);
  const parts: string[] = [];
  if (bad.length > 0) parts.push(bad.join(", "));
  if (stale.length > 0)
    parts.push(`stale input${stale.length > 1 ? "s" : ""} ${stale.join(", ")} counted as unknown`);
  if (parts.length === 0) return `${verdict}: all ${inputs.length} inputs healthy`;
  return `${verdict}: ${parts.join("; ")}`;
}

export function evaluateVerdict(rule: CompositeRule, inputs: readonly InputState[]): VerdictOutcome {
  const verdict = decide(rule, inputs, true);
  return { verdict, status: decide(rule, inputs, false), message: describe(verdict, inputs) };
}

/** A service check's last_result as a composite input state. */
export function verdictOfCheckResult(result: string | null | undefined): Verdict {
  switch (result) {
    case "success":
      return "healthy";
    case "warning":
      return "degraded";
    case "critical":
    case "error":
      return "down";
    default:
      return "unknown";
  }
}

export type ThresholdOp = ">" | ">=" | "<" | "<=" | "=" | "!=";
export const THRESHOLD_OPS: readonly ThresholdOp[] = [">", ">=", "<", "<=", "=", "!="];

/** A metric input is down while `value <op> threshold` holds (the breach condition). */
export function breaches(value: number, op: ThresholdOp, threshold: number): boolean {
  switch (op) {
    case ">":
      return value > threshold;
    case ">=":
      return value >= threshold;
    case "<":
      return value < threshold;
    case "<=":
      return value <= threshold;
    case "=":
      return value === threshold;
    case "!=":
      return value !== threshold;
  }
}
