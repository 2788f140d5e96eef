/**
 * Writes: create, update, delete and named operations (state transitions and custom
 * handlers), each in one transaction with the resource hooks.
 */
import { randomUUID } from "node:crypto";
import type { Actor } from "../../access/actor.ts";
import type { AppContext } from "../../kernel/context.ts";
import { ConflictError, InvalidRequestError, NotFoundError } from "../../kernel/errors.ts";
import type { Queryable, Row } from "../../storage/db.ts";
import { asDomainError } from "../../storage/db-error.ts";
import { ident, join, raw, type SqlFragment, sql } from "../../storage/sql.ts";
import {
  type ArgumentDecl,
  type AttributeDecl,
  columnOf,
  type HandlerResult,
  type HookEvent,
  type OperationContext,
  type OperationDecl,
  type PathParams,
  type RecordView,
  type ResourceDecl,
} from "../define.ts";
import { checkTransition } from "../state-machine.ts";
import { tableRef } from "./query.ts";
import { idCondition, loadRow, serializeWithIncludes } from "./read.ts";
import { document, idOf, recordView } from "./serialize.ts";
import { isJsonType, toDbValue } from "./values.ts";

export interface JsonApiBody {
  data?: {
    type?: string;
    id?: string;
    attributes?: Record<string, unknown>;
    relationships?: Record<string, { data: { type: string; id: string } | null }>;
    [k: string]: unknown;
  };
}

export type WriteOutcome = { status: number; body: unknown };

const IDENT = /^[a-z_][a-z0-9_]*$/;

const ITEM_PG: Record<string, string> = {
  string: "text",
  integer: "bigint",
  float: "float8",
  uuid: "uuid",
  boolean: "boolean",
  object: "jsonb",
};

function assignments(
  res: ResourceDecl,
  values: Record<string, unknown>,
): { col: SqlFragment; val: SqlFragment }[] {
  const out: { col: SqlFragment; val: SqlFragment }[] = [];
  const seen = new Set<string>();
  for (const [name, v] of Object.entries(values)) {
    if (v === undefined) continue;
    const a = res.attributes[name];
    const column = a ? columnOf(name, a) : name;
    if (!IDENT.test(column)) throw new Error(`jsonapi: bad column ${column}`);
    if (a?.computed || a?.stored === false) continue;
    if (seen.has(column)) continue;
    seen.add(column);
    let val: SqlFragment;
    if (a?.type === "array" && a.storage === "array") {
      val = v === null ? sql`NULL` : sql`CAST(${v} AS ${raw(`${ITEM_PG[a.items ?? "string"]}[]`)})`;
    } else if (a && isJsonType(a.type)) val = sql`CAST(${toDbValue(v, a.type)} AS jsonb)`;
    else val = sql`${v instanceof Date ? v.toISOString() : v}`;
    out.push({ col: ident(column), val });
  }
  return out;
}

const mapDbError = (err: unknown): unknown => asDomainError(err);

function checkType(res: ResourceDecl, body: JsonApiBody, style: "attributes" | "data"): void {
  if (style === "data") return;
  const t = body.data?.type;
  if (t !== undefined && t !== res.type) {
    throw new ConflictError(`data.type '${t}' does not match the endpoint type '${res.type}'`, {
      source: { pointer: "/data/type" },
      code: "type_mismatch",
    });
  }
}

function checkId(res: ResourceDecl, body: JsonApiBody, id: string): void {
  const bid = body.data?.id;
  if (bid !== undefined && bid !== id) {
    throw new ConflictError(`data.id '${bid}' does not match the URL id '${id}'`, {
      source: { pointer: "/data/id" },
      code: "id_mismatch",
    });
  }
  void res;
}

/** Relationship linkage in a body → column values (writable belongsTo only). */
function relationshipValues(res: ResourceDecl, body: JsonApiBody): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, linkage] of Object.entries(body.data?.relationships ?? {})) {
    const rel = res.relationships?.[name];
    if (rel?.kind !== "belongsTo" || !rel.writable) continue;
    out[rel.column as string] = linkage.data?.id ?? null;
  }
  return out;
}

async function respond(
  app: AppContext,
  tx: Queryable,
  res: ResourceDecl,
  id: string,
  actor: Actor,
  baseUrl: string,
): Promise<unknown> {
  const row = await loadRow(tx, res, id, actor, app.now());
  if (!row) throw new NotFoundError(`${res.type} '${id}' not found`);
  const { data } = await serializeWithIncludes(tx, res, [row], new Map(), new Map(), {
    baseUrl,
    actor,
    now: app.now(),
  });
  return document(data[0], { links: { self: `${baseUrl}${res.base}/${encodeURIComponent(id)}` } });
}

async function afterCommit(app: AppContext, res: ResourceDecl, actor: Actor, ev: HookEvent): Promise<void> {
  if (!res.hooks?.afterCommit) return;
  try {
    await res.hooks.afterCommit(app, actor, ev);
  } catch (err) {
    app.log.error({ err, type: res.type }, "jsonapi afterCommit hook failed");
  }
}

function resultId(r: HandlerResult, fallback: string | null): string | null {
  if (r && typeof r === "object" && "id" in r) return r.id;
  return fallback;
}

function isRaw(r: HandlerResult): r is { raw: unknown; status?: number } {
  return !!r && typeof r === "object" && "raw" in r;
}

/** Run in one transaction, or (`transaction: false`) directly on the database. */
function runIn<T>(
  app: AppContext,
  useTx: boolean,
  fn: (tx: Queryable, inTx: boolean) => Promise<T>,
): Promise<T> {
  if (!useTx) return fn(app.db, false);
  return app.db.transaction((tx) => fn(tx, true));
}

export interface WriteRequest {
  app: AppContext;
  res: ResourceDecl;
  actor: Actor;
  body: JsonApiBody;
  params: PathParams;
  baseUrl: string;
}

function clientIdOf(
  res: ResourceDecl,
  body: JsonApiBody,
  input: Record<string, unknown>,
): string | undefined {
  const gen = res.id.generate ?? "db";
  const id = gen === "client" ? body.data?.id : typeof gen === "object" ? input[gen.attribute] : undefined;
  return typeof id === "string" && id !== "" ? id : undefined;
}

/** The record a create would collide with (client-chosen ids only), locked for the transaction. */
async function existingRecord(c: OperationContext, actor: Actor, inTx: boolean): Promise<RecordView | null> {
  if (c.clientId === undefined) return null;
  const row = await loadRow(c.tx, c.resource, c.clientId, actor, c.now, inTx);
  return row ? recordView(c.resource, row) : null;
}

export async function runCreate(w: WriteRequest): Promise<WriteOutcome> {
  const { app, res, actor, body } = w;
  const action = res.actions?.create;
  if (!action) throw new NotFoundError();
  checkType(res, body, "attributes");
  const input: Record<string, unknown> = { ...(body.data?.attributes ?? {}) };
  const now = app.now();
  let raw: { raw: unknown; status?: number } | null = null;
  let event: HookEvent | null = null;
  let status = action.status ?? 201;
  const out = await runIn(app, action.transaction !== false, async (tx, inTx) => {
    const c: OperationContext = {
      app,
      tx,
      now,
      resource: res,
      params: w.params,
      clientId: clientIdOf(res, body, input),
    };
    await res.hooks?.beforeCreate?.(c, actor, input);
    let id: string | null = null;
    const existing = action.onExisting ? await existingRecord(c, actor, inTx) : null;
    if (existing && action.onExisting) {
      const r = await action.onExisting(c, actor, existing, input);
      if (r !== null) {
        if (isRaw(r)) {
          raw = r;
          return null;
        }
        id = resultId(r, existing.id);
        status = (r && typeof r === "object" && r.status) || 200;
      }
    }
    if (id !== null) {
      // Answered by onExisting: no INSERT.
    } else if (action.handler) {
      const r = await action.handler(c, actor, null, input);
      if (isRaw(r)) {
        raw = r;
        return null;
      }
      id = resultId(r, null);
      if (!id) throw new Error(`jsonapi: create handler of ${res.type} returned no id`);
    } else {
      const values: Record<string, unknown> = {};
      for (const [name, a] of Object.entries(res.attributes)) {
        if (a.computed || a.stored === false) continue;
        if (input[name] !== undefined && (a.create || a.required)) values[name] = input[name];
        else if (a.default !== undefined)
          values[name] =
            typeof a.default === "object" && a.default !== null ? structuredClone(a.default) : a.default;
      }
      Object.assign(values, relationshipValues(res, body));
      Object.assign(values, action.set?.(input, c, actor) ?? {});
      if (res.touchColumn) values[res.touchColumn] = now;
      const gen = res.id.generate ?? "db";
      const idCol = typeof res.id.column === "string" ? res.id.column : null;
      if (idCol) {
        if (gen === "uuid") values[idCol] = randomUUID();
        else if (gen === "client") {
          if (!body.data?.id)
            throw new InvalidRequestError("data.id is required", { source: { pointer: "/data/id" } });
          values[idCol] = body.data.id;
        } else if (typeof gen === "object") {
          values[idCol] = input[gen.attribute];
        }
      }
      const asg = assignments(res, values);
      const idCols = typeof res.id.column === "string" ? [res.id.column] : res.id.column;
      const row = await tx.one(
        sql`INSERT INTO ${tableRef(res.table)} (${join(asg.map((a) => a.col))}) VALUES (${join(asg.map((a) => a.val))}) RETURNING ${join(idCols.map((c2) => ident(c2)))}`,
      );
      id = idOf(res, row as Row);
    }
    const after = await loadRow(tx, res, id as string, actor, now);
    event = {
      action: "create",
      operation: "create",
      record: after ? recordView(res, after) : null,
      before: null,
    };
    await res.hooks?.afterWrite?.(c, actor, event);
    return respond(app, tx, res, id as string, actor, w.baseUrl);
  }).catch((err) => {
    throw mapDbError(err);
  });
  if (event) await afterCommit(app, res, actor, event);
  if (raw) return { status: (raw as { status?: number }).status ?? 200, body: (raw as { raw: unknown }).raw };
  return { status, body: out };
}

export async function runUpdate(w: WriteRequest, id: string): Promise<WriteOutcome> {
  const { app, res, actor, body } = w;
  const action = res.actions?.update;
  if (!action) throw new NotFoundError();
  checkType(res, body, "attributes");
  checkId(res, body, id);
  const input: Record<string, unknown> = { ...(body.data?.attributes ?? {}) };
  const now = app.now();
  let event: HookEvent | null = null;
  const out = await runIn(app, action.transaction !== false, async (tx, inTx) => {
    const c: OperationContext = { app, tx, now, resource: res, params: w.params };
    const row = await loadRow(tx, res, id, actor, now, inTx);
    if (!row) throw new NotFoundError(`${res.type} '${id}' not found`);
    const before = recordView(res, row);
    if (action.handler) {
      await action.handler(c, actor, before, input);
    } else {
      await res.hooks?.beforeUpdate?.(c, actor, before, input);
      const values: Record<string, unknown> = {};
      for (const [name, a] of Object.entries(res.attributes)) {
        if (a.update && input[name] !== undefined) values[name] = input[name];
      }
      Object.assign(values, relationshipValues(res, body));
      Object.assign(values, action.set?.(input, c, actor) ?? {});
      await applyUpdate(tx, res, id, values, now);
    }
    const after = await loadRow(tx, res, id, actor, now);
    event = { action: "update", operation: "update", record: after ? recordView(res, after) : null, before };
    await res.hooks?.afterWrite?.(c, actor, event);
    return respond(app, tx, res, id, actor, w.baseUrl);
  }).catch((err) => {
    throw mapDbError(err);
  });
  if (event) await afterCommit(app, res, actor, event);
  return { status: 200, body: out };
}

async function applyUpdate(
  tx: Queryable,
  res: ResourceDecl,
  id: string,
  values: Record<string, unknown>,
  now: Date,
  guard?: SqlFragment,
): Promise<void> {
  if (res.touchColumn) values[res.touchColumn] = now;
  const asg = assignments(res, values);
  if (asg.length === 0) return;
  const r = await tx.query(
    sql`UPDATE ${tableRef(res.table)} AS ${ident("r")} SET ${join(asg.map((a) => sql`${a.col} = ${a.val}`))} WHERE ${idCondition(res, id)}${guard ? sql` AND ${guard}` : raw("")}`,
  );
  if (r.rowCount === 0) throw new ConflictError(`${res.type} '${id}' changed concurrently; retry`);
}

export async function runDelete(w: WriteRequest, id: string): Promise<WriteOutcome> {
  const { app, res, actor } = w;
  const action = res.actions?.delete;
  if (!action) throw new NotFoundError();
  const now = app.now();
  let event: HookEvent | null = null;
  await runIn(app, action.transaction !== false, async (tx, inTx) => {
    const c: OperationContext = { app, tx, now, resource: res, params: w.params };
    const row = await loadRow(tx, res, id, actor, now, inTx);
    if (!row) throw new NotFoundError(`${res.type} '${id}' not found`);
    const before = recordView(res, row);
    if (action.handler) await action.handler(c, actor, before, {});
    else
      await tx.query(sql`DELETE FROM ${tableRef(res.table)} AS ${ident("r")} WHERE ${idCondition(res, id)}`);
    event = { action: "delete", operation: "delete", record: null, before };
    await res.hooks?.afterWrite?.(c, actor, event);
  }).catch((err) => {
    throw mapDbError(err);
  });
  if (event) await afterCommit(app, res, actor, event);
  return { status: 204, body: null };
}

export function operationInput(op: OperationDecl, body: JsonApiBody): Record<string, unknown> {
  if (op.bodyStyle === "data") return { ...((body.data as Record<string, unknown> | undefined) ?? {}) };
  return { ...(body.data?.attributes ?? {}) };
}

/** What one run of a declared operation produced. */
export interface OperationRun {
  /** The record after the operation (null for collection operations without a record). */
  record: RecordView | null;
  /** A handler's own response body (`{ raw }`), answered as is by the HTTP adapter. */
  raw: { raw: unknown; status?: number } | null;
  /** The JSON:API document of the record, when `baseUrl` was given (the HTTP adapter). */
  document: unknown;
}

/**
 * The one implementation of a declared operation, whoever calls it (the v2 route, the action
 * runner for jobs, CLI, MCP and domain code): load and lock the record, check the state
 * machine's transition, apply `set` and the handler, run `afterWrite` in the transaction and
 * `afterCommit` after it. Policy is the caller's: the v2 route enforces it before parsing the
 * body, `runAction` before calling this.
 */
export async function executeOperation(
  app: AppContext,
  res: ResourceDecl,
  op: OperationDecl,
  actor: Actor,
  id: string | null,
  input: Record<string, unknown>,
  opts: { params?: PathParams; baseUrl?: string } = {},
): Promise<OperationRun> {
  const now = app.now();
  const params = opts.params ?? (id !== null ? { id } : {});
  let event: HookEvent | null = null;
  let rawOut: { raw: unknown; status?: number } | null = null;
  const out = await runIn(app, op.transaction !== false, async (tx, inTx) => {
    const c: OperationContext = { app, tx, now, resource: res, params };
    let before: RecordView | null = null;
    if (id !== null) {
      const row = await loadRow(tx, res, id, actor, now, inTx);
      if (!row) throw new NotFoundError(`${res.type} '${id}' not found`);
      before = recordView(res, row);
    }
    if (op.transition || op.set) {
      if (!before || id === null)
        throw new Error(`jsonapi: ${res.type}.${op.name}: transitions need a member target`);
      const values: Record<string, unknown> = {};
      let guard: SqlFragment | undefined;
      if (op.transition && res.stateMachine) {
        const m = res.stateMachine;
        const current = String(before[m.attribute] ?? "");
        const to = checkTransition(m, op.transition, current, op.name);
        const stateAttr = res.attributes[m.attribute] as AttributeDecl | undefined;
        const stateCol = stateAttr ? columnOf(m.attribute, stateAttr) : m.attribute;
        if (to !== current) values[m.attribute] = to;
        guard = sql`${ident("r", stateCol)} = ${current}`;
      }
      Object.assign(values, op.set?.(input, c, actor, before) ?? {});
      await applyUpdate(tx, res, id, values, now, guard);
    }
    let resId = id;
    if (op.handler) {
      const r = await op.handler(c, actor, before, input);
      if (isRaw(r)) rawOut = r;
      resId = resultId(r, id);
    }
    const afterRow = resId ? await loadRow(tx, res, resId, actor, now) : undefined;
    event = {
      action: "operation",
      operation: op.name,
      record: afterRow ? recordView(res, afterRow) : null,
      before,
    };
    await res.hooks?.afterWrite?.(c, actor, event);
    if (rawOut) return { record: event.record, document: null };
    if (!resId) throw new Error(`jsonapi: ${res.type}.${op.name} produced no record`);
    const doc = opts.baseUrl === undefined ? null : await respond(app, tx, res, resId, actor, opts.baseUrl);
    return { record: event.record, document: doc };
  }).catch((err) => {
    throw mapDbError(err);
  });
  if (event) await afterCommit(app, res, actor, event);
  return { ...out, raw: rawOut };
}

/** The v2 route's adapter: the JSON:API body in, the JSON:API document out. */
export async function runOperation(
  w: WriteRequest,
  op: OperationDecl,
  id: string | null,
): Promise<WriteOutcome> {
  const { app, res, actor, body } = w;
  checkType(res, body, op.bodyStyle ?? "attributes");
  if (id !== null && op.bodyStyle !== "data") checkId(res, body, id);
  const run = await executeOperation(app, res, op, actor, id, operationInput(op, body), {
    params: w.params,
    baseUrl: w.baseUrl,
  });
  if (run.raw) return { status: run.raw.status ?? op.status ?? 200, body: run.raw.raw };
  return { status: op.status ?? 200, body: run.document };
}

/** Arguments accepted by create (writable attributes + extra arguments). */
export function createAttributes(res: ResourceDecl): {
  attrs: Record<string, ArgumentDecl | AttributeDecl>;
  required: string[];
} {
  const attrs: Record<string, ArgumentDecl | AttributeDecl> = {};
  const required: string[] = [];
  for (const [n, a] of Object.entries(res.attributes)) {
    if (a.create || a.required) attrs[n] = a;
    if (a.required) required.push(n);
  }
  for (const [n, a] of Object.entries(res.actions?.create?.arguments ?? {})) {
    attrs[n] = a;
    if (a.required) required.push(n);
  }
  return { attrs, required };
}

export function updateAttributes(res: ResourceDecl): Record<string, ArgumentDecl | AttributeDecl> {
  const attrs: Record<string, ArgumentDecl | AttributeDecl> = {};
  for (const [n, a] of Object.entries(res.attributes)) if (a.update) attrs[n] = a;
  for (const [n, a] of Object.entries(res.actions?.update?.arguments ?? {})) attrs[n] = a;
  return attrs;
}
