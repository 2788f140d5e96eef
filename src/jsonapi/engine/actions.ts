/**
 * The action runner: the domain API every caller uses (issue 11). A resource's declared
 * operation — its policy, state-machine transition, changes, handler and hooks — runs through
 * `runAction` from jobs, the CLI, MCP and domain code exactly as its v2 route runs it, so
 * there is one implementation and one permission check per action.
 *
 *   runAction(ctx, actor, "alert", "acknowledge", { id, input: { note: "on it" } })
 *
 * Policy: the operation's declared access rule, decided by the one evaluator
 * (src/access/rule.ts). The system actor (scheduler, rule engines) passes every rule.
 */
import type { Actor } from "../../access/actor.ts";
import type { AppContext } from "../../kernel/context.ts";
import { AuthenticationRequiredError, NotFoundError } from "../../kernel/errors.ts";
import type { OperationDecl, RecordView, ResourceDecl } from "../define.ts";
import { getResource } from "../registry.ts";
import { enforce } from "./access.ts";
import { executeOperation, runCreate, runUpdate } from "./write.ts";

export interface ActionRequest {
  /** The record of a member operation (or a client-chosen id on create); omitted otherwise. */
  id?: string | null;
  /** The operation's arguments (what a v2 body carries in `data.attributes`). */
  input?: Record<string, unknown>;
}

export interface ActionResult {
  /** The id of the record the action created or changed. */
  id: string | null;
  /** The record after the action, as the caller may see it (operations). */
  record: RecordView | null;
  /** A handler's own result (`{ raw }` handlers), when it produced one. */
  raw: unknown;
}

/** A declared operation by resource type and name; throws for an undeclared one (a bug, not input). */
export function declaredOperation(type: string, name: string): { res: ResourceDecl; op: OperationDecl } {
  const res = getResource(type);
  if (!res) throw new Error(`runAction: no resource of type '${type}' is registered`);
  const op = res.operations?.find((o) => o.name === name);
  if (!op) throw new Error(`runAction: ${type} declares no operation '${name}'`);
  return { res, op };
}

export async function runAction(
  ctx: AppContext,
  actor: Actor | null,
  type: string,
  name: string,
  req: ActionRequest = {},
): Promise<ActionResult> {
  if (name === "create") return runCreateAction(ctx, actor, type, req.id ?? undefined, req.input ?? {});
  if (name === "update") return runUpdateAction(ctx, actor, type, req.id ?? null, req.input ?? {});
  const { res, op } = declaredOperation(type, name);
  const who = enforce(op.access, actor);
  if (!who) throw new AuthenticationRequiredError();
  const member = op.target !== "collection";
  const id = member ? (req.id ?? null) : null;
  if (member && !id) throw new NotFoundError(`${type} id is required for '${name}'`);
  const run = await executeOperation(ctx, res, op, who, id, { ...(req.input ?? {}) });
  return { id: run.record ? String(run.record.id) : null, record: run.record, raw: run.raw?.raw ?? null };
}

/** A resource's declared create or update and the actor its access rule admits (or a 401). */
function declaredWrite(
  type: string,
  name: "create" | "update",
  actor: Actor | null,
): { res: ResourceDecl; who: Actor } {
  const res = getResource(type);
  const action = res?.actions?.[name];
  if (!res || !action) throw new Error(`runAction: ${type} declares no ${name} action`);
  const who = enforce(action.access, actor);
  if (!who) throw new AuthenticationRequiredError();
  return { res, who };
}

/** The declared `create` action, through the same code as `POST /api/v2/<base>`. */
async function runCreateAction(
  ctx: AppContext,
  actor: Actor | null,
  type: string,
  id: string | undefined,
  input: Record<string, unknown>,
): Promise<ActionResult> {
  const { res, who } = declaredWrite(type, "create", actor);
  const out = await runCreate({
    app: ctx,
    res,
    actor: who,
    body: { data: { type: res.type, ...(id !== undefined ? { id } : {}), attributes: { ...input } } },
    params: {},
    baseUrl: "",
  });
  const data = (out.body as { data?: { id?: string } } | null)?.data;
  return { id: data?.id ?? null, record: null, raw: data ? null : out.body };
}

/** The declared `update` action, through the same code as `PATCH /api/v2/<base>/{id}`. */
async function runUpdateAction(
  ctx: AppContext,
  actor: Actor | null,
  type: string,
  id: string | null,
  input: Record<string, unknown>,
): Promise<ActionResult> {
  const { res, who } = declaredWrite(type, "update", actor);
  if (!id) throw new NotFoundError(`${type} id is required for 'update'`);
  await runUpdate(
    {
      app: ctx,
      res,
      actor: who,
      body: { data: { type: res.type, id, attributes: { ...input } } },
      params: {},
      baseUrl: "",
    },
    id,
  );
  return { id, record: null, raw: null };
}
