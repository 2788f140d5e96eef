/**
 * Gateway and agent transitions the core applies itself, below the declared operations:
 * re-registration (a known gateway or agent walks its state machine back to healthy /
 * connecting), the internal `restore_health` of a degraded agent, and the leader's liveness
 * sweep. The state machines are those of src/monitoring/infrastructure/machines.ts.
 */

import { stateTable, transitionRow } from "../jsonapi/engine/transitions.ts";
import type { AppContext } from "../kernel/context.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { agentMachine, gatewayMachine } from "./infrastructure/machines.ts";

/** A gateway or agent whose last heartbeat is older than this is marked offline/disconnected. */
export const DEFAULT_HEARTBEAT_TIMEOUT_SECONDS = 60;
/** How often the processes heartbeat. */
export const HEARTBEAT_INTERVAL_SECONDS = 10;

/** The gateways table as the core's own transitions write it. */
export const GATEWAY_STATES = stateTable({
  machine: gatewayMachine,
  table: "gateways",
  key: "gateway_id",
  keyType: "text",
  touch: "updated_at",
  columns: { is_healthy: "boolean", last_seen: "timestamptz", status_reason: "text" },
});

/** The agents table as the core's own transitions write it. */
export const AGENT_STATES = stateTable({
  machine: agentMachine,
  table: "agents",
  key: "uid",
  keyType: "text",
  touch: "modified_time",
  columns: {
    last_seen_time: "timestamptz",
    capabilities: "jsonb",
    host: "text",
    version: "text",
    gateway_id: "text",
    is_healthy: "boolean",
  },
});

const GW = GATEWAY_STATES;
const AG = AGENT_STATES;

function apply(
  tx: Queryable,
  t: typeof GW,
  id: string,
  transition: string,
  set: Record<string, unknown>,
  now: Date,
): Promise<Record<string, unknown>> {
  return transitionRow(tx, t, id, transition, set, now);
}

/**
 * A known gateway registers again (its process restarted): walk the gateway state machine
 * back to healthy from wherever it is. Shared by the embedded link and by
 * `POST /api/v2/gateways` from the gateway's own credential. The row must be locked.
 */
export async function reRegisterGateway(
  tx: Queryable,
  id: string,
  status: string,
  now: Date,
): Promise<Record<string, unknown>> {
  const healthy = { is_healthy: true, last_seen: now, status_reason: null };
  switch (status) {
    case "inactive":
      return apply(tx, GW, id, "activate", healthy, now);
    case "draining":
      await apply(tx, GW, id, "go_offline", {}, now);
      await apply(tx, GW, id, "recover", {}, now);
      return apply(tx, GW, id, "restore_health", healthy, now);
    case "offline":
      await apply(tx, GW, id, "recover", {}, now);
      return apply(tx, GW, id, "restore_health", healthy, now);
    case "degraded":
    case "recovering":
      return apply(tx, GW, id, "restore_health", healthy, now);
    case "maintenance":
      // An operator put it in maintenance: coming back does not end that.
      return apply(tx, GW, id, "heartbeat", { last_seen: now }, now);
    default:
      return apply(tx, GW, id, "heartbeat", { last_seen: now, is_healthy: true }, now);
  }
}

export interface AgentRegistration {
  name?: string;
  gateway_id?: string | null;
  capabilities?: string[];
  host?: string;
  version?: string;
}

/**
 * A known agent registers again (restart, or a new gateway): it ends `connecting`, through
 * the internal `reconnect`/`recover` transitions (a connected one first loses its old
 * connection). Shared by the embedded link and `POST /api/v2/agents` from a control-plane
 * credential. The row must be locked.
 */
export async function reRegisterAgent(
  tx: Queryable,
  uid: string,
  status: string,
  attrs: AgentRegistration,
  now: Date,
): Promise<Record<string, unknown>> {
  const set: Record<string, unknown> = {
    last_seen_time: now,
    ...(attrs.capabilities ? { capabilities: attrs.capabilities } : {}),
    ...(attrs.host ? { host: attrs.host } : {}),
    ...(attrs.version ? { version: attrs.version } : {}),
    ...(attrs.gateway_id ? { gateway_id: attrs.gateway_id } : {}),
  };
  switch (status) {
    case "disconnected":
      return apply(tx, AG, uid, "reconnect", set, now);
    case "unavailable":
      return apply(tx, AG, uid, "recover", set, now);
    case "connected":
    case "degraded":
      // Restarted without a clean disconnect: drop the old connection first.
      await apply(tx, AG, uid, "lose_connection", {}, now);
      return apply(tx, AG, uid, "reconnect", set, now);
    default:
      return apply(tx, AG, uid, "heartbeat", set, now);
  }
}

/**
 * The internal `restore_health` transition: a degraded agent whose heartbeat reports it
 * healthy again is connected again (the v2 surface has no route for it; spec §3).
 */
export async function restoreAgentIfHealthy(tx: Queryable, uid: string, now: Date): Promise<void> {
  const row = await tx.one<{ status: string; is_healthy: boolean }>(
    sql`SELECT status, is_healthy FROM agents WHERE uid = ${uid} FOR UPDATE`,
  );
  if (row?.status === "degraded" && row.is_healthy) await apply(tx, AG, uid, "restore_health", {}, now);
}

/**
 * Liveness sweep (leader-only): gateways silent for `timeoutSeconds` lose their connection
 * (→ offline), agents silent that long are disconnected (connecting ones fail to connect).
 */
export async function markSilent(
  ctx: AppContext,
  timeoutSeconds = DEFAULT_HEARTBEAT_TIMEOUT_SECONDS,
): Promise<{ gateways: string[]; agents: string[] }> {
  const now = ctx.now();
  const cutoff = new Date(now.getTime() - timeoutSeconds * 1000);
  const gws = await ctx.db.many<{ gateway_id: string }>(sql`
    SELECT gateway_id FROM gateways WHERE status IN ('healthy', 'degraded') AND (last_seen IS NULL OR last_seen < ${cutoff})`);
  const ags = await ctx.db.many<{ uid: string; status: string }>(sql`
    SELECT uid, status FROM agents WHERE status IN ('connecting', 'connected', 'degraded')
      AND (last_seen_time IS NULL OR last_seen_time < ${cutoff})`);
  const out = { gateways: [] as string[], agents: [] as string[] };
  for (const g of gws) {
    try {
      await ctx.db.transaction((tx) =>
        apply(
          tx,
          GW,
          g.gateway_id,
          "lose_connection",
          { is_healthy: false, status_reason: "heartbeat timeout" },
          now,
        ),
      );
      out.gateways.push(g.gateway_id);
    } catch (err) {
      ctx.log.debug({ err }, "gateway changed during liveness sweep");
    }
  }
  for (const a of ags) {
    try {
      await ctx.db.transaction((tx) =>
        apply(
          tx,
          AG,
          a.uid,
          a.status === "connecting" ? "connection_failed" : "lose_connection",
          { gateway_id: null, is_healthy: false },
          now,
        ),
      );
      out.agents.push(a.uid);
    } catch (err) {
      ctx.log.debug({ err }, "agent changed during liveness sweep");
    }
  }
  return out;
}
