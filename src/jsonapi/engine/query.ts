/**
 * Query parameters of the v2 surface: the deepObject parser and the validators/compilers for
 * `filter` (spec 2.5), `sort`, `page`, `include` and `fields`. Identifiers come only from
 * declarations; every request value becomes a SQL parameter.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { type ErrorCode, InvalidRequestError } from "../../kernel/errors.ts";
import { ident, join, raw, type SqlFragment, sql } from "../../storage/sql.ts";
import {
  type AttributeDecl,
  columnOf,
  isFilterable,
  isSortable,
  type PaginationDecl,
  type PaginationStyle,
  type ResourceDecl,
} from "../define.ts";
import { getResource } from "../registry.ts";
import { isJsonType, parseQueryValue, pgTypeOf } from "./values.ts";

export type DeepValue = string | DeepValue[] | { [k: string]: DeepValue };
export type DeepObject = { [k: string]: DeepValue };

const MAX_PARAMS = 1000;
const MAX_DEPTH = 12;

function invalid(
  message: string,
  parameter: string,
  code: ErrorCode = "invalid_parameter",
): InvalidRequestError {
  return new InvalidRequestError(message, { source: { parameter }, code });
}

/** Split `filter[a][0][b]` into ["filter","a","0","b"]; null when malformed. */
export function splitKey(key: string): string[] | null {
  const m = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
  if (!m) return null;
  const parts = [m[1] as string];
  const rest = m[2] ?? "";
  for (const seg of rest.matchAll(/\[([^[\]]*)\]/g)) parts.push(seg[1] as string);
  return parts;
}

/**
 * Keys that would reach an object's prototype. Refused outright rather than skipped, so a
 * caller trying them learns nothing useful and a client bug is visible.
 */
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/**
 * Parse a raw query string into nested objects (`a[b][]=1&a[b][]=2` → {a:{b:["1","2"]}}).
 * Every object is null-prototype: request data never meets Object.prototype.
 */
export function parseDeepQuery(search: string): DeepObject {
  const out: DeepObject = Object.create(null);
  const params = new URLSearchParams(search);
  let count = 0;
  for (const [key, value] of params) {
    if (++count > MAX_PARAMS) throw invalid("too many query parameters", key);
    const parts = splitKey(key);
    if (!parts) throw invalid(`malformed query parameter '${key}'`, key);
    if (parts.length > MAX_DEPTH) throw invalid(`query parameter '${key}' is nested too deeply`, key);
    if (parts.some((p) => FORBIDDEN_KEYS.has(p)))
      throw invalid(`query parameter '${key}' uses a reserved name (__proto__, constructor, prototype)`, key);
    let node: DeepObject = out;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i] as string;
      const last = i === parts.length - 1;
      if (part === "") {
        // `[]` appends: only valid as the last segment.
        if (!last) throw invalid(`malformed query parameter '${key}'`, key);
        continue;
      }
      const nextIsPush = parts[i + 1] === "" && i + 2 === parts.length;
      if (last) {
        const existing = node[part];
        if (existing === undefined) node[part] = value;
        else if (Array.isArray(existing)) existing.push(value);
        else if (typeof existing === "string") node[part] = [existing, value];
        else throw invalid(`conflicting query parameter '${key}'`, key);
      } else if (nextIsPush) {
        const existing = node[part];
        if (existing === undefined) node[part] = [value];
        else if (Array.isArray(existing)) existing.push(value);
        else if (typeof existing === "string") node[part] = [existing, value];
        else throw invalid(`conflicting query parameter '${key}'`, key);
        break;
      } else {
        let child = node[part];
        if (child === undefined) {
          child = Object.create(null) as DeepObject;
          node[part] = child;
        }
        if (typeof child !== "object" || Array.isArray(child))
          throw invalid(`conflicting query parameter '${key}'`, key);
        node = child;
      }
    }
  }
  return out;
}

/** An array given as `x[]=..` (array) or `x[0]=..&x[1]=..` (object with index keys). */
function asArray(v: DeepValue, parameter: string): DeepValue[] {
  if (Array.isArray(v)) return v;
  if (typeof v === "object") {
    const keys = Object.keys(v);
    if (keys.every((k) => /^\d+$/.test(k))) {
      return keys.sort((a, b) => Number(a) - Number(b)).map((k) => v[k] as DeepValue);
    }
  }
  throw invalid(`${parameter} must be an array`, parameter, "invalid_filter");
}

export const COMMON_OPERATORS = [
  "eq",
  "not_eq",
  "greater_than",
  "greater_than_or_equal",
  "less_than",
  "less_than_or_equal",
  "in",
  "is_nil",
  "is_distinct_from",
  "is_not_distinct_from",
] as const;
export const STRING_OPERATORS = ["contains", "like", "ilike"] as const;

export function operatorsFor(a: AttributeDecl): readonly string[] {
  if (a.type === "any") return ["is_nil"];
  return a.type === "string" ? [...COMMON_OPERATORS, ...STRING_OPERATORS] : COMMON_OPERATORS;
}

const CMP: Record<string, string> = {
  eq: "=",
  not_eq: "<>",
  greater_than: ">",
  greater_than_or_equal: ">=",
  less_than: "<",
  less_than_or_equal: "<=",
};

/** The attribute named `id` implicitly: the primary key (single-column ids only). */
export function idAttribute(res: ResourceDecl): AttributeDecl | null {
  if (typeof res.id.column !== "string") return null;
  return {
    type: res.id.type === "integer" ? "integer" : res.id.type === "uuid" ? "uuid" : "string",
    column: res.id.column,
  };
}

export function filterableAttribute(res: ResourceDecl, name: string): AttributeDecl | null {
  if (name === "id" && !res.attributes.id) return idAttribute(res);
  const a = res.attributes[name];
  return a ?? null;
}

let aliasCounter = 0;

/** Compile a filter object of `res` (alias `alias`) into a SQL condition. */
export function compileFilter(
  res: ResourceDecl,
  node: DeepValue,
  prefix: string,
  alias: string,
  depth = 0,
): SqlFragment {
  if (depth > 8) throw invalid(`${prefix} is nested too deeply`, prefix, "invalid_filter");
  if (typeof node !== "object" || Array.isArray(node)) {
    throw invalid(`${prefix} must be an object of attribute filters`, prefix, "invalid_filter");
  }
  const conds: SqlFragment[] = [];
  for (const [key, value] of Object.entries(node)) {
    const p = `${prefix}[${key}]`;
    if (key === "and" || key === "or") {
      const items = asArray(value, p).map((item, i) =>
        compileFilter(res, item, `${p}[${i}]`, alias, depth + 1),
      );
      if (items.length === 0) conds.push(raw(key === "and" ? "TRUE" : "FALSE"));
      else conds.push(sql`(${join(items, key === "and" ? " AND " : " OR ")})`);
      continue;
    }
    if (key === "not") {
      conds.push(sql`NOT (${compileFilter(res, value, p, alias, depth + 1)})`);
      continue;
    }
    const rel = res.relationships?.[key];
    if (rel) {
      const target = getResource(rel.type);
      if (!target) throw invalid(`unknown filter key '${key}'`, p, "invalid_filter");
      const a2 = `f${++aliasCounter % 100000}`;
      const inner = compileFilter(target, value, p, a2, depth + 1);
      const tbl = tableRef(target.table);
      const targetIdCol = typeof target.id.column === "string" ? target.id.column : "id";
      const link =
        rel.kind === "belongsTo"
          ? sql`${ident(a2, rel.targetColumn ?? targetIdCol)} = ${ident(alias, rel.column as string)}`
          : sql`${ident(a2, rel.foreignColumn as string)} = ${ident(alias, rel.localColumn ?? (res.id.column as string))}`;
      conds.push(sql`EXISTS (SELECT 1 FROM ${tbl} AS ${ident(a2)} WHERE ${link} AND ${inner})`);
      continue;
    }
    const attr = filterableAttribute(res, key);
    if (!attr || attr.public === false) {
      throw invalid(`unknown filter key '${key}' for type '${res.type}'`, p, "invalid_filter");
    }
    if (attr.stored === false) {
      throw invalid(
        `cannot filter on '${key}': the table serving '${res.type}' does not store it`,
        p,
        "unstored_field",
      );
    }
    if (!isFilterable(attr))
      throw invalid(`attribute '${key}' of '${res.type}' is not filterable`, p, "invalid_filter");
    if (Array.isArray(value)) {
      throw invalid(`${p} must be a value or an operator object, e.g. ${p}[eq]=value`, p, "invalid_filter");
    }
    const ops = operatorsFor(attr);
    // `filter[attr]=value` is equality (as in AshJsonApi): it is what a standard one-level
    // deepObject serialiser (openapi-fetch's default) sends for `{filter: {attr: value}}`.
    const entries: [string, DeepValue][] =
      typeof value === "string" ? [["eq", value]] : Object.entries(value);
    if (entries.length === 0) throw invalid(`${p} needs an operator`, p, "invalid_filter");
    for (const [op, v] of entries) {
      const pp = `${p}[${op}]`;
      if (!ops.includes(op)) {
        throw invalid(
          `operator '${op}' is not allowed on '${key}' (${attr.type}); allowed: ${ops.join(", ")}`,
          pp,
          "invalid_filter",
        );
      }
      conds.push(compileOperator(attr, ident(alias, columnOf(key, attr)), op, v, pp));
    }
  }
  if (conds.length === 0) return raw("TRUE");
  return conds.length === 1 ? (conds[0] as SqlFragment) : sql`(${join(conds, " AND ")})`;
}

function compileOperator(
  attr: AttributeDecl,
  col: SqlFragment,
  op: string,
  v: DeepValue,
  p: string,
): SqlFragment {
  const pgType = raw(pgTypeOf(attr.type));
  const lhs = isJsonType(attr.type) ? sql`to_jsonb(${col})` : col;
  const param = (x: unknown) => sql`CAST(${x} AS ${pgType})`;
  switch (op) {
    case "is_nil": {
      const b = parseQueryValue(v, { type: "boolean" }, p);
      return b ? sql`${col} IS NULL` : sql`${col} IS NOT NULL`;
    }
    case "in": {
      const items = asArray(v, p).map((item, i) => parseQueryValue(item, attr, `${p}[${i}]`));
      if (items.length === 0) return raw("FALSE");
      if (items.length > 500) throw invalid(`${p} takes at most 500 values`, p, "invalid_filter");
      return sql`${lhs} IN (${join(items.map(param))})`;
    }
    case "is_distinct_from":
      return sql`${lhs} IS DISTINCT FROM ${param(parseQueryValue(v, attr, p))}`;
    case "is_not_distinct_from":
      return sql`${lhs} IS NOT DISTINCT FROM ${param(parseQueryValue(v, attr, p))}`;
    case "contains":
      return sql`strpos(${col}, ${parseQueryValue(v, attr, p)}::text) > 0`;
    case "like":
      return sql`${col} LIKE ${parseQueryValue(v, attr, p)}::text`;
    case "ilike":
      return sql`${col} ILIKE ${parseQueryValue(v, attr, p)}::text`;
    default: {
      const cmp = CMP[op];
      if (!cmp) throw invalid(`unknown operator '${op}'`, p, "invalid_filter");
      return sql`${lhs} ${raw(cmp)} ${param(parseQueryValue(v, attr, p))}`;
    }
  }
}

export function tableRef(table: string): SqlFragment {
  return ident(...table.split("."));
}

export interface SortKey {
  field: string;
  column: string;
  desc: boolean;
  attr: AttributeDecl;
}

/** Parse `sort` ("-a,b"); the id is appended as the final tiebreaker. */
export function parseSort(
  res: ResourceDecl,
  value: DeepValue | undefined,
  fallback: string | undefined,
): SortKey[] {
  let text: string;
  const fromDefault = value === undefined;
  if (value === undefined) text = fallback ?? res.defaultSort ?? "id";
  else if (typeof value !== "string") throw invalid("sort must be a comma-separated list of fields", "sort");
  else text = value;
  const keys: SortKey[] = [];
  const seen = new Set<string>();
  for (const rawKey of text.split(",")) {
    const k = rawKey.trim();
    if (k === "") throw invalid("sort has an empty field", "sort");
    const desc = k.startsWith("-");
    const field = desc ? k.slice(1) : k;
    const attr = filterableAttribute(res, field);
    if (!attr || (attr.public === false && !fromDefault)) {
      throw invalid(`cannot sort on unknown field '${field}'`, "sort", "invalid_sort");
    }
    if (attr.stored === false) {
      throw invalid(
        `cannot sort on '${field}': the table serving '${res.type}' does not store it`,
        "sort",
        "unstored_field",
      );
    }
    if (!isSortable(attr)) throw invalid(`field '${field}' is not sortable`, "sort", "invalid_sort");
    if (seen.has(field)) continue;
    seen.add(field);
    keys.push({ field, column: columnOf(field, attr), desc, attr });
  }
  // Tiebreaker: the primary key column(s).
  const idCols = typeof res.id.column === "string" ? [res.id.column] : res.id.column;
  for (const c of idCols) {
    if (!keys.some((k) => k.column === c)) {
      const idAttr: AttributeDecl =
        typeof res.id.column === "string"
          ? (idAttribute(res) as AttributeDecl)
          : {
              type:
                Object.entries(res.attributes).find(([n, a]) => columnOf(n, a) === c)?.[1].type ?? "string",
              column: c,
            };
      keys.push({ field: c, column: c, desc: false, attr: idAttr });
    }
  }
  return keys;
}

export function orderBy(keys: readonly SortKey[], alias: string, reverse = false): SqlFragment {
  return join(
    keys.map((k) => {
      const desc = reverse ? !k.desc : k.desc;
      // PostgreSQL's default NULLS placement (null sorts as the largest value: ASC NULLS LAST,
      // DESC NULLS FIRST) so ordinary b-tree indexes serve the ORDER BY.
      return sql`${ident(alias, k.column)} ${raw(desc ? "DESC" : "ASC")}`;
    }),
  );
}

export interface PageRequest {
  style: PaginationStyle | "none";
  limit: number;
  offset: number;
  after?: string;
  before?: string;
  count: boolean;
}

export function resolvedPagination(
  p: PaginationDecl | undefined,
  readOnly: boolean,
): Required<PaginationDecl> {
  return {
    styles: readOnly ? ["offset"] : (p?.styles ?? ["offset", "keyset"]),
    defaultLimit: p?.defaultLimit ?? 100,
    maxLimit: p?.maxLimit ?? 1000,
    required: readOnly ? true : (p?.required ?? true),
  };
}

/** Validate `page[...]`. `decl` null means "(no page)": any page parameter → 400. */
export function parsePage(
  value: DeepValue | undefined,
  decl: Required<PaginationDecl> | null,
  maxRows = 1000,
): PageRequest {
  if (decl === null) {
    if (value !== undefined) throw invalid("this collection takes no page parameter", "page");
    return { style: "none", limit: maxRows, offset: 0, count: false };
  }
  if (value === undefined) {
    if (!decl.required) return { style: "none", limit: decl.maxLimit, offset: 0, count: false };
    return {
      style: decl.styles.includes("keyset") ? "keyset" : "offset",
      limit: decl.defaultLimit,
      offset: 0,
      count: false,
    };
  }
  if (typeof value !== "object" || Array.isArray(value))
    throw invalid("page must be an object, e.g. page[limit]=50", "page");
  const allowed = new Set(["limit", "count"]);
  if (decl.styles.includes("offset")) allowed.add("offset");
  if (decl.styles.includes("keyset")) {
    allowed.add("after");
    allowed.add("before");
  }
  for (const k of Object.keys(value)) {
    if (!allowed.has(k)) {
      throw invalid(`page[${k}] is not supported here (allowed: ${[...allowed].join(", ")})`, `page[${k}]`);
    }
  }
  const single = (k: string): string | undefined => {
    const v = value[k];
    if (v === undefined) return undefined;
    if (typeof v !== "string") throw invalid(`page[${k}] must be a single value`, `page[${k}]`);
    return v;
  };
  let limit = decl.defaultLimit;
  const l = single("limit");
  if (l !== undefined) {
    if (!/^\d{1,9}$/.test(l) || Number(l) < 1)
      throw invalid("page[limit] must be a positive integer", "page[limit]");
    limit = Number(l);
    if (limit > decl.maxLimit) throw invalid(`page[limit] must be at most ${decl.maxLimit}`, "page[limit]");
  }
  const c = single("count");
  if (c !== undefined && c !== "true" && c !== "false")
    throw invalid("page[count] must be true or false", "page[count]");
  const count = c === "true";
  const o = single("offset");
  const after = single("after");
  const before = single("before");
  if (after !== undefined && before !== undefined)
    throw invalid("page[after] and page[before] are exclusive", "page[before]");
  if (o !== undefined && (after !== undefined || before !== undefined)) {
    throw invalid("page[offset] cannot be combined with page[after]/page[before]", "page[offset]");
  }
  if (o !== undefined) {
    if (!/^\d{1,9}$/.test(o)) throw invalid("page[offset] must be a non-negative integer", "page[offset]");
    return { style: "offset", limit, offset: Number(o), count };
  }
  if (after !== undefined || before !== undefined)
    return { style: "keyset", limit, offset: 0, after, before, count };
  return { style: decl.styles.includes("keyset") ? "keyset" : "offset", limit, offset: 0, count };
}

export interface Cursor {
  s: string;
  v: (string | null)[];
}

export function sortSignature(keys: readonly SortKey[]): string {
  return keys.map((k) => (k.desc ? "-" : "") + k.column).join(",");
}

export interface CursorBinding {
  key: Buffer;
  /** Canonical text of the query the cursor belongs to. */
  scope: string;
}

const MAX_CURSOR_LENGTH = 4096;

export function v2CursorKey(secretKey: Buffer): Buffer {
  return createHmac("sha256", secretKey).update("netmon-jsonapi-cursor-v1").digest();
}

function cursorMac(b: CursorBinding, body: string): string {
  return createHmac("sha256", b.key).update(b.scope).update("\n").update(body).digest("base64url");
}

/** `base64url(payload) "." HMAC(scope, payload)`: opaque, unforgeable, bound to its query. */
export function encodeCursor(keys: readonly SortKey[], values: (string | null)[], b: CursorBinding): string {
  const body = Buffer.from(JSON.stringify({ s: sortSignature(keys), v: values } satisfies Cursor)).toString(
    "base64url",
  );
  return `${body}.${cursorMac(b, body)}`;
}

export function decodeCursor(
  keys: readonly SortKey[],
  cursor: string,
  parameter: string,
  b: CursorBinding,
): (string | null)[] {
  const bad = (why: string) =>
    new InvalidRequestError(`${parameter} ${why}`, { source: { parameter }, code: "invalid_cursor" });
  if (cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(cursor))
    throw bad("is not a valid cursor");
  const [body, sig] = cursor.split(".") as [string, string];
  const expected = Buffer.from(cursorMac(b, body));
  const given = Buffer.from(sig);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw bad("is not a cursor issued for this query (tampered, or from another query)");
  }
  let c: Cursor;
  try {
    c = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as Cursor;
  } catch {
    throw bad("is not a valid cursor");
  }
  if (!c || typeof c !== "object" || !Array.isArray(c.v) || c.v.length !== keys.length)
    throw bad("is not a valid cursor");
  if (c.s !== sortSignature(keys)) throw bad("was issued for a different sort");
  for (const x of c.v) if (x !== null && typeof x !== "string") throw bad("is not a valid cursor");
  return c.v;
}

/**
 * Keyset condition: rows strictly after (`forward`) or before the cursor position in the
 * order given by `keys` (null is the largest value: ASC NULLS LAST / DESC NULLS FIRST).
 */
export function keysetCondition(
  keys: readonly SortKey[],
  values: (string | null)[],
  alias: string,
  forward: boolean,
): SqlFragment {
  const build = (i: number): SqlFragment => {
    const k = keys[i] as SortKey;
    const v = values[i] ?? null;
    const col = ident(alias, k.column);
    const asc = forward ? !k.desc : k.desc; // moving "up" in value order?
    const pv = v === null ? null : sql`CAST(${v} AS ${raw(pgTypeOf(k.attr.type))})`;
    const last = i === keys.length - 1;
    const rest = last ? null : build(i + 1);
    // Null sorts as the largest value in both directions (PostgreSQL's default placement).
    let strictly: SqlFragment;
    let equal: SqlFragment;
    if (v === null) {
      strictly = asc ? raw("FALSE") : sql`${col} IS NOT NULL`;
      equal = sql`${col} IS NULL`;
    } else {
      strictly = asc ? sql`(${col} > ${pv} OR ${col} IS NULL)` : sql`${col} < ${pv}`;
      equal = sql`${col} = ${pv}`;
    }
    if (!rest) return strictly;
    return sql`(${strictly} OR (${equal} AND ${rest}))`;
  };
  const cond = build(0);
  // A redundant bound on the leading key lets an index range scan start at the cursor.
  const k0 = keys[0] as SortKey;
  const v0 = values[0] ?? null;
  if (v0 === null) return cond;
  const up = forward ? !k0.desc : k0.desc;
  const col0 = ident(alias, k0.column);
  const p0 = sql`CAST(${v0} AS ${raw(pgTypeOf(k0.attr.type))})`;
  if (!up) return sql`(${col0} <= ${p0} AND ${cond})`;
  if (k0.attr.nullable === false) return sql`(${col0} >= ${p0} AND ${cond})`;
  return cond;
}

export type IncludeTree = Map<string, IncludeTree>;

/** Parse `include=a,a.b`, validating every segment against the relationships. */
export function parseInclude(res: ResourceDecl, value: DeepValue | undefined): IncludeTree {
  const tree: IncludeTree = new Map();
  if (value === undefined) return tree;
  if (typeof value !== "string")
    throw invalid("include must be a comma-separated list of relationship paths", "include");
  if (value === "") return tree;
  for (const path of value.split(",")) {
    let node = tree;
    let type: ResourceDecl | undefined = res;
    const segs = path.trim().split(".");
    if (segs.length > 3) throw invalid(`include path '${path}' is too deep (max 3)`, "include");
    for (const seg of segs) {
      const rel = type?.relationships?.[seg];
      if (!rel || !type)
        throw invalid(`'${path}' is not a relationship path of '${res.type}'`, "include", "invalid_include");
      type = getResource(rel.type);
      if (!type)
        throw invalid(`'${path}' is not a relationship path of '${res.type}'`, "include", "invalid_include");
      let child = node.get(seg);
      if (!child) {
        child = new Map();
        node.set(seg, child);
      }
      node = child;
    }
  }
  return tree;
}

/** Parse `fields[type]=a,b` → type → set of attribute/relationship names. */
export function parseFields(value: DeepValue | undefined): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  if (value === undefined) return out;
  if (typeof value !== "object" || Array.isArray(value))
    throw invalid("fields must be given as fields[type]=a,b", "fields");
  for (const [type, list] of Object.entries(value)) {
    const p = `fields[${type}]`;
    const res = getResource(type);
    if (!res) throw invalid(`${p}: unknown type '${type}'`, p, "invalid_fields");
    if (typeof list !== "string") throw invalid(`${p} must be a comma-separated list`, p, "invalid_fields");
    const set = new Set<string>();
    for (const f of list.split(",")) {
      const name = f.trim();
      if (name === "") continue;
      const a = res.attributes[name];
      if (!(a && a.public !== false) && !res.relationships?.[name]) {
        throw invalid(`${p}: '${name}' is not a field of '${type}'`, p, "invalid_fields");
      }
      set.add(name);
    }
    out.set(type, set);
  }
  return out;
}
