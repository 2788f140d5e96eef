/**
 * Agent labels and label selectors (issue 13, placement by pool). Labels are flat string
 * pairs as Kubernetes node labels are: `site=dc1`, `role=edge`. A selector matches an agent
 * whose labels contain every pair (JSON containment, `labels @> selector` in SQL).
 */
import { ValidationError } from "../kernel/errors.ts";

const KEY = /^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$/;
const MAX_PAIRS = 32;
const MAX_VALUE = 255;

export type Labels = Record<string, string>;

/** Validate labels (or a selector) from a request; returns a null-prototype copy. */
export function parseLabels(value: unknown, pointer: string, opts: { selector?: boolean } = {}): Labels {
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new ValidationError('labels are an object of string pairs, e.g. {"site": "dc1"}', {
      source: { pointer },
    });
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_PAIRS) {
    throw new ValidationError(`at most ${MAX_PAIRS} labels`, { source: { pointer } });
  }
  if (opts.selector && entries.length === 0) {
    throw new ValidationError("a label selector names at least one label (null: no selector)", {
      source: { pointer },
    });
  }
  const out: Labels = Object.create(null);
  for (const [k, v] of entries) {
    if (!KEY.test(k)) {
      throw new ValidationError(
        `label '${k}' is not a valid name (lowercase letters, digits, '.', '_', '/', '-'; at most 63)`,
        { source: { pointer: `${pointer}/${k}` } },
      );
    }
    if (typeof v !== "string" || v === "" || v.length > MAX_VALUE) {
      throw new ValidationError(`label '${k}' takes a non-empty string of at most ${MAX_VALUE} characters`, {
        source: { pointer: `${pointer}/${k}` },
      });
    }
    out[k] = v;
  }
  return out;
}

/** Does an agent with `labels` satisfy `selector`? (The JS twin of `labels @> selector`.) */
export function labelsMatch(labels: unknown, selector: unknown): boolean {
  if (!selector || typeof selector !== "object") return true;
  const have = labels && typeof labels === "object" ? (labels as Record<string, unknown>) : {};
  return Object.entries(selector as Record<string, unknown>).every(
    ([k, v]) => Object.hasOwn(have, k) && have[k] === v,
  );
}

/** `site=dc1, role=edge` — for messages. */
export function describeLabels(selector: unknown): string {
  if (!selector || typeof selector !== "object") return "";
  return Object.entries(selector as Record<string, unknown>)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(", ");
}
