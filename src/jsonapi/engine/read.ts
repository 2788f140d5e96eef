/**
 * Reads: index lists, special collections, detail reads and `include` loading.
 */
import type { Actor } from "../../access/actor.ts";
import { ForbiddenError, InvalidRequestError, NotFoundError } from "../../kernel/errors.ts";
import { isUuid } from "../../kernel/ids.ts";
import type { Queryable, Row } from "../../storage/db.ts";
import { ident, join, raw, type SqlFragment, sql } from "../../storage/sql.ts";
import type { CollectionDecl, PathParams, QueryHelpers, QueryParamDecl, ResourceDecl } from "../define.ts";
import { getResource } from "../registry.ts";
import { satisfies } from "./access.ts";
import {
  type CursorBinding,
  compileFilter,
  type DeepObject,
  type DeepValue,
  decodeCursor,
  encodeCursor,
  type IncludeTree,
  keysetCondition,
  orderBy,
  type PageRequest,
  parseFields,
  parseInclude,
  parsePage,
  parseSort,
  resolvedPagination,
  type SortKey,
  tableRef,
} from "./query.ts";
import { document, idOf, type Linkage, type ResourceObject, toResourceObject } from "./serialize.ts";
import { pgTypeOf } from "./values.ts";

const A = "r";

export interface ReadRequest {
  res: ResourceDecl;
  query: DeepObject;
  /** Raw query string (without "?") for links. */
  search: string;
  /** Path (under /api/v2) the request was made to, for links. */
  path: string;
  /** Absolute prefix, e.g. "http://host/api/v2". */
  baseUrl: string;
  params: PathParams;
  actor: Actor | null;
  now: Date;
  /** false → the read policy hides everything from this caller (empty list / 404). */
  visible: boolean;
  /** HMAC key that signs keyset cursors (derived from the instance secret). */
  cursorKey?: Buffer;
}

function helpers(actor: Actor | null, now: Date): QueryHelpers {
  return { col: (c: string) => ident(A, c), actor, now };
}

function checkKeys(query: DeepObject, allowed: readonly string[]): void {
  for (const k of Object.keys(query)) {
    if (!allowed.includes(k)) {
      throw new InvalidRequestError(`unknown query parameter '${k}' (allowed: ${allowed.join(", ")})`, {
        source: { parameter: k },
        code: "invalid_parameter",
      });
    }
  }
}

export function parseExtraParam(name: string, d: QueryParamDecl, v: DeepValue | undefined): unknown {
  if (v === undefined) {
    if (d.required)
      throw new InvalidRequestError(`query parameter '${name}' is required`, { source: { parameter: name } });
    return undefined;
  }
  if (typeof v !== "string")
    throw new InvalidRequestError(`${name} must be a single value`, { source: { parameter: name } });
  switch (d.type) {
    case "boolean":
      if (v !== "true" && v !== "false")
        throw new InvalidRequestError(`${name} must be true or false`, { source: { parameter: name } });
      return v === "true";
    case "integer":
      if (!/^-?\d{1,15}$/.test(v))
        throw new InvalidRequestError(`${name} must be an integer`, { source: { parameter: name } });
      return Number(v);
    case "uuid":
      if (!isUuid(v))
        throw new InvalidRequestError(`${name} must be a uuid`, { source: { parameter: name } });
      return v;
    default:
      return v;
  }
}

function extraConds(
  decls: Record<string, QueryParamDecl> | undefined,
  query: DeepObject,
  h: QueryHelpers,
): SqlFragment[] {
  const out: SqlFragment[] = [];
  for (const [name, d] of Object.entries(decls ?? {})) {
    const v = parseExtraParam(name, d, query[name]);
    const c = d.where?.(v, h);
    if (c) out.push(c);
  }
  return out;
}

function selectCols(keys: readonly SortKey[] | null): SqlFragment {
  if (!keys) return sql`${ident(A)}.*`;
  return sql`${ident(A)}.*, ${join(keys.map((k, i) => sql`CAST(${ident(A, k.column)} AS text) AS ${ident(`_k${i}`)}`))}`;
}

function whereClause(conds: SqlFragment[]): SqlFragment {
  return conds.length === 0 ? raw("") : sql` WHERE ${join(conds, " AND ")}`;
}

function linkFor(path: string, search: string, page: Record<string, string> | null): string {
  const params = new URLSearchParams(search);
  if (page) {
    for (const k of [...params.keys()]) if (k.startsWith("page[")) params.delete(k);
    for (const [k, v] of Object.entries(page)) params.append(`page[${k}]`, v);
  }
  const q = params.toString().replace(/%5B/g, "[").replace(/%5D/g, "]");
  return q ? `${path}?${q}` : path;
}

/**
 * What a cursor is bound to: the signing key and the query it came from (path, filters and
 * parameters other than `page`), so a cursor cannot be edited nor replayed on another query.
 */
function cursorBinding(req: ReadRequest): CursorBinding {
  const params = new URLSearchParams(req.search);
  const kept = [...params.entries()].filter(([k]) => !k.startsWith("page[") && k !== "page").sort();
  return { key: req.cursorKey ?? Buffer.alloc(32), scope: `${req.path}?${JSON.stringify(kept)}` };
}

/** GET /base and special collections. */
export async function runList(
  db: Queryable,
  req: ReadRequest,
  collection?: CollectionDecl,
): Promise<Record<string, unknown>> {
  const { res, query } = req;
  const pagination =
    collection?.paginate === false || collection?.single
      ? null
      : resolvedPagination(collection?.paginate || res.pagination, res.readOnly === true);
  const allowed = ["filter", "sort", "include", "fields", ...Object.keys(res.listParams ?? {})];
  if (pagination) allowed.push("page");
  checkKeys(query, allowed);
  const h = helpers(req.actor, req.now);
  const keys = parseSort(res, query.sort, collection?.defaultSort);
  const page = parsePage(query.page, pagination, collection?.single ? 1 : (collection?.maxRows ?? 1000));
  const tree = parseInclude(res, query.include);
  const fields = parseFields(query.fields);
  const conds: SqlFragment[] = [];
  const scope = res.scope?.(h);
  if (scope) conds.push(scope);
  if (collection?.where) conds.push(collection.where({ ...h, params: req.params }));
  conds.push(...extraConds(res.listParams, query, h));
  if (query.filter !== undefined) conds.push(compileFilter(res, query.filter, "filter", A));

  const selfLink = `${req.baseUrl}${linkFor(req.path, req.search, null)}`;
  if (!req.visible && collection?.single) throw new NotFoundError(`${res.type} not found`);
  if (!req.visible) {
    return document([], { links: { self: selfLink }, meta: { page: { limit: page.limit } } });
  }

  let rows: Row[];
  let hasMore = false;
  const links: Record<string, string | null> = { self: selfLink };
  const meta: Record<string, unknown> = {};
  const tbl = tableRef(res.table);
  if (page.style === "keyset") {
    const binding = cursorBinding(req);
    const forward = page.before === undefined;
    const cursor = page.after ?? page.before;
    const kc = [...conds];
    if (cursor !== undefined) {
      const values = decodeCursor(keys, cursor, forward ? "page[after]" : "page[before]", binding);
      kc.push(keysetCondition(keys, values, A, forward));
    }
    rows = await db.many(
      sql`SELECT ${selectCols(keys)} FROM ${tbl} AS ${ident(A)}${whereClause(kc)} ORDER BY ${orderBy(keys, A, !forward)} LIMIT ${page.limit + 1}`,
    );
    hasMore = rows.length > page.limit;
    if (hasMore) rows = rows.slice(0, page.limit);
    if (!forward) rows.reverse();
    const cur = (row: Row | undefined) =>
      row
        ? encodeCursor(
            keys,
            keys.map((_, i) => (row[`_k${i}`] as string | null) ?? null),
            binding,
          )
        : null;
    const first = cur(rows[0]);
    const last = cur(rows[rows.length - 1]);
    const base = `${req.baseUrl}${req.path}`;
    links.first = `${req.baseUrl}${linkFor(req.path, req.search, { limit: String(page.limit) })}`;
    // Forward: a next page exists when more rows were found; a previous one when we came from a cursor.
    const hasNext = forward ? hasMore : cursor !== undefined;
    const hasPrev = forward ? cursor !== undefined : hasMore;
    links.next =
      hasNext && last
        ? `${req.baseUrl}${linkFor(req.path, req.search, { limit: String(page.limit), after: last })}`
        : null;
    links.prev =
      hasPrev && first
        ? `${req.baseUrl}${linkFor(req.path, req.search, { limit: String(page.limit), before: first })}`
        : null;
    void base;
    meta.page = {
      limit: page.limit,
      style: "keyset",
      max_limit: pagination?.maxLimit,
      first_cursor: first,
      last_cursor: last,
    };
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i] as Row;
      (row as Record<string, unknown>)._cursor = cur(row);
    }
  } else {
    const limitSql = page.style === "none" ? page.limit + 1 : page.limit + 1;
    rows = await db.many(
      sql`SELECT ${selectCols(null)} FROM ${tbl} AS ${ident(A)}${whereClause(conds)} ORDER BY ${orderBy(keys, A)} LIMIT ${limitSql} OFFSET ${page.offset}`,
    );
    hasMore = rows.length > page.limit;
    if (hasMore) rows = rows.slice(0, page.limit);
    if (page.style === "offset") {
      const mk = (offset: number) =>
        `${req.baseUrl}${linkFor(req.path, req.search, { limit: String(page.limit), offset: String(offset) })}`;
      links.first = mk(0);
      links.next = hasMore ? mk(page.offset + page.limit) : null;
      links.prev = page.offset > 0 ? mk(Math.max(0, page.offset - page.limit)) : null;
      meta.page = {
        limit: page.limit,
        offset: page.offset,
        style: "offset",
        max_limit: pagination?.maxLimit,
      };
    } else if (hasMore) {
      meta.truncated = true;
      meta.max_rows = page.limit;
    }
  }
  if (page.count) {
    const c = await db.one<{ n: number }>(
      sql`SELECT count(*)::int8 AS n FROM ${tbl} AS ${ident(A)}${whereClause(conds)}`,
    );
    (meta.page as Record<string, unknown>).total = Number(c?.n ?? 0);
  }
  const { data, included } = await serializeWithIncludes(db, res, rows, tree, fields, req);
  if (page.style === "keyset") {
    (data as (ResourceObject & { meta?: unknown })[]).forEach((o, i) => {
      o.meta = { cursor: (rows[i] as Record<string, unknown>)._cursor };
    });
  }
  if (collection?.single) {
    if (data.length === 0) throw new NotFoundError(`${res.type} not found`);
    const one: Record<string, unknown> = { links: { self: selfLink } };
    if (tree.size > 0) one.included = included;
    return document(data[0], one);
  }
  const extra: Record<string, unknown> = { links, meta };
  if (tree.size > 0) extra.included = included;
  return document(data, extra);
}

/** Where-condition selecting one row by its (possibly composite) opaque id. */
export function idCondition(res: ResourceDecl, id: string, alias = A): SqlFragment {
  if (typeof res.id.column !== "string") throw new NotFoundError(`${res.type} '${id}' not found`);
  if (res.id.type === "uuid" && !isUuid(id)) throw new NotFoundError(`${res.type} '${id}' not found`);
  if (res.id.type === "integer" && !/^-?\d{1,15}$/.test(id))
    throw new NotFoundError(`${res.type} '${id}' not found`);
  return sql`${ident(alias, res.id.column)} = CAST(${id} AS ${raw(pgTypeOf(res.id.type))})`;
}

/** Load one row (optionally FOR UPDATE), applying the resource scope. */
export async function loadRow(
  db: Queryable,
  res: ResourceDecl,
  id: string,
  actor: Actor | null,
  now: Date,
  forUpdate = false,
): Promise<Row | undefined> {
  const conds = [idCondition(res, id)];
  const scope = res.scope?.(helpers(actor, now));
  if (scope) conds.push(scope);
  return db.one(
    sql`SELECT ${ident(A)}.* FROM ${tableRef(res.table)} AS ${ident(A)}${whereClause(conds)}${raw(forUpdate ? " FOR UPDATE" : "")}`,
  );
}

/** GET /base/:id */
export async function runRead(db: Queryable, req: ReadRequest, id: string): Promise<Record<string, unknown>> {
  const { res, query } = req;
  checkKeys(query, [
    "include",
    "fields",
    ...Object.keys(res.readParams ?? {}),
    ...(res.readLookup ? [res.readLookup.query] : []),
  ]);
  const tree = parseInclude(res, query.include);
  const fields = parseFields(query.fields);
  const h = helpers(req.actor, req.now);
  const conds: SqlFragment[] = [];
  if (res.readLookup) {
    const v = parseExtraParam(
      res.readLookup.query,
      { type: "string", required: true },
      query[res.readLookup.query],
    );
    const attr = res.attributes[res.readLookup.attribute];
    const column = attr?.column ?? res.readLookup.attribute;
    conds.push(sql`${ident(A, column)} = ${v}`);
    if (typeof res.id.column === "string" && column !== res.id.column) conds.push(idCondition(res, id));
    else if (v !== id) throw new NotFoundError(`${res.type} '${id}' not found`);
  } else {
    conds.push(idCondition(res, id));
  }
  const scope = res.scope?.(h);
  if (scope) conds.push(scope);
  conds.push(...extraConds(res.readParams, query, h));
  if (!req.visible) throw new NotFoundError(`${res.type} '${id}' not found`);
  const row = await db.one(
    sql`SELECT ${ident(A)}.* FROM ${tableRef(res.table)} AS ${ident(A)}${whereClause(conds)}`,
  );
  if (!row) throw new NotFoundError(`${res.type} '${id}' not found`);
  const { data, included } = await serializeWithIncludes(db, res, [row], tree, fields, req);
  const extra: Record<string, unknown> = {
    links: { self: `${req.baseUrl}${linkFor(req.path, req.search, null)}` },
  };
  if (tree.size > 0) extra.included = included;
  return document((data as unknown[])[0], extra);
}

const INCLUDE_CAP = 10_000;

/** Serialise rows, loading `include` trees (deduplicated `included`, linkage on every object). */
export async function serializeWithIncludes(
  db: Queryable,
  res: ResourceDecl,
  rows: Row[],
  tree: IncludeTree,
  fields: Map<string, Set<string>>,
  req: Pick<ReadRequest, "baseUrl" | "actor" | "now">,
): Promise<{ data: ResourceObject[]; included: ResourceObject[] }> {
  const linkages = new Map<Row, Linkage>();
  const included = new Map<string, { res: ResourceDecl; row: Row }>();
  const primaryKeys = new Set(rows.map((r) => `${res.type}\u0000${idOf(res, r)}`));
  await loadLevel(db, res, rows, tree, linkages, included, req);
  const data = rows.map((r) => toResourceObject(res, r, req.baseUrl, fields, linkages.get(r)));
  const inc: ResourceObject[] = [];
  for (const [key, { res: t, row }] of included) {
    if (primaryKeys.has(key)) continue;
    inc.push(toResourceObject(t, row, req.baseUrl, fields, linkages.get(row)));
  }
  return { data, included: inc };
}

async function loadLevel(
  db: Queryable,
  res: ResourceDecl,
  rows: Row[],
  tree: IncludeTree,
  linkages: Map<Row, Linkage>,
  included: Map<string, { res: ResourceDecl; row: Row }>,
  req: Pick<ReadRequest, "actor" | "now">,
): Promise<void> {
  for (const [name, sub] of tree) {
    const rel = res.relationships?.[name];
    const target = rel ? getResource(rel.type) : undefined;
    if (!rel || !target) continue;
    if (!satisfies(target.policies.read.access, req.actor) && target.policies.read.whenDenied !== "hide") {
      throw new ForbiddenError(`not allowed to include '${name}' (${target.type})`, {
        source: { parameter: "include" },
      });
    }
    const visible = satisfies(target.policies.read.access, req.actor);
    const targetIdCol = typeof target.id.column === "string" ? target.id.column : null;
    const localCol =
      rel.kind === "belongsTo" ? (rel.column as string) : (rel.localColumn ?? (res.id.column as string));
    const remoteCol =
      rel.kind === "belongsTo" ? (rel.targetColumn ?? targetIdCol) : (rel.foreignColumn as string);
    if (!remoteCol) continue;
    const values = [
      ...new Set(
        rows
          .map((r) => r[localCol])
          .filter((v) => v !== null && v !== undefined)
          .map(String),
      ),
    ];
    let related: Row[] = [];
    if (values.length > 0 && visible) {
      const conds: SqlFragment[] = [
        sql`CAST(${ident(A, remoteCol)} AS text) IN (${join(values.map((v) => sql`${v}`))})`,
      ];
      const scope = target.scope?.(helpers(req.actor, req.now));
      if (scope) conds.push(scope);
      related = await db.many(
        sql`SELECT ${ident(A)}.* FROM ${tableRef(target.table)} AS ${ident(A)}${whereClause(conds)} LIMIT ${INCLUDE_CAP}`,
      );
    }
    const byKey = new Map<string, Row[]>();
    for (const r of related) {
      const k = String(r[remoteCol]);
      const list = byKey.get(k);
      if (list) list.push(r);
      else byKey.set(k, [r]);
      included.set(`${target.type}\u0000${idOf(target, r)}`, { res: target, row: r });
    }
    for (const r of rows) {
      let l = linkages.get(r);
      if (!l) {
        l = new Map();
        linkages.set(r, l);
      }
      const v = r[localCol];
      const matches = v === null || v === undefined ? [] : (byKey.get(String(v)) ?? []);
      l.set(name, rel.kind === "belongsTo" ? (matches[0] ?? null) : matches);
    }
    if (sub.size > 0 && related.length > 0)
      await loadLevel(db, target, related, sub, linkages, included, req);
  }
}

export type { PageRequest };
