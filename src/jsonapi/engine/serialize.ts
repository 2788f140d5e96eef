/**
 * Rows → JSON:API resource objects (spec 2.1), with relationship linkage and sparse fieldsets.
 */
import type { Row } from "../../storage/db.ts";
import { type AttributeDecl, columnOf, type RecordView, type ResourceDecl } from "../define.ts";
import { getResource } from "../registry.ts";
import { toJsonValue } from "./values.ts";

export const NIL_PART = "\u001f";

/** The opaque id of a row: one column as a string, or composite parts joined by "~". */
export function idOf(res: ResourceDecl, row: Row): string {
  if (typeof res.id.column === "string") return String(row[res.id.column]);
  return res.id.column
    .map((c) => {
      const v = row[c];
      if (v === null || v === undefined) return NIL_PART;
      const s = v instanceof Date ? v.toISOString() : String(v);
      return s.startsWith(NIL_PART) ? NIL_PART + s : s;
    })
    .join("~");
}

export interface ResourceObject {
  type: string;
  id: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, { data: unknown } | { meta: unknown }>;
  links?: { self: string };
}

/** One public attribute, resolved once per declaration: name, source column, how to render. */
interface AttributePlan {
  name: string;
  column: string;
  decl: AttributeDecl;
}

/**
 * The public attributes of a declaration in declaration order, computed on first use. The hot
 * path of every list (one call per row) then walks a plain array instead of building
 * `Object.entries(res.attributes)` and resolving each column again for every row.
 */
const plans = new WeakMap<ResourceDecl["attributes"], AttributePlan[]>();
function attributePlan(res: ResourceDecl): AttributePlan[] {
  let plan = plans.get(res.attributes);
  if (!plan) {
    plan = Object.entries(res.attributes)
      .filter(([, a]) => a.public !== false)
      .map(([name, a]) => ({ name, column: columnOf(name, a), decl: a }));
    plans.set(res.attributes, plan);
  }
  return plan;
}

/**
 * The attributes object of a row without a sparse fieldset, compiled once per declaration: one
 * object literal with the keys in declaration order. A list renders this once per row, and the
 * generic loop below (a dynamic key per attribute, a type switch per value) was most of the
 * JSON:API serialisation cost in the v2 read profile of issue 14. The generated code names only
 * declared attribute and column names (code, never request data), quoted with JSON.stringify.
 */
type CompiledAttributes = (row: Row) => Record<string, unknown>;
const compiled = new WeakMap<ResourceDecl["attributes"], CompiledAttributes | null>();

const fromDatetime = (v: unknown) =>
  v === null || v === undefined ? null : v instanceof Date ? v.toISOString() : String(v);
const fromNumber = (v: unknown) =>
  v === null || v === undefined ? null : typeof v === "number" ? v : Number(v);
const fromOther = (v: unknown) =>
  v === null || v === undefined ? null : v instanceof Date ? v.toISOString() : v;

function compileAttributes(res: ResourceDecl): CompiledAttributes | null {
  const plan = attributePlan(res);
  // An object literal's "__proto__" key sets the prototype instead of a property.
  if (plan.some((p) => p.name === "__proto__")) return null;
  const decls = plan.map((p) => p.decl);
  const members = plan.map(({ name, column, decl: a }, i) => {
    let expr: string;
    if (a.computed) expr = `(d[${i}].computed(row) ?? null)`;
    else if (a.stored === false) expr = "null";
    else {
      const conv =
        a.type === "datetime"
          ? "fromDatetime"
          : a.type === "float" || a.type === "integer"
            ? "fromNumber"
            : "fromOther";
      expr = `${conv}(row[${JSON.stringify(column)}])`;
      if (a.redact) expr = `d[${i}].redact(${expr})`;
    }
    return `${JSON.stringify(name)}: ${expr}`;
  });
  const body = `return function attributes(row) { return { ${members.join(", ")} }; };`;
  const make = new Function("d", "fromDatetime", "fromNumber", "fromOther", body) as (
    ...args: unknown[]
  ) => CompiledAttributes;
  return make(decls, fromDatetime, fromNumber, fromOther);
}

export function attributesOf(res: ResourceDecl, row: Row, fields?: Set<string>): Record<string, unknown> {
  if (!fields) {
    let fn = compiled.get(res.attributes);
    if (fn === undefined) {
      fn = compileAttributes(res);
      compiled.set(res.attributes, fn);
    }
    if (fn) return fn(row);
  }
  const out: Record<string, unknown> = {};
  for (const { name, column, decl: a } of attributePlan(res)) {
    if (fields && !fields.has(name)) continue;
    if (a.computed) out[name] = a.computed(row) ?? null;
    else if (a.stored === false) out[name] = null;
    else {
      const v = toJsonValue(row[column], a.type);
      out[name] = a.redact ? a.redact(v) : v;
    }
  }
  return out;
}

/** What a handler sees: attribute values by name + id + the raw row. */
export function recordView(res: ResourceDecl, row: Row): RecordView {
  const attrs: Record<string, unknown> = {};
  for (const [name, a] of Object.entries(res.attributes)) {
    if (a.computed) attrs[name] = a.computed(row);
    else if (a.stored !== false) attrs[name] = row[columnOf(name, a)] ?? null;
  }
  return { ...attrs, id: idOf(res, row), _row: row } as RecordView;
}

/** Loaded related rows for one primary row, by relationship name (set by the include loader). */
export type Linkage = Map<string, Row[] | Row | null>;

const relationshipLists = new WeakMap<
  ResourceDecl,
  [string, NonNullable<ResourceDecl["relationships"]>[string]][]
>();
/** The declaration's relationships as a list, built once instead of once per rendered row. */
function relationshipsOf(res: ResourceDecl) {
  let list = relationshipLists.get(res);
  if (!list) {
    list = Object.entries(res.relationships ?? {});
    relationshipLists.set(res, list);
  }
  return list;
}

export function toResourceObject(
  res: ResourceDecl,
  row: Row,
  baseUrl: string,
  fields: Map<string, Set<string>>,
  linkage?: Linkage,
): ResourceObject {
  const f = fields.get(res.type);
  const id = idOf(res, row);
  const obj: ResourceObject = { type: res.type, id, attributes: attributesOf(res, row, f) };
  const rels: Record<string, { data: unknown } | { meta: unknown }> = {};
  for (const [name, rel] of relationshipsOf(res)) {
    if (f && !f.has(name)) continue;
    const target = getResource(rel.type);
    if (!target) continue;
    const loaded = linkage?.get(name);
    if (loaded !== undefined) {
      if (Array.isArray(loaded))
        rels[name] = { data: loaded.map((r) => ({ type: target.type, id: idOf(target, r) })) };
      else rels[name] = { data: loaded ? { type: target.type, id: idOf(target, loaded) } : null };
      continue;
    }
    if (rel.kind === "belongsTo") {
      const targetIdCol = typeof target.id.column === "string" ? target.id.column : null;
      if (targetIdCol && (rel.targetColumn ?? targetIdCol) === targetIdCol) {
        const v = row[rel.column as string];
        rels[name] = { data: v === null || v === undefined ? null : { type: target.type, id: String(v) } };
        continue;
      }
    }
    rels[name] = { meta: { included: false } };
  }
  if (Object.keys(rels).length > 0) obj.relationships = rels;
  if (typeof res.id.column === "string" && !res.readOnly) {
    obj.links = { self: `${baseUrl}${res.base}/${encodeURIComponent(id)}` };
  }
  return obj;
}

export function document(data: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { data, ...extra, jsonapi: { version: "1.1" } };
}
