import { isIP } from "node:net";
import { isUuid } from "../kernel/ids.ts";
import type { FilterNode, QueryAst, ScalarValue } from "./ast.ts";
import {
  COMPOSITE_VERDICTS,
  type EntityDecl,
  type FieldDecl,
  type FieldKind,
  findEntity,
} from "./catalog.ts";
import { planCompositeStats } from "./composite-stats.ts";
import { SrqlError } from "./errors.ts";
import { relativeSeconds } from "./parser.ts";
import { MAX_LONG_RANGE_DAYS, MAX_RANGE_DAYS, parseTimestamp, resolveTime, type TimeRange } from "./time.ts";

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 5000;
/** Spec 8: a page filtering on a device uid list must declare limit ≤ 200. */
export const DEVICE_UID_LIST_LIMIT = 200;
/** Stats are never paged; a grouping larger than this is refused rather than truncated. */
export const MAX_STATS_GROUPS = 10_000;
export const MAX_DOWNSAMPLE_ROWS = 10_000;

/** What a condition or ordering reads: a column, a JSON sub-path of one, or computed SQL. */
export interface Target {
  /** The name the user used after alias resolution (for messages and result keys). */
  name: string;
  column: string;
  kind: FieldKind;
  nullable: boolean;
  jsonPath?: string[];
  expr?: string;
}

export type CmpOp = "=" | ">" | ">=" | "<" | "<=";

export type Condition =
  | { kind: "cmp"; target: Target; op: CmpOp; value: string | number | boolean; negated: boolean }
  | { kind: "in"; target: Target; values: (string | number | boolean)[]; negated: boolean; lower?: boolean }
  | { kind: "like"; target: Target; pattern: string; negated: boolean; castText: boolean }
  | { kind: "array"; target: Target; values: string[]; mode: "all" | "any"; negated: boolean; json: boolean }
  | { kind: "cidr"; target: Target; cidr: string; negated: boolean }
  | { kind: "iprange"; target: Target; from: string; to: string; negated: boolean }
  | {
      /** A device's latest result of the composite `slug` (its verdict or status) is one of `values`. */
      kind: "composite";
      /** The entity's device uid column, read from its `table` (the subquery's outer row). */
      target: Target;
      table: string;
      slug: string;
      attr: "verdict" | "status";
      values: string[];
      negated: boolean;
    };

export interface SortKey {
  target: Target;
  direction: "asc" | "desc";
}

export type Plan =
  | (PlanBase & { mode: "rows"; sort: SortKey[] })
  | (PlanBase & { mode: "stats"; groups: Target[]; countAliases: string[]; order: SortKey[] })
  | (PlanBase & {
      mode: "downsample";
      bucketSeconds: number;
      agg: "avg" | "min" | "max" | "sum" | "count" | "rate";
      series: Target | null;
      value: Target;
      timeTarget: Target;
      direction: "asc" | "desc";
    });

interface PlanBase {
  entity: EntityDecl;
  conditions: Condition[];
  time: TimeRange | null;
  timeTarget: Target | null;
  limit: number;
  includeDeleted: boolean;
}

const TRUE = new Set(["true", "1", "yes", "y"]);
const FALSE = new Set(["false", "0", "no", "n"]);
const JSON_KEY = /^[A-Za-z0-9_\-:@$]+(?:\.[A-Za-z0-9_\-:@$]+){0,4}$/;
const INT_MAX = 9_007_199_254_740_991;

function toTarget(f: FieldDecl, name = f.name): Target {
  return {
    name,
    column: f.column,
    kind: f.kind,
    nullable: f.nullable,
    ...(f.jsonPath ? { jsonPath: f.jsonPath } : {}),
    ...(f.expr ? { expr: f.expr } : {}),
  };
}

/** Resolve a field name (aliases, fixed and dynamic JSON paths) or return null. */
export function resolveField(
  entity: EntityDecl,
  name: string,
): { field: FieldDecl | null; target: Target } | null {
  const canonical = entity.fieldAliases.get(name.toLowerCase()) ?? name;
  const f = entity.fields.get(canonical) ?? entity.fields.get(canonical.toLowerCase());
  if (f) return { field: f, target: toTarget(f, f.name) };
  const dot = name.indexOf(".");
  if (dot > 0) {
    const prefix = name.slice(0, dot).toLowerCase();
    const key = name.slice(dot + 1);
    const column = entity.jsonPrefixes.get(prefix);
    if (column && JSON_KEY.test(key)) {
      return {
        field: null,
        target: { name: `${prefix}.${key}`, column, kind: "text", nullable: true, jsonPath: key.split(".") },
      };
    }
  }
  return null;
}

function unknownField(entity: EntityDecl, name: string, token: string, span: FilterNode["span"]): SrqlError {
  return new SrqlError(`unsupported filter field '${name}' for ${entity.noun}`, token, span);
}

function normalizeMac(v: string): string {
  const hex = v.replace(/[^0-9a-fA-F]/g, "");
  if (hex.length !== 12) return v;
  return hex.toUpperCase().match(/../g)?.join(":") ?? v;
}

function parseNumber(kind: FieldKind, v: string, node: FilterNode, field: string): number {
  const t = v.trim();
  const ok =
    kind === "int" ? /^[+-]?\d{1,16}$/.test(t) : /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,3})?$/.test(t);
  const n = Number(t);
  if (!ok || !Number.isFinite(n) || Math.abs(n) > INT_MAX) {
    throw new SrqlError(
      `${field} expects ${kind === "int" ? "an integer" : "a number"}, got '${v}'`,
      node.token,
      node.span,
    );
  }
  return n;
}

function parseBool(v: string, node: FilterNode): boolean {
  const t = v.trim().toLowerCase();
  if (TRUE.has(t)) return true;
  if (FALSE.has(t)) return false;
  throw new SrqlError(`invalid boolean value '${v}'`, node.token, node.span);
}

function escapeLike(v: string): string {
  return v.replace(/[\\%_]/g, (c) => `\\${c}`);
}

const OP_SQL: Record<string, CmpOp> = { eq: "=", equals: "=", gt: ">", gte: ">=", lt: "<", lte: "<=" };

function timeValue(v: string, node: FilterNode, now: Date): { op?: CmpOp; value: string } {
  const d = parseTimestamp(v);
  if (d) return { value: d.toISOString() };
  const rel = relativeSeconds(v);
  if (rel !== null && node.op === "eq")
    return { op: ">=", value: new Date(now.getTime() - rel * 1000).toISOString() };
  throw new SrqlError(`invalid time literal '${v}'`, node.token, node.span);
}

const COMPOSITE_FIELD = /^composite\.([a-z0-9][a-z0-9_-]{0,62})(\.status)?$/;

/** `composite.<slug>:down`, `composite.<slug>.status:(down,unknown)` on devices. */
function planCompositeFilter(entity: EntityDecl, node: FilterNode): Condition {
  const m = COMPOSITE_FIELD.exec(node.field.toLowerCase());
  if (!m) throw unknownField(entity, node.field, node.token, node.span);
  if (node.op !== "eq" && node.op !== "equals") {
    throw new SrqlError(`unsupported operator for composite filter: ${node.op}`, node.token, node.span);
  }
  const raw = node.value.kind === "list" ? node.value.items.map((i) => i.value) : [node.value.value];
  const values = [...new Set(raw.map((v) => v.trim().toLowerCase()))];
  for (const v of values) {
    if (!(COMPOSITE_VERDICTS as readonly string[]).includes(v)) {
      throw new SrqlError(
        `invalid composite verdict '${v}' (expected ${COMPOSITE_VERDICTS.join(", ")})`,
        node.token,
        node.span,
      );
    }
  }
  const uid = entity.fields.get(entity.tieBreaker) as FieldDecl;
  return {
    kind: "composite",
    target: toTarget(uid),
    table: entity.table,
    slug: m[1] as string,
    attr: m[2] ? "status" : "verdict",
    values,
    negated: node.negated,
  };
}

function planFilter(entity: EntityDecl, node: FilterNode, now: Date, out: Condition[]): void {
  if (entity.compositeFilters && node.field.toLowerCase().startsWith("composite.")) {
    out.push(planCompositeFilter(entity, node));
    return;
  }
  const resolved = resolveField(entity, node.field);
  if (!resolved) throw unknownField(entity, node.field, node.token, node.span);
  const { field, target } = resolved;
  if (field?.noop) {
    if (node.value.kind === "scalar") parseBool(node.value.value, node);
    return;
  }
  const kind = target.kind;
  const neg = node.negated;
  const normalize = (s: string) => (field?.normalize === "mac" ? normalizeMac(s) : s);
  if (kind === "json") {
    throw new SrqlError(
      `field '${node.field}' is an object; filter on a key such as ${node.field}.<key>`,
      node.token,
      node.span,
    );
  }

  if (node.value.kind === "list") {
    const items = node.value.items.map((i) => i.value);
    if (kind === "text_array") {
      out.push({
        kind: "array",
        target,
        values: items,
        mode: field?.listMode ?? "all",
        negated: neg,
        json: field?.jsonArray === true,
      });
      return;
    }
    if (kind === "bool") {
      const values = [...new Set(items.map((i) => parseBool(i, node)))];
      out.push({ kind: "in", target, values, negated: neg });
      return;
    }
    let values: (string | number)[];
    if (kind === "int" || kind === "float") values = items.map((i) => parseNumber(kind, i, node, node.field));
    else if (kind === "uuid") values = items.map((i) => checkUuid(i, node));
    else if (kind === "time") values = items.map((i) => timeValue(i, node, now).value);
    else values = items.map(normalize);
    if (field?.caseInsensitive) {
      const lowered = [...new Set(values.map((x) => String(x).toLowerCase()))];
      out.push({ kind: "in", target, values: lowered, negated: neg, lower: true });
      return;
    }
    out.push({ kind: "in", target, values, negated: neg });
    return;
  }

  const sv: ScalarValue = node.value;
  const v = sv.value;
  const op = node.op;
  const hasWildcard = v.includes("%");

  if (op === "contains") {
    if (kind === "text_array") {
      out.push({
        kind: "array",
        target,
        values: [v],
        mode: "all",
        negated: neg,
        json: field?.jsonArray === true,
      });
      return;
    }
    if (kind === "bool")
      throw new SrqlError(`unsupported operator for boolean filter: contains`, node.token, node.span);
    out.push({
      kind: "like",
      target,
      pattern: `%${escapeLike(v)}%`,
      negated: neg,
      castText: kind !== "text",
    });
    return;
  }

  switch (kind) {
    case "text":
    case "ip": {
      if (op === "gt" || op === "gte" || op === "lt" || op === "lte") {
        throw new SrqlError(`unsupported operator for text filter: ${op}`, node.token, node.span);
      }
      if (kind === "ip" && op === "eq" && !hasWildcard) {
        const ipCond = planIp(target, v, neg, node);
        if (ipCond) return void out.push(ipCond);
      }
      if (op === "eq" && hasWildcard) {
        out.push({ kind: "like", target, pattern: v, negated: neg, castText: false });
        return;
      }
      if (field?.caseInsensitive) {
        out.push({ kind: "like", target, pattern: escapeLike(normalize(v)), negated: neg, castText: false });
        return;
      }
      out.push({ kind: "cmp", target, op: "=", value: normalize(v), negated: neg });
      return;
    }
    case "int":
    case "float": {
      if (hasWildcard && op === "eq") {
        out.push({ kind: "like", target, pattern: v, negated: neg, castText: true });
        return;
      }
      // A '!' on a comparison is ignored (reference §1.3); on equality it negates.
      const n = parseNumber(kind, v, node, node.field);
      const isCmp = op !== "eq" && op !== "equals";
      out.push({ kind: "cmp", target, op: OP_SQL[op] as CmpOp, value: n, negated: isCmp ? false : neg });
      return;
    }
    case "bool": {
      if (op !== "eq" && op !== "equals") {
        throw new SrqlError(`unsupported operator for boolean filter: ${op}`, node.token, node.span);
      }
      out.push({ kind: "cmp", target, op: "=", value: parseBool(v, node), negated: neg });
      return;
    }
    case "uuid": {
      if (op === "eq" && hasWildcard) {
        out.push({ kind: "like", target, pattern: v, negated: neg, castText: true });
        return;
      }
      if (op !== "eq" && op !== "equals") {
        throw new SrqlError(`unsupported operator for id filter: ${op}`, node.token, node.span);
      }
      out.push({ kind: "cmp", target, op: "=", value: checkUuid(v, node), negated: neg });
      return;
    }
    case "time": {
      const tv = timeValue(v, node, now);
      const sqlOp = tv.op ?? (OP_SQL[op] as CmpOp);
      const isCmp = sqlOp !== "=";
      out.push({ kind: "cmp", target, op: sqlOp, value: tv.value, negated: isCmp ? false : neg });
      return;
    }
    case "text_array": {
      if (op !== "eq" && op !== "equals") {
        throw new SrqlError(`unsupported operator for array filter: ${op}`, node.token, node.span);
      }
      out.push({
        kind: "array",
        target,
        values: [v],
        mode: "all",
        negated: neg,
        json: field?.jsonArray === true,
      });
      return;
    }
  }
}

function checkUuid(v: string, node: FilterNode): string {
  if (!isUuid(v.trim())) throw new SrqlError(`invalid uuid '${v}'`, node.token, node.span);
  return v.trim().toLowerCase();
}

function planIp(target: Target, v: string, negated: boolean, node: FilterNode): Condition | null {
  const slash = v.indexOf("/");
  if (slash > 0) {
    const addr = v.slice(0, slash);
    const bits = v.slice(slash + 1);
    const fam = isIP(addr);
    const max = fam === 4 ? 32 : 128;
    if (!fam || !/^\d{1,3}$/.test(bits) || Number(bits) > max) {
      throw new SrqlError(`invalid CIDR '${v}'`, node.token, node.span);
    }
    return { kind: "cidr", target, cidr: v, negated };
  }
  const dash = v.indexOf("-");
  if (dash > 0) {
    const from = v.slice(0, dash).trim();
    const to = v.slice(dash + 1).trim();
    if (!isIP(from) || !isIP(to) || isIP(from) !== isIP(to)) {
      throw new SrqlError(`invalid IP range '${v}'`, node.token, node.span);
    }
    return { kind: "iprange", target, from, to, negated };
  }
  return null;
}

function resolveGroup(entity: EntityDecl, name: string, token: string, span: FilterNode["span"]): Target {
  const r = resolveField(entity, name);
  const prefix = name.includes(".") ? name.slice(0, name.indexOf(".")).toLowerCase() : null;
  const ok = r && (r.field ? r.field.groupable : prefix !== null && entity.groupableJsonPrefixes.has(prefix));
  if (!r || !ok) {
    const supported = [
      ...[...entity.fields.values()].filter((f) => f.groupable).map((f) => f.name),
      ...[...entity.groupableJsonPrefixes].map((p) => `${p}.<key>`),
    ];
    throw new SrqlError(
      `unsupported stats group field '${name}'. Supported fields: ${supported.join(", ")}`,
      token,
      span,
    );
  }
  return r.target;
}

function sortTarget(entity: EntityDecl, name: string, token: string, span: FilterNode["span"]): Target {
  const r = resolveField(entity, name);
  if (!r || r.field?.noop)
    throw new SrqlError(`unsupported sort field '${name}' for ${entity.name}`, token, span);
  if (r.target.kind === "json" || r.target.kind === "text_array") {
    throw new SrqlError(`field '${name}' cannot be sorted`, token, span);
  }
  return r.target;
}

function isDeviceUidTarget(entity: EntityDecl, t: Target): boolean {
  if (entity.name === "devices") return t.column === "uid";
  return t.column === "device_id" || t.column === "device_uid";
}

/** Stats sort: only by the count alias or a group field; default count desc. */
function statsOrder(ast: QueryAst, groups: Target[], countAliases: string[]): SortKey[] {
  const order: SortKey[] = [];
  for (const s of ast.sort) {
    const g = groups.find((x) => x.name === s.field || x.column === s.field);
    if (countAliases.includes(s.field)) {
      order.push({
        target: { name: s.field, column: "", kind: "int", nullable: false },
        direction: s.direction,
      });
    } else if (g) order.push({ target: g, direction: s.direction });
    else throw new SrqlError(`unsupported sort field '${s.field}' for stats`, s.token, s.span);
  }
  return order;
}

export interface PlanOptions {
  now: Date;
  /** `limit` from the request body; a `limit:` token in the query wins. */
  limit?: number | null;
}

/** Resolve an AST against the catalog into a typed plan. Throws SrqlError (400). */
export function plan(ast: QueryAst, opts: PlanOptions): Plan {
  if (!ast.entity) throw new SrqlError("queries must include an in:<entity> token");
  const entity = findEntity(ast.entity.name);
  if (!entity) {
    throw new SrqlError(`unsupported entity '${ast.entity.name}'`, ast.entity.token, ast.entity.span);
  }
  const conditions: Condition[] = [];
  let includeDeleted = false;
  let deviceUidList: FilterNode | null = null;
  for (const f of ast.filters) {
    if (entity.softDeleteColumn && f.field === "include_deleted") {
      if (f.op !== "eq" || f.value.kind !== "scalar" || f.negated) {
        throw new SrqlError("include_deleted only supports equality", f.token, f.span);
      }
      includeDeleted = parseBool(f.value.value, f);
      continue;
    }
    planFilter(entity, f, opts.now, conditions);
    const last = conditions[conditions.length - 1];
    if (f.value.kind === "list" && last && last.kind === "in" && isDeviceUidTarget(entity, last.target)) {
      deviceUidList = f;
    }
  }

  const limit = ast.limit?.value ?? opts.limit ?? DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit <= 0) throw new SrqlError("limit must be a positive integer");
  if (limit > MAX_LIMIT) {
    throw new SrqlError(
      `limit must be at most ${MAX_LIMIT}`,
      ast.limit?.token ?? null,
      ast.limit?.span ?? null,
    );
  }
  if (deviceUidList && limit > DEVICE_UID_LIST_LIMIT) {
    throw new SrqlError(
      `a query with a device uid list must use limit <= ${DEVICE_UID_LIST_LIMIT} (got ${limit})`,
      deviceUidList.token,
      deviceUidList.span,
    );
  }

  // by:/group: without stats or downsampling mean `stats:"count() by <fields>"`.
  const ds = ast.downsample;
  let statsNode = ast.stats;
  if (ast.groupBy && !ds && !statsNode) {
    statsNode = {
      exprs: [{ fn: "count", arg: "", alias: "count" }],
      by: [],
      token: ast.groupBy.token,
      span: ast.groupBy.span,
      texts: [],
      deferred: null,
    };
  }
  if (statsNode && ds) {
    throw new SrqlError(
      "stats cannot be combined with downsampling (bucket:/agg:/series:)",
      ds.token,
      ds.span,
    );
  }
  const longRange = entity.longRange && (statsNode !== null || ds !== null);
  const timeTarget = entity.timeField ? toTarget(entity.fields.get(entity.timeField) as FieldDecl) : null;
  let time: TimeRange | null = null;
  if (ast.time) {
    if (!timeTarget) throw new SrqlError(`${entity.name} has no time field`, ast.time.token, ast.time.span);
    time = resolveTime(ast.time, opts.now, longRange ? MAX_LONG_RANGE_DAYS : MAX_RANGE_DAYS);
  }
  const base: PlanBase = { entity, conditions, time, timeTarget, limit, includeDeleted };

  if (statsNode && entity.statsFields) {
    const cs = planCompositeStats(entity, statsNode, ast.groupBy);
    const order = statsOrder(ast, cs.groups, [cs.alias]);
    return {
      ...base,
      entity: cs.table === entity.table ? entity : { ...entity, table: cs.table },
      mode: "stats",
      groups: cs.groups,
      countAliases: [cs.alias],
      order,
    };
  }
  if (statsNode) {
    const st = statsNode;
    if (st.deferred) throw st.deferred;
    for (const e of st.exprs) {
      if (e.fn !== "count" || (e.arg !== "" && e.arg !== "*")) {
        throw new SrqlError(
          `stats supports only count(); unsupported aggregation '${e.fn}(${e.arg})'`,
          st.token,
          st.span,
        );
      }
    }
    let by = st.by;
    if (ast.groupBy) {
      if (by.length > 0 && by.join(",") !== ast.groupBy.fields.join(",")) {
        throw new SrqlError(
          "conflicting 'by' clauses across stats expressions",
          ast.groupBy.token,
          ast.groupBy.span,
        );
      }
      by = ast.groupBy.fields;
    }
    const groups = by.map((g) => resolveGroup(entity, g, st.token, st.span));
    const countAliases = st.exprs.map((e) => e.alias || "count");
    if (new Set(countAliases).size !== countAliases.length) {
      throw new SrqlError("stats aliases must be unique", st.token, st.span);
    }
    const outNames = [...groups.map((g) => g.name), ...countAliases];
    if (new Set(outNames).size !== outNames.length) {
      throw new SrqlError("a stats alias may not repeat a group field", st.token, st.span);
    }
    return { ...base, mode: "stats", groups, countAliases, order: statsOrder(ast, groups, countAliases) };
  }

  if (ds) {
    const decl = entity.downsample;
    if (!decl) throw new SrqlError(`downsampling is not supported for ${entity.name}`, ds.token, ds.span);
    if (ds.bucketSeconds === null)
      throw new SrqlError("downsample requires bucket:<duration>", ds.token, ds.span);
    const pick = (name: string, allowed: string[], what: string, token: string, span: FilterNode["span"]) => {
      const r = resolveField(entity, name);
      if (!r?.field || !allowed.includes(r.field.name)) {
        throw new SrqlError(`unsupported ${what} '${name}' for ${entity.table}`, token, span);
      }
      return toTarget(r.field);
    };
    const value = ds.valueField
      ? pick(ds.valueField.field, decl.valueFields, "value_field", ds.valueField.token, ds.valueField.span)
      : toTarget(entity.fields.get(decl.defaultValue) as FieldDecl);
    let seriesName: { field: string; token: string; span: FilterNode["span"] } | null = ds.series;
    if (ast.groupBy) {
      const [only, ...rest] = ast.groupBy.fields;
      if (rest.length > 0 || (ds.series && ds.series.field !== only)) {
        throw new SrqlError("downsampling takes one series field", ast.groupBy.token, ast.groupBy.span);
      }
      seriesName = { field: only as string, token: ast.groupBy.token, span: ast.groupBy.span };
    }
    const series = seriesName
      ? pick(seriesName.field, decl.seriesFields, "series field", seriesName.token, seriesName.span)
      : decl.defaultSeries
        ? toTarget(entity.fields.get(decl.defaultSeries) as FieldDecl)
        : null;
    let direction: "asc" | "desc" = "asc";
    for (const s of ast.sort) {
      if (s.field !== "timestamp" && s.field !== entity.timeField) {
        throw new SrqlError(`unsupported sort field '${s.field}' for downsampled results`, s.token, s.span);
      }
      direction = s.direction;
    }
    const explicit = ast.limit?.value ?? opts.limit ?? null;
    return {
      ...base,
      limit: explicit ?? MAX_DOWNSAMPLE_ROWS,
      mode: "downsample",
      bucketSeconds: ds.bucketSeconds,
      agg: ds.agg?.fn ?? decl.defaultAgg,
      series,
      value,
      timeTarget: timeTarget as Target,
      direction,
    };
  }

  const sort: SortKey[] = ast.sort.map((s) => ({
    target: sortTarget(entity, s.field, s.token, s.span),
    direction: s.direction,
  }));
  if (sort.length === 0) {
    const f = entity.fields.get(entity.defaultSort.field) as FieldDecl;
    sort.push({ target: toTarget(f), direction: entity.defaultSort.direction });
  }
  // The unique tie-breaker makes the order total (keyset cursors need it).
  if (!sort.some((s) => s.target.column === entity.tieBreaker && !s.target.jsonPath && !s.target.expr)) {
    const last = sort[sort.length - 1] as SortKey;
    const tb = entity.fields.get(entity.tieBreaker) as FieldDecl;
    sort.push({ target: toTarget(tb), direction: last.direction });
  }
  return { ...base, mode: "rows", sort };
}
