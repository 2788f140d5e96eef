/**
 * MCP tools read and act through the same JSON:API engine the v2 routes use: the resource's
 * declared read policy, filters, cursors and operations (with their permission, state
 * machine and hooks). Resources are looked up by type in the public registry at call time,
 * so this module depends on no domain's internals.
 */
import type { Actor } from "../access/actor.ts";
import type { ResourceDecl } from "../jsonapi/define.ts";
import { enforce, satisfies } from "../jsonapi/engine/access.ts";
import type { DeepObject } from "../jsonapi/engine/query.ts";
import { v2CursorKey } from "../jsonapi/engine/query.ts";
import { runList, runRead } from "../jsonapi/engine/read.ts";
import { type JsonApiBody, runOperation } from "../jsonapi/engine/write.ts";
import { getResource } from "../jsonapi/registry.ts";
import type { AppContext } from "../kernel/context.ts";

function resourceOf(type: string): ResourceDecl {
  const res = getResource(type);
  if (!res) throw new Error(`mcp: resource type '${type}' is not registered`);
  return res;
}

function request(ctx: AppContext, actor: Actor, res: ResourceDecl, query: DeepObject, path: string) {
  const rule = res.policies.read.access;
  enforce(rule, actor);
  return {
    res,
    query,
    search: "",
    path,
    baseUrl: `${ctx.config.baseUrl}/api/v2`,
    params: {},
    actor,
    now: ctx.now(),
    visible: satisfies(rule, actor),
    cursorKey: v2CursorKey(ctx.secretKey),
  };
}

/** A v2 list (filters, sort, page) run as `actor`: the document a GET would answer. */
export function listResource(
  ctx: AppContext,
  actor: Actor,
  type: string,
  query: DeepObject,
): Promise<Record<string, unknown>> {
  const res = resourceOf(type);
  return runList(ctx.db, request(ctx, actor, res, query, res.base));
}

/** One v2 record as `actor` (404 when absent or hidden). */
export function readResource(
  ctx: AppContext,
  actor: Actor,
  type: string,
  id: string,
): Promise<Record<string, unknown>> {
  const res = resourceOf(type);
  return runRead(ctx.db, request(ctx, actor, res, {}, `${res.base}/${id}`), id);
}

/** Run a declared member operation (e.g. alert `acknowledge`) exactly as its v2 route does. */
export async function runMemberOperation(
  ctx: AppContext,
  actor: Actor,
  type: string,
  operation: string,
  id: string,
  attributes: Record<string, unknown>,
): Promise<unknown> {
  const res = resourceOf(type);
  const op = res.operations?.find((o) => o.name === operation && o.target !== "collection");
  if (!op) throw new Error(`mcp: ${type} has no member operation '${operation}'`);
  enforce(op.access, actor);
  const body: JsonApiBody = { data: { type: res.type, id, attributes } };
  const out = await runOperation(
    { app: ctx, res, actor, body, params: { id }, baseUrl: `${ctx.config.baseUrl}/api/v2` },
    op,
    id,
  );
  return out.body;
}
