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

export function attributesOf(res: ResourceDecl, row: Row, fields?: Set<string>): Record<string, unknown> {
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
  for (const [name, rel] of Object.entries(res.relationships ?? {})) {
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
