/**
 * The inputs of a composite check, as stored in composite_checks.inputs: references to service
 * checks (by id or name) and metric thresholds over a lookback window. Validation rejects
 * unknown members so a typo never silently becomes a default.
 */

import { ValidationError } from "../kernel/errors.ts";
import { isUuid } from "../kernel/ids.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { THRESHOLD_OPS, type ThresholdOp } from "./composite-verdict.ts";

export const MAX_COMPOSITE_INPUTS = 50;
const KEY = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const MAX_AGE_LIMIT = 7 * 86_400;
export const METRIC_AGGS = ["avg", "min", "max", "last"] as const;
export type MetricAgg = (typeof METRIC_AGGS)[number];

interface InputBase {
  key: string;
  critical: boolean;
  /** Older than this, the input's latest result is stale (check default: its overdue limit). */
  max_age_seconds: number | null;
}

export interface CheckInput extends InputBase {
  kind: "check";
  check_id: string;
  check_name: string;
}

export interface MetricInput extends InputBase {
  kind: "metric";
  metric: string;
  device_uid: string | null;
  agg: MetricAgg;
  op: ThresholdOp;
  threshold: number;
  window_seconds: number;
}

export type CompositeInput = CheckInput | MetricInput;

const CHECK_KEYS = new Set(["key", "kind", "check_id", "check_name", "critical", "max_age_seconds"]);
const METRIC_KEYS = new Set([
  "key",
  "kind",
  "metric",
  "device_uid",
  "agg",
  "op",
  "threshold",
  "window_seconds",
  "critical",
  "max_age_seconds",
]);

const at = (i: number, member?: string) =>
  `/data/attributes/inputs/${i}${member === undefined ? "" : `/${member}`}`;

function fail(message: string, pointer: string): never {
  throw new ValidationError(message, { source: { pointer } });
}

function intIn(v: unknown, min: number, max: number, name: string, pointer: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    fail(`${name} must be an integer from ${min} to ${max}`, pointer);
  }
  return v;
}

function text(v: unknown, max: number, name: string, pointer: string): string {
  if (typeof v !== "string" || v.trim() === "" || v.length > max || v.includes("\u0000")) {
    fail(`${name} must be a non-empty string of at most ${max} characters`, pointer);
  }
  return v;
}

/** Validate the shape; check references are resolved by resolveCheckInputs (needs the DB). */
export function parseCompositeInputs(raw: unknown): CompositeInput[] {
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_COMPOSITE_INPUTS) {
    fail(`inputs must be a list of 1 to ${MAX_COMPOSITE_INPUTS} inputs`, "/data/attributes/inputs");
  }
  const keys = new Set<string>();
  return raw.map((e, i): CompositeInput => {
    if (e === null || typeof e !== "object" || Array.isArray(e)) fail("each input must be an object", at(i));
    const o = e as Record<string, unknown>;
    const kind = o.kind;
    if (kind !== "check" && kind !== "metric") fail("kind must be 'check' or 'metric'", at(i, "kind"));
    const allowed = kind === "check" ? CHECK_KEYS : METRIC_KEYS;
    for (const k of Object.keys(o)) {
      if (!allowed.has(k)) {
        fail(`unknown member '${k}' in a ${kind} input (allowed: ${[...allowed].join(", ")})`, at(i, k));
      }
    }
    if (typeof o.key !== "string" || !KEY.test(o.key)) {
      fail("key must be 1-64 letters, digits, '_' or '-', starting with a letter or digit", at(i, "key"));
    }
    if (keys.has(o.key)) fail(`two inputs have the key '${o.key}'`, at(i, "key"));
    keys.add(o.key);
    if (o.critical !== undefined && typeof o.critical !== "boolean") {
      fail("critical must be a boolean", at(i, "critical"));
    }
    const base: InputBase = {
      key: o.key,
      critical: o.critical === true,
      max_age_seconds:
        o.max_age_seconds === undefined || o.max_age_seconds === null
          ? null
          : intIn(o.max_age_seconds, 1, MAX_AGE_LIMIT, "max_age_seconds", at(i, "max_age_seconds")),
    };
    if (kind === "check") {
      if (o.check_id === undefined && o.check_name === undefined) {
        fail("a check input names its check by check_id or check_name", at(i, "check_id"));
      }
      if (o.check_id !== undefined && !isUuid(o.check_id)) fail("check_id must be a uuid", at(i, "check_id"));
      return {
        ...base,
        kind,
        check_id: (o.check_id as string | undefined)?.toLowerCase() ?? "",
        check_name:
          o.check_name === undefined ? "" : text(o.check_name, 255, "check_name", at(i, "check_name")),
      };
    }
    if (!THRESHOLD_OPS.includes(o.op as ThresholdOp)) {
      fail(`op must be one of ${THRESHOLD_OPS.join(", ")}`, at(i, "op"));
    }
    if (typeof o.threshold !== "number" || !Number.isFinite(o.threshold)) {
      fail("threshold must be a finite number", at(i, "threshold"));
    }
    if (o.agg !== undefined && !METRIC_AGGS.includes(o.agg as MetricAgg)) {
      fail(`agg must be one of ${METRIC_AGGS.join(", ")}`, at(i, "agg"));
    }
    return {
      ...base,
      kind,
      metric: text(o.metric, 255, "metric", at(i, "metric")),
      device_uid:
        o.device_uid === undefined || o.device_uid === null
          ? null
          : text(o.device_uid, 255, "device_uid", at(i, "device_uid")),
      agg: (o.agg as MetricAgg | undefined) ?? "avg",
      op: o.op as ThresholdOp,
      threshold: o.threshold,
      window_seconds:
        o.window_seconds === undefined
          ? 300
          : intIn(o.window_seconds, 1, 86_400, "window_seconds", at(i, "window_seconds")),
    };
  });
}

/**
 * Fill in check_id from check_name (and the name from the id), so evaluation follows the check
 * through renames. A name shared by checks of several devices is ambiguous: name the id.
 */
export async function resolveCheckInputs(tx: Queryable, inputs: CompositeInput[]): Promise<void> {
  for (const [i, input] of inputs.entries()) {
    if (input.kind !== "check") continue;
    if (input.check_id) {
      const row = await tx.one<{ name: string }>(
        sql`SELECT name FROM service_checks WHERE id = ${input.check_id}::uuid`,
      );
      if (!row) fail(`check_id '${input.check_id}' does not reference a service check`, at(i, "check_id"));
      input.check_name = row.name;
      continue;
    }
    const rows = await tx.many<{ id: string; name: string }>(
      sql`SELECT id, name FROM service_checks WHERE lower(name) = lower(${input.check_name}) LIMIT 2`,
    );
    if (rows.length === 0) fail(`no service check is named '${input.check_name}'`, at(i, "check_name"));
    if (rows.length > 1) {
      fail(
        `several service checks are named '${input.check_name}'; name it by check_id`,
        at(i, "check_name"),
      );
    }
    const row = rows[0] as { id: string; name: string };
    input.check_id = row.id;
    input.check_name = row.name;
  }
}
