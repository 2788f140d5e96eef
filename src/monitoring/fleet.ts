/**
 * Gateway and agent lifecycle as the monitoring processes drive it (register, connect,
 * heartbeat, degrade, drain, disconnect). The embedded gateway and agent act through the
 * declared `gateway`/`agent` actions (src/monitoring/infrastructure/resources.ts) with the same
 * control-plane identity a remote process's credential carries — so the in-process link runs
 * exactly the code `POST/PATCH /api/v2/gateways|agents…` runs for a remote one (issue 11).
 */
import type { Actor } from "../access/actor.ts";
import "./infrastructure/resources.ts";
import { runAction } from "../jsonapi/engine/actions.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";
import type { AgentRegistration } from "./fleet-transitions.ts";

export {
  type AgentRegistration,
  DEFAULT_HEARTBEAT_TIMEOUT_SECONDS,
  HEARTBEAT_INTERVAL_SECONDS,
  markSilent,
} from "./fleet-transitions.ts";

export type GatewayOp = "heartbeat" | "start_draining" | "finish_draining" | "degrade" | "restore_health";
export type AgentOp = "establish_connection" | "heartbeat" | "degrade" | "lose_connection";

/** Transition → the declared operation that performs it (also the v2 route below `/:id`). */
export const GATEWAY_OPERATIONS: Record<GatewayOp, string> = {
  heartbeat: "heartbeat",
  start_draining: "drain/start",
  finish_draining: "drain/finish",
  degrade: "degrade",
  restore_health: "restore",
};
export const AGENT_OPERATIONS: Record<AgentOp, string> = {
  establish_connection: "connect",
  heartbeat: "heartbeat",
  degrade: "degrade",
  lose_connection: "disconnect",
};

/** The identity a control-plane credential named `name` authenticates as (src/access/tokens.ts). */
export function controlPlaneActor(kind: "gateway" | "agent", name: string): Actor {
  return {
    kind,
    id: `${kind}:${name}`,
    email: null,
    role: "viewer",
    roleProfileId: null,
    permissions: new Set(),
    authMethod: "control_plane",
    scopes: [],
    partitions: null,
  };
}

async function row(
  ctx: AppContext,
  table: "gateways" | "agents",
  id: string,
): Promise<Record<string, unknown>> {
  const key = table === "gateways" ? sql`gateway_id` : sql`uid`;
  const r = await ctx.db.one(
    sql`SELECT * FROM ${table === "gateways" ? sql`gateways` : sql`agents`} WHERE ${key} = ${id}`,
  );
  if (!r) throw new Error(`${table} ${id} vanished after its action`);
  return r;
}

/** Register (or re-register after a restart) a gateway, as the gateway itself; it ends healthy. */
export async function registerGateway(
  ctx: AppContext,
  id: string,
  attrs: { component_id?: string; metadata?: Record<string, unknown> } = {},
): Promise<Record<string, unknown>> {
  await runAction(ctx, controlPlaneActor("gateway", id), "gateway", "create", {
    id,
    input: {
      component_id: attrs.component_id ?? id,
      registration_source: "auto",
      ...(attrs.metadata !== undefined ? { metadata: attrs.metadata } : {}),
    },
  });
  return row(ctx, "gateways", id);
}

export async function gatewayOperation(
  ctx: AppContext,
  id: string,
  op: GatewayOp,
  input: { is_healthy?: boolean; agent_count?: number; checker_count?: number; reason?: string } = {},
): Promise<Record<string, unknown>> {
  await runAction(ctx, controlPlaneActor("gateway", id), "gateway", GATEWAY_OPERATIONS[op], { id, input });
  return row(ctx, "gateways", id);
}

/**
 * Register (or re-register) an agent; it ends `connecting` until it connects. Done by its
 * gateway (as a remote gateway does over HTTP), or by the agent itself when it has none.
 */
export async function registerAgent(
  ctx: AppContext,
  uid: string,
  attrs: AgentRegistration = {},
): Promise<Record<string, unknown>> {
  const actor = attrs.gateway_id
    ? controlPlaneActor("gateway", attrs.gateway_id)
    : controlPlaneActor("agent", uid);
  await runAction(ctx, actor, "agent", "create", {
    input: {
      uid,
      name: attrs.name ?? uid,
      type_id: 4,
      type: "netmon-agent",
      vendor_name: "netmon",
      ...(attrs.gateway_id ? { gateway_id: attrs.gateway_id } : {}),
      ...(attrs.capabilities ? { capabilities: attrs.capabilities } : {}),
      ...(attrs.host ? { host: attrs.host } : {}),
      ...(attrs.version ? { version: attrs.version } : {}),
    },
  });
  return row(ctx, "agents", uid);
}

/** An agent's own lifecycle operation (relayed by its gateway). */
export async function agentOperation(
  ctx: AppContext,
  uid: string,
  op: AgentOp,
  input: { gateway_id?: string; is_healthy?: boolean; capabilities?: string[] } = {},
): Promise<Record<string, unknown>> {
  await runAction(ctx, controlPlaneActor("agent", uid), "agent", AGENT_OPERATIONS[op], { id: uid, input });
  return row(ctx, "agents", uid);
}
