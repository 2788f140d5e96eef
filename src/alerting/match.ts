/**
 * Rule matching shared by event rules (log promotion) and stateful alert rules
 * (reference 7.1/7.2). A match map holds predicates that must ALL hold; `{always: true}`
 * matches everything and an empty map matches nothing.
 */
import { ValidationError } from "../kernel/errors.ts";
import type { SignalRecord } from "./types.ts";

export const MATCH_KEYS = [
  "always",
  "subject_prefix",
  "service_name",
  "severity_number_min",
  "severity_number_max",
  "severity_text",
  "body_contains",
  "event_type",
  "attribute_equals",
  "resource_attribute_equals",
] as const;

/** Value at a dot path: tries the whole key first (OTel attributes are flat "a.b.c" keys). */
export function lookupPath(obj: unknown, path: string): unknown {
  if (obj === null || typeof obj !== "object") return undefined;
  const rec = obj as Record<string, unknown>;
  // Own properties only: a path such as "constructor" or "__proto__" names nothing.
  if (Object.hasOwn(rec, path)) return rec[path];
  const dot = path.indexOf(".");
  if (dot < 0) return undefined;
  // Try progressively longer first segments ("k8s.node" + "name").
  for (let i = dot; i >= 0 && i < path.length; i = path.indexOf(".", i + 1)) {
    const head = path.slice(0, i);
    if (Object.hasOwn(rec, head)) {
      const v = lookupPath(rec[head], path.slice(i + 1));
      if (v !== undefined) return v;
    }
  }
  return undefined;
}

function ciEq(actual: unknown, expected: unknown): boolean {
  if (actual === undefined || actual === null) return false;
  const a = String(actual).toLowerCase();
  if (Array.isArray(expected)) return expected.some((e) => String(e).toLowerCase() === a);
  return String(expected).toLowerCase() === a;
}

function mapEquals(source: Record<string, unknown>, expected: unknown): boolean {
  if (!expected || typeof expected !== "object" || Array.isArray(expected)) return false;
  const entries = Object.entries(expected as Record<string, unknown>);
  if (entries.length === 0) return false;
  return entries.every(([path, want]) => ciEq(lookupPath(source, path), want));
}

/** The event type of a record: attributes `event_type` or `event.type`. */
export function eventTypeOf(r: SignalRecord): string | null {
  const v = lookupPath(r.attributes, "event_type") ?? lookupPath(r.attributes, "event.type");
  return v === undefined || v === null ? null : String(v);
}

export function matches(match: Record<string, unknown> | null | undefined, r: SignalRecord): boolean {
  if (!match || typeof match !== "object") return false;
  if (match.always === true) return true;
  const keys = Object.keys(match).filter(
    (k) => (MATCH_KEYS as readonly string[]).includes(k) && k !== "always",
  );
  if (keys.length === 0) return false;
  for (const key of keys) {
    const want = match[key];
    switch (key) {
      case "subject_prefix": {
        const subject =
          r.kind === "event"
            ? r.subject
            : (lookupPath(r.attributes, "netmon.ingest.subject") as string | undefined);
        if (typeof subject !== "string" || !subject.startsWith(String(want))) return false;
        break;
      }
      case "service_name":
        if (!ciEq(r.service_name, want)) return false;
        break;
      case "severity_number_min":
        if (r.severity_number === null || r.severity_number < Number(want)) return false;
        break;
      case "severity_number_max":
        if (r.severity_number === null || r.severity_number > Number(want)) return false;
        break;
      case "severity_text":
        if (!ciEq(r.severity_text, want)) return false;
        break;
      case "body_contains":
        if (typeof r.body !== "string" || !r.body.toLowerCase().includes(String(want).toLowerCase()))
          return false;
        break;
      case "event_type":
        if (!ciEq(eventTypeOf(r), want)) return false;
        break;
      case "attribute_equals":
        if (!mapEquals(r.attributes, want)) return false;
        break;
      case "resource_attribute_equals":
        if (!mapEquals(r.resource_attributes, want)) return false;
        break;
    }
  }
  return true;
}

/** Reject unknown match keys and badly typed values at save time. */
export function validateMatch(match: unknown, pointer: string): void {
  if (match === undefined || match === null) return;
  if (typeof match !== "object" || Array.isArray(match)) {
    throw new ValidationError("match must be an object", { source: { pointer } });
  }
  for (const [k, v] of Object.entries(match as Record<string, unknown>)) {
    if (!(MATCH_KEYS as readonly string[]).includes(k)) {
      throw new ValidationError(`unknown match key '${k}' (allowed: ${MATCH_KEYS.join(", ")})`, {
        source: { pointer: `${pointer}/${k}` },
      });
    }
    if ((k === "severity_number_min" || k === "severity_number_max") && typeof v !== "number") {
      throw new ValidationError(`${k} must be a number`, { source: { pointer: `${pointer}/${k}` } });
    }
    if (
      (k === "attribute_equals" || k === "resource_attribute_equals") &&
      (typeof v !== "object" || !v || Array.isArray(v))
    ) {
      throw new ValidationError(`${k} must be an object of path → value`, {
        source: { pointer: `${pointer}/${k}` },
      });
    }
    if (k === "always" && typeof v !== "boolean") {
      throw new ValidationError("always must be a boolean", { source: { pointer: `${pointer}/${k}` } });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Severities.

/** OCSF severity ids. */
export const OCSF_SEVERITY = {
  unknown: 0,
  informational: 1,
  low: 2,
  medium: 3,
  high: 4,
  critical: 5,
  fatal: 6,
} as const;

const OCSF_NAMES = ["Unknown", "Informational", "Low", "Medium", "High", "Critical", "Fatal"];

export function ocsfSeverityName(id: number): string {
  return OCSF_NAMES[id] ?? "Unknown";
}

/** From an OTel severity number (reference 7.2). */
export function ocsfFromSeverityNumber(n: number): number {
  if (n >= 21) return OCSF_SEVERITY.fatal;
  if (n >= 17) return OCSF_SEVERITY.high;
  if (n >= 13) return OCSF_SEVERITY.medium;
  if (n >= 9) return OCSF_SEVERITY.informational;
  if (n >= 1) return OCSF_SEVERITY.low;
  return OCSF_SEVERITY.unknown;
}

/** From a severity text (reference 7.1/7.2 mappings merged). */
export function ocsfFromSeverityText(t: string): number | null {
  switch (t.toLowerCase()) {
    case "emergency":
    case "fatal":
      return OCSF_SEVERITY.fatal;
    case "critical":
      return OCSF_SEVERITY.critical;
    case "high":
    case "error":
      return OCSF_SEVERITY.high;
    case "warn":
    case "warning":
    case "medium":
      return OCSF_SEVERITY.medium;
    case "info":
    case "informational":
    case "notice":
      return OCSF_SEVERITY.informational;
    case "low":
    case "debug":
    case "trace":
      return OCSF_SEVERITY.low;
    default:
      return null;
  }
}

export function ocsfSeverityOf(r: SignalRecord): number {
  if (r.severity_text) {
    const t = ocsfFromSeverityText(r.severity_text);
    if (t !== null) return t;
  }
  if (r.severity_number !== null) return ocsfFromSeverityNumber(r.severity_number);
  return OCSF_SEVERITY.unknown;
}

/** Alert severity for an OCSF severity id (decision 0500: high → warning). */
export function alertSeverityFromOcsf(id: number): "info" | "warning" | "critical" | "emergency" {
  if (id >= OCSF_SEVERITY.fatal) return "emergency";
  if (id >= OCSF_SEVERITY.critical) return "critical";
  if (id >= OCSF_SEVERITY.medium) return "warning";
  return "info";
}

/** An OTel severity number for a severity text (for logs we emit ourselves). */
export function severityNumberFromText(t: string): number {
  switch (t.toLowerCase()) {
    case "fatal":
    case "emergency":
      return 21;
    case "critical":
    case "error":
      return 17;
    case "warn":
    case "warning":
      return 13;
    case "debug":
      return 5;
    case "trace":
      return 1;
    default:
      return 9;
  }
}
