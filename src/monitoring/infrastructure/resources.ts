/**
 * JSON:API declarations of gateways (type `gateway`) and agents (type `agent`), reference
 * §2.1–§2.2 and spec §3/§4.1. Reads need infrastructure.view. Gateway deactivation and agent
 * updates need infrastructure.manage; registration and the lifecycle operations accept either
 * infrastructure.manage or a control-plane credential acting on itself — the `netmon gateway`
 * process registers, heartbeats and drains through these routes, and registers its agents.
 *
 * Re-registration (docs/decisions/0601): a POST for an id that exists answers 409 to users,
 * but a control-plane credential registering itself again (a restarted process) walks the
 * state machine back (gateway → healthy, agent → connecting) and answers 200.
 */

import type { Actor } from "../../access/actor.ts";
import type { AttributeDecl, OperationDecl } from "../../jsonapi/define.ts";
import { defineResource } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { ForbiddenError } from "../../kernel/errors.ts";
import { sql } from "../../storage/sql.ts";
import { reRegisterAgent, reRegisterGateway, restoreAgentIfHealthy } from "../fleet-transitions.ts";
import { parseLabels } from "../labels.ts";
import { agentMachine, gatewayMachine, RELEASE_TARGET_STATES } from "./machines.ts";

const VIEW = { permission: "infrastructure.view" } as const;
const MANAGE = { permission: "infrastructure.manage" } as const;
/**
 * Lifecycle operations a gateway/agent process performs on itself: control-plane credentials
 * or a user with infrastructure.manage (either suffices). A gateway credential may act only on
 * its own gateway (and on agents); an agent credential only on its own agent.
 */
const OPERATE = { controlPlane: true, permission: "infrastructure.manage" } as const;

function selfOnly(kind: "gateway" | "agent", actor: Actor, id: string | undefined): void {
  // Control-plane actor ids are "<kind>:<credential name>"; the name is the gateway id / agent uid.
  const self = actor.id.replace(/^(gateway|agent):/, "");
  if (actor.kind === "agent" && (kind === "gateway" || self !== id)) {
    throw new ForbiddenError("an agent credential may only act on its own agent");
  }
  if (actor.kind === "gateway" && kind === "gateway" && self !== id) {
    throw new ForbiddenError("a gateway credential may only act on its own gateway");
  }
}

const isControlPlane = (actor: Actor) => actor.kind === "gateway" || actor.kind === "agent";

/** A gateway credential registers agents for itself only: their gateway_id is its own id. */
function agentGateway(actor: Actor, requested: unknown): Record<string, unknown> {
  if (actor.kind !== "gateway") return {};
  const self = actor.id.replace(/^gateway:/, "");
  if (requested !== undefined && requested !== null && requested !== self) {
    throw new ForbiddenError(`a gateway credential registers agents for gateway '${self}' only`);
  }
  return { gateway_id: self };
}

/**
 * Self-scoping for agent operations; returns no attribute changes. An agent credential acts on
 * itself only; a gateway credential on agents attached to it — and, to (re)attach an agent,
 * on one attached to no gateway. Another gateway's agent is refused (issue 10: a stolen gateway
 * credential must not degrade or take over agents it does not serve).
 */
function guard(
  actor: Actor,
  record: { id?: string; gateway_id?: unknown; _row?: Record<string, unknown> } | null | undefined,
  opts: { attach?: boolean } = {},
): Record<string, never> {
  selfOnly("agent", actor, record?.id);
  if (actor.kind === "gateway" && record) {
    const self = actor.id.replace(/^gateway:/, "");
    const owner = record._row?.gateway_id ?? record.gateway_id ?? null;
    if (owner !== self && !(opts.attach && owner === null)) {
      throw new ForbiddenError(`agent '${record.id}' is attached to another gateway`);
    }
  }
  return {};
}

const ro = (type: AttributeDecl["type"], extra: Partial<AttributeDecl> = {}): AttributeDecl => ({
  type,
  filterable: false,
  ...extra,
});

export const gatewayResource = registerResource(
  defineResource({
    type: "gateway",
    base: "/gateways",
    table: "gateways",
    tag: "gateway",
    description: "Gateways: poll-job dispatchers in front of agents (reference §2.1)",
    id: { column: "gateway_id", type: "string", generate: "client" },
    attributes: {
      component_id: ro("string", { create: true, maxLength: 255 }),
      registration_source: ro("string", {
        create: true,
        maxLength: 64,
        description: "auto, manual, kubernetes",
      }),
      status: ro("enum", { values: gatewayMachine.states, nullable: false, sortable: true }),
      spiffe_identity: ro("string", { create: true, maxLength: 1024 }),
      first_registered: ro("datetime"),
      first_seen: ro("datetime"),
      last_seen: { type: "datetime", filterable: true },
      metadata: ro("object", { create: true, nullable: false, default: {} }),
      // Server-set from the caller (never from the body): who registered the gateway.
      created_by: ro("string", { maxLength: 255 }),
      is_healthy: ro("boolean", { nullable: false }),
      agent_count: ro("integer", { nullable: false }),
      checker_count: ro("integer", { nullable: false }),
      updated_at: { type: "datetime", filterable: true },
      partition_id: ro("uuid", { create: true }),
      status_reason: ro("string", { public: false }),
      seq: ro("integer", { public: false }),
    },
    relationships: {
      agents: { type: "agent", kind: "hasMany", foreignColumn: "gateway_id" },
    },
    defaultSort: "seq",
    pagination: { styles: ["offset", "keyset"], defaultLimit: 100, maxLimit: 1000 },
    collections: [
      {
        name: "active",
        path: "/active",
        summary: "Active gateways (status healthy and is_healthy)",
        where: ({ col }) => sql`${col("status")} = 'healthy' AND ${col("is_healthy")}`,
      },
    ],
    policies: { read: { access: VIEW } },
    stateMachine: gatewayMachine,
    touchColumn: "updated_at",
    actions: {
      create: {
        access: OPERATE,
        summary:
          "Register a gateway (starts healthy). A gateway credential registering itself again gets 200 and is brought back to healthy.",
        set: (_input, c, actor) => {
          selfOnly("gateway", actor, c.clientId);
          return {
            status: "healthy",
            first_registered: c.now,
            first_seen: c.now,
            last_seen: c.now,
            is_healthy: true,
            created_by: isControlPlane(actor) ? actor.id : `${actor.kind}:${actor.id}`,
          };
        },
        onExisting: async (c, actor, existing, input) => {
          if (!isControlPlane(actor)) return null;
          selfOnly("gateway", actor, existing.id);
          await reRegisterGateway(c.tx, existing.id, String(existing.status), c.now);
          if (input.metadata !== undefined) {
            await c.tx.query(
              sql`UPDATE gateways SET metadata = ${JSON.stringify(input.metadata)}::jsonb WHERE gateway_id = ${existing.id}`,
            );
          }
          return { id: existing.id };
        },
      },
    },
    operations: gatewayOperations(),
  }),
);

function gatewayOperations(): OperationDecl[] {
  const reason = { reason: { type: "string", maxLength: 1024 } } as const;
  const op = (
    name: string,
    transition: string,
    set?: OperationDecl["set"],
    args?: OperationDecl["arguments"],
    summary?: string,
  ): OperationDecl => ({
    name,
    path: `/${name}`,
    // Deactivation is an administrative action; the rest are also done by the gateway itself.
    access: name === "deactivate" ? MANAGE : OPERATE,
    transition,
    set: (input, c, actor, record) => {
      selfOnly("gateway", actor, record?.id);
      return set?.(input, c, actor, record) ?? {};
    },
    arguments: args ?? {},
    summary,
  });
  const healthy: OperationDecl["set"] = (_i, c) => ({
    is_healthy: true,
    last_seen: c.now,
    status_reason: null,
  });
  const unhealthy =
    (withReason: boolean): OperationDecl["set"] =>
    (input) => ({ is_healthy: false, ...(withReason ? { status_reason: input.reason ?? null } : {}) });
  return [
    op("activate", "activate", healthy, {}, "Activate an inactive gateway"),
    op("deactivate", "deactivate", unhealthy(false), {}, "Deactivate a gateway (admin action)"),
    op("degrade", "degrade", unhealthy(true), reason, "Mark a gateway as having issues"),
    op("drain/start", "start_draining", undefined, {}, "Start a graceful shutdown"),
    op("drain/finish", "finish_draining", unhealthy(false), {}, "Finish draining: the gateway goes offline"),
    op("maintenance/start", "start_maintenance", undefined, {}, "Enter maintenance mode"),
    op(
      "maintenance/end",
      "end_maintenance",
      (_i) => ({ is_healthy: true }),
      {},
      "Leave maintenance: back to healthy",
    ),
    op("offline", "go_offline", unhealthy(true), reason, "Take the gateway offline"),
    op("recover", "recover", undefined, {}, "Begin recovery of a degraded or offline gateway"),
    op("restore", "restore_health", healthy, {}, "Restore a degraded or recovering gateway to healthy"),
    op(
      "heartbeat",
      "heartbeat",
      (input, c, _actor, record) => {
        const v: Record<string, unknown> = { last_seen: c.now };
        for (const k of ["is_healthy", "agent_count", "checker_count"])
          if (input[k] !== undefined) v[k] = input[k];
        // A late heartbeat (sent before a drain, delivered after it) must not mark a draining,
        // offline or inactive gateway healthy again; registration and recover do that.
        if (v.is_healthy === true && ["draining", "offline", "inactive"].includes(String(record?.status)))
          delete v.is_healthy;
        return v;
      },
      {
        is_healthy: { type: "boolean", nullable: false },
        agent_count: { type: "integer", minimum: 0, nullable: false },
        checker_count: { type: "integer", minimum: 0, nullable: false },
      },
      "Heartbeat: updates last_seen and health (any state, no transition)",
    ),
  ];
}

const PLUGIN_LIMITS: Record<string, AttributeDecl> = {
  plugin_engine_max_memory_mb: { type: "integer", update: true, minimum: 0, maximum: 1_048_576 },
  plugin_engine_max_cpu_ms: { type: "integer", update: true, minimum: 0, maximum: 3_600_000 },
  plugin_engine_max_concurrent: { type: "integer", update: true, minimum: 0, maximum: 10_000 },
  plugin_engine_max_open_connections: { type: "integer", update: true, minimum: 0, maximum: 100_000 },
};

export const agentResource = registerResource(
  defineResource({
    type: "agent",
    base: "/agents",
    table: "agents",
    tag: "agent",
    description: "Agents: run checks for a gateway (reference §2.2)",
    id: { column: "uid", type: "string", generate: { attribute: "uid" } },
    attributes: {
      uid: { type: "string", required: true, nullable: false, maxLength: 255, pattern: "^[^\\s]+$" },
      name: { type: "string", create: true, update: true, maxLength: 255 },
      type_id: { type: "integer", create: true, nullable: false, default: 0, minimum: 0, maximum: 99 },
      type: { type: "string", create: true, maxLength: 64 },
      uid_alt: { type: "string", create: true, maxLength: 255 },
      vendor_name: { type: "string", create: true, maxLength: 255 },
      version: { type: "string", create: true, maxLength: 64 },
      desired_version: { type: "string" },
      policies: ro("array", { items: "object", create: true, update: true, nullable: false, default: [] }),
      gateway_id: { type: "string", create: true, maxLength: 255 },
      device_uid: { type: "string", create: true, maxLength: 255 },
      capabilities: ro("array", {
        items: "string",
        create: true,
        update: true,
        nullable: false,
        default: [],
      }),
      host: { type: "string", create: true, update: true, maxLength: 255 },
      port: { type: "integer", create: true, update: true, minimum: 0, maximum: 65535 },
      labels: {
        type: "object",
        create: true,
        update: true,
        nullable: false,
        default: {},
        filterable: false,
        description:
          'Operator-set string pairs (e.g. {"site": "dc1"}); checks with agent_labels run on agents whose labels contain them',
      },
      spiffe_identity: { type: "string", create: true, maxLength: 1024 },
      status: { type: "enum", values: agentMachine.states, nullable: false },
      is_healthy: { type: "boolean", nullable: false },
      config_source: { type: "enum", values: ["remote", "local", "cached", "unassigned"] },
      config_health: ro("enum", { values: ["unknown", "healthy", "unhealthy"], nullable: false }),
      config_pushed_at: ro("datetime"),
      metadata: { type: "object", create: true, update: true, nullable: false, default: {} },
      created_time: { type: "datetime" },
      modified_time: { type: "datetime" },
      first_seen_time: { type: "datetime" },
      last_seen_time: { type: "datetime" },
      last_update_at: { type: "datetime" },
      last_update_error: { type: "string" },
      release_rollout_state: { type: "enum", values: RELEASE_TARGET_STATES },
      ...PLUGIN_LIMITS,
      type_name: {
        type: "string",
        computed: (row) => AGENT_TYPE_NAMES[Number(row.type_id)] ?? "Unknown",
      },
      seq: ro("integer", { public: false }),
    },
    relationships: {
      gateway: { type: "gateway", kind: "belongsTo", column: "gateway_id" },
      device: { type: "device", kind: "belongsTo", column: "device_uid", targetColumn: "uid" },
    },
    defaultSort: "seq",
    pagination: { styles: ["offset", "keyset"], defaultLimit: 100, maxLimit: 1000 },
    readLookup: { query: "uid", attribute: "uid" },
    collections: [
      {
        name: "by_gateway",
        path: "/by-gateway/:gateway_id",
        summary: "Agents of a gateway (no page)",
        paginate: false,
        maxRows: 5000,
        where: ({ col, params }) => sql`${col("gateway_id")} = ${params.gateway_id}`,
      },
    ],
    policies: { read: { access: VIEW } },
    stateMachine: agentMachine,
    touchColumn: "modified_time",
    actions: {
      create: {
        access: OPERATE,
        summary:
          "Register an agent (starts connecting). A control-plane credential registering a known agent again gets 200 and the agent is connecting again.",
        set: (input, c, actor) => ({
          ...guard(actor, { id: input.uid as string }, { attach: true }),
          ...agentGateway(actor, input.gateway_id),
          ...(input.labels !== undefined
            ? { labels: parseLabels(input.labels, "/data/attributes/labels") }
            : {}),
          status: "connecting",
          is_healthy: true,
          first_seen_time: c.now,
          last_seen_time: c.now,
          created_time: c.now,
        }),
        onExisting: async (c, actor, existing, input) => {
          if (!isControlPlane(actor)) return null;
          guard(actor, existing, { attach: true });
          const gw = agentGateway(actor, input.gateway_id).gateway_id ?? input.gateway_id;
          await reRegisterAgent(
            c.tx,
            existing.id,
            String(existing.status),
            {
              gateway_id: typeof gw === "string" ? gw : undefined,
              capabilities: input.capabilities as string[] | undefined,
              host: input.host as string | undefined,
              version: input.version as string | undefined,
            },
            c.now,
          );
          return { id: existing.id };
        },
      },
      update: {
        access: MANAGE,
        summary: "Update an agent's settings (name, labels, …)",
        set: (input) =>
          input.labels !== undefined ? { labels: parseLabels(input.labels, "/data/attributes/labels") } : {},
      },
    },
    operations: [
      {
        name: "connect",
        path: "/connect",
        access: OPERATE,
        transition: "establish_connection",
        summary: "Establish the connection",
        arguments: { gateway_id: { type: "string", maxLength: 255 } },
        set: (input, c, actor, record) => ({
          ...guard(actor, record, { attach: true }),
          is_healthy: true,
          last_seen_time: c.now,
          ...(input.gateway_id !== undefined ? { gateway_id: input.gateway_id } : {}),
          ...agentGateway(actor, input.gateway_id),
        }),
      },
      {
        name: "degrade",
        path: "/degrade",
        access: OPERATE,
        transition: "degrade",
        summary: "Connected but unhealthy",
        set: (_i, _c, actor, record) => ({ ...guard(actor, record), is_healthy: false }),
      },
      {
        name: "disconnect",
        path: "/disconnect",
        access: OPERATE,
        transition: "lose_connection",
        summary: "Connection lost",
        set: (_i, _c, actor, record) => ({ ...guard(actor, record), gateway_id: null }),
      },
      {
        name: "heartbeat",
        path: "/heartbeat",
        access: OPERATE,
        transition: "heartbeat",
        summary:
          "Heartbeat: updates last_seen_time and health (no transition; a degraded agent reporting is_healthy true is connected again)",
        arguments: {
          is_healthy: { type: "boolean", nullable: false },
          capabilities: { type: "array", items: "string", nullable: false },
          config_source: { type: "enum", values: ["remote", "local", "cached", "unassigned"] },
        },
        set: (input, c, actor, record) => {
          guard(actor, record);
          const v: Record<string, unknown> = { last_seen_time: c.now };
          for (const k of ["is_healthy", "capabilities", "config_source"])
            if (input[k] !== undefined) v[k] = input[k];
          return v;
        },
        // A degraded agent reporting itself healthy is connected again (internal restore_health).
        handler: async (c, _actor, record, input) => {
          if (input.is_healthy === true && record) await restoreAgentIfHealthy(c.tx, record.id, c.now);
        },
      },
    ],
  }),
);

/** OCSF agent type names (reference §2.2). */
export const AGENT_TYPE_NAMES: Record<number, string> = {
  0: "Unknown",
  1: "Endpoint Detection and Response",
  2: "Data Loss Prevention",
  3: "Backup & Recovery",
  4: "Performance Monitoring & Observability",
  5: "Vulnerability Management",
  6: "Log Management",
  7: "Mobile Device Management",
  8: "Configuration Management",
  9: "Remote Access",
  99: "Other",
};
