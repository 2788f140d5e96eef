/**
 * JSON:API declarations of the notification model (reference 7.3): channels (list, no page),
 * escalation policies (list/create), steps (list/create), step channels (create), routes
 * (list/create/update/enable). References are validated with field-naming errors before the
 * write (src/alerting/notifications/config.ts).
 */

import { defineResource } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../kernel/errors.ts";
import { mergeCheckSecrets, redactCheckConfig, SECRET_MARKER } from "../../kernel/secrets.ts";
import type { Queryable } from "../../storage/db.ts";
import { ident, join, sql } from "../../storage/sql.ts";
import {
  NOTIFY_PERMS,
  type PolicyInput,
  type RouteInput,
  type StepInput,
  validateChannelConfig,
  validatePolicy,
  validateRoute,
  validateStep,
  validateStepChannel,
} from "../notifications/config.ts";
import {
  type ChannelRow,
  DELIVERY_STATUSES,
  deliveryMachine,
  sendTestNotification,
} from "../notifications/delivery.ts";
import { validateMatchExpression } from "../notifications/match-expression.ts";

const CHANNELS_VIEW = { permission: NOTIFY_PERMS.channelsView } as const;
const CHANNELS_MANAGE = { permission: NOTIFY_PERMS.channelsManage } as const;

/** secret_refs (webhook_secret, smtp_user, smtp_password, routing_key) are write-only: every value shows as set. */
function redactAll(v: unknown): unknown {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return {};
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = x === null || x === "" ? null : SECRET_MARKER;
  return out;
}

/** On update, a secret left out or sent back as the marker keeps its stored value. */
function mergeAll(next: unknown, stored: unknown): unknown {
  if (next === undefined) return undefined;
  if (next === null || typeof next !== "object" || Array.isArray(next)) return next;
  const prev = (stored ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = { ...prev };
  for (const [k, v] of Object.entries(next)) {
    const marker = v !== null && typeof v === "object" && (v as { set?: unknown }).set === true;
    out[k] = marker ? prev[k] : v;
  }
  return out;
}

// routing_key: PagerDuty Events v2 (the pagerduty webhook template reads {{secret.routing_key}}).
const SECRET_REF_KEYS = new Set(["webhook_secret", "smtp_user", "smtp_password", "routing_key"]);

function checkSecretRefs(v: unknown): void {
  if (v === undefined) return;
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    throw new ValidationError("secret_refs must be an object", {
      source: { pointer: "/data/attributes/secret_refs" },
    });
  }
  const unknown = Object.keys(v).filter((k) => !SECRET_REF_KEYS.has(k));
  if (unknown.length > 0) {
    throw new ValidationError(
      `unknown secret_refs member(s): ${unknown.join(", ")} (allowed: ${[...SECRET_REF_KEYS].join(", ")})`,
      { source: { pointer: "/data/attributes/secret_refs" } },
    );
  }
}

async function validateChannel(
  q: Queryable,
  input: Record<string, unknown>,
  id: string | null,
): Promise<void> {
  validateChannelConfig(String(input.provider), (input.config ?? {}) as Record<string, unknown>);
  checkSecretRefs(input.secret_refs);
  if (input.execution_route === "edge_agent" && !input.agent_uid) {
    throw new ValidationError("is required when execution_route is edge_agent", {
      source: { pointer: "/data/attributes/agent_uid" },
    });
  }
  const fallback = input.fallback_channel_id;
  if (fallback) {
    if (fallback === id) {
      throw new ValidationError("a channel cannot fall back to itself", {
        source: { pointer: "/data/attributes/fallback_channel_id" },
      });
    }
    const row = await q.one(sql`SELECT 1 FROM notification_channels WHERE id = ${String(fallback)}::uuid`);
    if (!row) {
      throw new ValidationError("fallback_channel_id does not reference an existing channel", {
        source: { pointer: "/data/attributes/fallback_channel_id" },
      });
    }
  }
}
const ROUTES_VIEW = { permission: NOTIFY_PERMS.routesView } as const;
const ROUTES_MANAGE = { permission: NOTIFY_PERMS.routesManage } as const;

export const notificationChannelResource = registerResource(
  defineResource({
    type: "notification-channel",
    base: "/notification-channels",
    table: "notification_channels",
    tag: "notification-channel",
    description: "Where notifications go (webhook, email). Credentials are never exposed.",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      name: { type: "string", required: true, update: true, nullable: false, maxLength: 255 },
      description: { type: "string", create: true, update: true, maxLength: 4000 },
      provider: { type: "enum", values: ["webhook", "email"], required: true, nullable: false },
      enabled: { type: "boolean", create: true, update: true, nullable: false, default: true },
      // Webhook headers such as Authorization are write-only, as in check configs.
      config: {
        type: "object",
        create: true,
        update: true,
        nullable: false,
        default: {},
        redact: redactCheckConfig,
        filterable: false,
      },
      // webhook_secret (HMAC signing), smtp_user, smtp_password: write-only.
      secret_refs: {
        type: "object",
        create: true,
        update: true,
        nullable: false,
        default: {},
        redact: redactAll,
        filterable: false,
      },
      execution_route: {
        type: "enum",
        values: ["control_plane", "edge_agent"],
        create: true,
        update: true,
        nullable: false,
        default: "control_plane",
      },
      agent_uid: { type: "string", create: true, update: true, maxLength: 255 },
      fallback_channel_id: { type: "uuid", create: true, update: true },
      fail_closed: { type: "boolean", create: true, update: true, nullable: false, default: false },
      rate_limit_per_minute: { type: "integer", create: true, update: true, minimum: 1, maximum: 100000 },
      max_attempts: {
        type: "integer",
        create: true,
        update: true,
        nullable: false,
        default: 3,
        minimum: 1,
        maximum: 20,
      },
      health: { type: "enum", values: ["unknown", "healthy", "degraded", "failing"], nullable: false },
      last_success_at: { type: "datetime" },
      last_failure_at: { type: "datetime" },
      last_error: { type: "string" },
      metadata: { type: "object", nullable: false },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    defaultSort: "name",
    routes: { index: false },
    collections: [
      {
        name: "index",
        path: "",
        summary: "List notification channels (no page)",
        paginate: false,
        maxRows: 1000,
      },
    ],
    policies: { read: { access: CHANNELS_VIEW } },
    touchColumn: "updated_at",
    actions: {
      create: {
        access: CHANNELS_MANAGE,
        summary: "Create a channel (secrets in config headers and secret_refs are write-only)",
      },
      update: {
        access: CHANNELS_MANAGE,
        summary: "Update a channel (provider is immutable; omitted secrets are kept)",
      },
      // Its step memberships go with it; its past deliveries keep their rows (channel_id → null).
      delete: { access: CHANNELS_MANAGE, summary: "Delete a channel" },
    },
    operations: [
      {
        name: "test",
        path: "/test",
        method: "POST",
        access: CHANNELS_MANAGE,
        transaction: false,
        summary:
          "Send a test notification through the channel now (bypasses routes); answers {ok, status, error} and updates the channel's health",
        handler: async (c, actor, record) => {
          const channel = await c.app.db.one<ChannelRow>(
            sql`SELECT * FROM notification_channels WHERE id = ${String(record?.id)}`,
          );
          if (!channel) throw new NotFoundError("notification channel not found");
          const result = await sendTestNotification(c.app, channel, actor.email ?? actor.id);
          return { raw: { data: result } };
        },
      },
    ],
    hooks: {
      beforeCreate: (c, _actor, input) => validateChannel(c.tx, input, null),
      beforeUpdate: async (c, _actor, before, input) => {
        if (input.config !== undefined) input.config = mergeCheckSecrets(input.config, before.config);
        if (input.secret_refs !== undefined) {
          checkSecretRefs(input.secret_refs);
          input.secret_refs = mergeAll(input.secret_refs, before.secret_refs);
        }
        await validateChannel(c.tx, { ...before, ...input, provider: before.provider }, String(before.id));
      },
    },
  }),
);

const SEVERITIES = ["info", "warning", "critical"] as const;
/** "Repeat every N" repeats until the alert is acknowledged or resolved, at most this often. */
const QUICK_MAX_REPEATS = 1000;

async function quickRoute(
  q: Queryable,
  input: Record<string, unknown>,
): Promise<{ id: string; status: number }> {
  const name = String(input.name ?? "").trim();
  const pointer = (f: string) => ({ source: { pointer: `/data/attributes/${f}` } });
  if (!name) throw new ValidationError("name is required", pointer("name"));
  const channels = [...new Set((input.channel_ids as string[] | undefined) ?? [])];
  if (channels.length === 0) throw new ValidationError("name at least one channel", pointer("channel_ids"));
  const found = await q.many<{ id: string }>(
    sql`SELECT id FROM notification_channels WHERE id = ANY(${channels}::uuid[])`,
  );
  const missing = channels.filter((id) => !found.some((f) => f.id === id));
  if (missing.length > 0) {
    throw new ValidationError(`unknown channel(s): ${missing.join(", ")}`, pointer("channel_ids"));
  }
  const min = SEVERITIES.indexOf((input.min_severity as (typeof SEVERITIES)[number]) ?? "warning");
  const severities = SEVERITIES.slice(Math.max(0, min));
  const extra = input.match_expression as Record<string, unknown> | undefined;
  if (extra !== undefined && extra !== null) validateMatchExpression(extra);
  const severityMatch = { field: "alert.severity", in: [...severities] };
  const match = extra && Object.keys(extra).length > 0 ? { all: [severityMatch, extra] } : severityMatch;
  const repeat = input.repeat_interval_seconds as number | undefined;
  const taken = await q.one(sql`SELECT 1 FROM notification_routes WHERE name = ${name}
    UNION ALL SELECT 1 FROM notification_escalation_policies WHERE name = ${name}`);
  if (taken) throw new ConflictError(`a route or escalation policy named '${name}' already exists`);
  await validatePolicy(q, {
    name,
    repeat_count: repeat ? QUICK_MAX_REPEATS : 0,
    repeat_interval_seconds: repeat ?? null,
  });
  const policy = await q.one<{ id: string }>(sql`
    INSERT INTO notification_escalation_policies (name, description, repeat_count, repeat_interval_seconds)
    VALUES (${name}, ${"created with the route of the same name"}, ${repeat ? QUICK_MAX_REPEATS : 0}, ${repeat ?? null})
    RETURNING id`);
  const step = await q.one<{ id: string }>(sql`
    INSERT INTO notification_escalation_steps (policy_id, step_number, delay_seconds, condition)
    VALUES (${policy?.id}, 1, 0, 'if_unacknowledged') RETURNING id`);
  for (const ch of channels) {
    await q.query(
      sql`INSERT INTO notification_escalation_step_channels (step_id, channel_id) VALUES (${step?.id}, ${ch})`,
    );
  }
  const route = await q.one<{ id: string }>(sql`
    INSERT INTO notification_routes (name, description, enabled, priority, match_expression, escalation_policy_id)
    VALUES (${name}, ${`severity ≥ ${SEVERITIES[Math.max(0, min)]}`}, true, ${(input.priority as number | undefined) ?? 100},
      ${JSON.stringify(match)}::jsonb, ${policy?.id})
    RETURNING id`);
  return { id: String(route?.id), status: 201 };
}

export const notificationDeliveryResource = registerResource(
  defineResource({
    type: "notification-delivery",
    base: "/notification-deliveries",
    table: "notification_deliveries",
    tag: "notification-delivery",
    description:
      "The delivery log: one row per notification (alert × step × channel), with its attempts, status, response code, error and next retry",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      alert_id: { type: "uuid", nullable: false },
      route_id: { type: "uuid" },
      policy_id: { type: "uuid" },
      channel_id: { type: "uuid" },
      step_number: { type: "integer", nullable: false },
      repeat_number: { type: "integer", nullable: false },
      lifecycle_reason: {
        type: "enum",
        values: ["fire", "renotify", "escalate", "resolve", "failover"],
        nullable: false,
      },
      status: { type: "enum", values: DELIVERY_STATUSES, nullable: false },
      suppression_reason: { type: "string" },
      provider: { type: "string" },
      attempts: { type: "integer", nullable: false },
      max_attempts: { type: "integer", nullable: false },
      next_attempt_at: { type: "datetime" },
      last_error: { type: "string", filterable: false },
      response_status: { type: "integer" },
      sent_at: { type: "datetime" },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    defaultSort: "-inserted_at",
    pagination: { styles: ["keyset", "offset"], defaultLimit: 100, maxLimit: 1000 },
    policies: { read: { access: CHANNELS_VIEW } },
    // Written only by the dispatcher (delivery.ts) through the state writer; no operation here.
    stateMachine: deliveryMachine,
    actions: {},
  }),
);

export const escalationPolicyResource = registerResource(
  defineResource({
    type: "notification-escalation-policy",
    base: "/notification-escalation-policies",
    table: "notification_escalation_policies",
    tag: "notification-escalation-policy",
    description: "Ordered escalation steps with optional repeats",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      name: { type: "string", required: true, nullable: false, maxLength: 255 },
      description: { type: "string", create: true, maxLength: 10000 },
      enabled: { type: "boolean", create: true, default: true, nullable: false },
      repeat_count: { type: "integer", create: true, default: 0, nullable: false, minimum: 0 },
      repeat_interval_seconds: { type: "integer", create: true, minimum: 1 },
      resolve_notifies: { type: "boolean", create: true, default: true, nullable: false },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    relationships: {
      steps: { type: "notification-escalation-step", kind: "hasMany", foreignColumn: "policy_id" },
    },
    defaultSort: "inserted_at",
    policies: { read: { access: ROUTES_VIEW } },
    actions: { create: { access: ROUTES_MANAGE } },
    hooks: {
      beforeCreate: (c, _actor, input) => validatePolicy(c.tx, input as PolicyInput),
    },
    touchColumn: "updated_at",
  }),
);

export const escalationStepResource = registerResource(
  defineResource({
    type: "notification-escalation-step",
    base: "/notification-escalation-steps",
    table: "notification_escalation_steps",
    tag: "notification-escalation-step",
    description:
      "One step of an escalation policy: its channels fire after delay_seconds from the alert's fire time",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      policy_id: { type: "uuid", required: true, nullable: false },
      step_number: { type: "integer", required: true, nullable: false, minimum: 1 },
      delay_seconds: { type: "integer", create: true, default: 0, nullable: false, minimum: 0 },
      condition: {
        type: "enum",
        values: ["always", "if_unacknowledged"],
        create: true,
        default: "if_unacknowledged",
        nullable: false,
      },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    relationships: {
      policy: { type: "notification-escalation-policy", kind: "belongsTo", column: "policy_id" },
      step_channels: {
        type: "notification-escalation-step-channel",
        kind: "hasMany",
        foreignColumn: "step_id",
      },
    },
    defaultSort: "step_number",
    policies: { read: { access: ROUTES_VIEW } },
    actions: { create: { access: ROUTES_MANAGE } },
    hooks: {
      beforeCreate: (c, _actor, input) => validateStep(c.tx, input as unknown as StepInput),
    },
    touchColumn: "updated_at",
  }),
);

export const escalationStepChannelResource = registerResource(
  defineResource({
    type: "notification-escalation-step-channel",
    base: "/notification-escalation-step-channels",
    table: "notification_escalation_step_channels",
    tag: "notification-escalation-step-channel",
    description: "A channel notified by an escalation step",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      step_id: { type: "uuid", required: true, nullable: false },
      channel_id: { type: "uuid", required: true, nullable: false },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    relationships: {
      step: { type: "notification-escalation-step", kind: "belongsTo", column: "step_id" },
      channel: { type: "notification-channel", kind: "belongsTo", column: "channel_id" },
    },
    routes: { index: false, read: false },
    policies: { read: { access: ROUTES_VIEW } },
    actions: { create: { access: ROUTES_MANAGE } },
    hooks: {
      beforeCreate: (c, _actor, input) =>
        validateStepChannel(c.tx, { step_id: input.step_id, channel_id: input.channel_id }),
    },
    touchColumn: "updated_at",
  }),
);

const ROUTE_UPDATABLE = [
  "name",
  "description",
  "priority",
  "match_expression",
  "escalation_policy_id",
  "schedule_id",
  "dedupe_key_template",
  "throttle_seconds",
  "group_wait_seconds",
  "group_interval_seconds",
  "continue",
] as const;
const JSON_COLUMNS = new Set(["match_expression"]);

export const notificationRouteResource = registerResource(
  defineResource({
    type: "notification-route",
    base: "/notification-routes",
    table: "notification_routes",
    tag: "notification-route",
    description:
      "Which alerts go to which escalation policy (lower priority first; first match wins unless continue)",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      name: { type: "string", required: true, update: true, nullable: false, maxLength: 255 },
      description: { type: "string", create: true, update: true, maxLength: 10000 },
      enabled: { type: "boolean", create: true, default: true, nullable: false },
      priority: { type: "integer", create: true, update: true, default: 100, nullable: false },
      match_expression: { type: "object", create: true, update: true, default: {}, nullable: false },
      escalation_policy_id: { type: "uuid", required: true, update: true, nullable: false },
      schedule_id: { type: "uuid", create: true, update: true },
      dedupe_key_template: { type: "string", create: true, update: true, maxLength: 1000 },
      throttle_seconds: { type: "integer", create: true, update: true, minimum: 0 },
      group_wait_seconds: {
        type: "integer",
        create: true,
        update: true,
        default: 0,
        nullable: false,
        minimum: 0,
      },
      group_interval_seconds: { type: "integer", create: true, update: true, minimum: 0 },
      continue: { type: "boolean", create: true, update: true, default: false, nullable: false },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    relationships: {
      escalation_policy: {
        type: "notification-escalation-policy",
        kind: "belongsTo",
        column: "escalation_policy_id",
      },
    },
    defaultSort: "priority",
    policies: { read: { access: ROUTES_VIEW } },
    actions: {
      create: { access: ROUTES_MANAGE },
      update: {
        access: ROUTES_MANAGE,
        summary: "Update a notification route (enabled is not accepted: use /enable)",
        handler: async (c, _actor, record, input) => {
          if (!record) throw new NotFoundError("notification route not found");
          await validateRoute(c.tx, input as RouteInput, false);
          const sets = ROUTE_UPDATABLE.filter((k) => input[k] !== undefined).map((k) => {
            const v = input[k];
            return JSON_COLUMNS.has(k)
              ? sql`${ident(k)} = ${JSON.stringify(v)}::jsonb`
              : sql`${ident(k)} = ${v}`;
          });
          sets.push(sql`updated_at = ${c.now}`);
          await c.tx.query(sql`UPDATE notification_routes SET ${join(sets)} WHERE id = ${record.id}`);
        },
      },
    },
    operations: [
      {
        name: "enable",
        path: "/enable",
        access: ROUTES_MANAGE,
        summary: "Enable a notification route",
        set: () => ({ enabled: true }),
      },
      {
        // "Alerts of severity ≥ X matching Y → channels Z, repeat every N" in one call: the
        // policy, its single step and step channels are created with the route (issue 13).
        name: "quick",
        path: "/quick",
        method: "POST",
        target: "collection",
        access: ROUTES_MANAGE,
        status: 201,
        summary:
          "Create a route with its escalation policy, step and step channels in one call (the full model stays available)",
        arguments: {
          name: { type: "string", required: true, nullable: false, maxLength: 200 },
          channel_ids: { type: "array", items: "uuid", required: true, nullable: false },
          min_severity: { type: "enum", values: SEVERITIES, nullable: false },
          match_expression: { type: "object" },
          repeat_interval_seconds: { type: "integer", minimum: 60, maximum: 604800 },
          priority: { type: "integer", minimum: 0, maximum: 100000 },
        },
        handler: async (c, _actor, _record, input) => quickRoute(c.tx, input),
      },
    ],
    hooks: {
      beforeCreate: (c, _actor, input) => validateRoute(c.tx, input as RouteInput, true),
    },
    touchColumn: "updated_at",
  }),
);
