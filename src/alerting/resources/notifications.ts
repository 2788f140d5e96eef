/**
 * JSON:API declarations of the notification model (reference 7.3): channels (list, no page),
 * escalation policies (list/create), steps (list/create), step channels (create), routes
 * (list/create/update/enable). References are validated with field-naming errors before the
 * write (src/alerting/notifications/config.ts).
 */

import { defineResource } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { NotFoundError } from "../../kernel/errors.ts";
import { redactCheckConfig } from "../../kernel/secrets.ts";
import { ident, join, sql } from "../../storage/sql.ts";
import {
  NOTIFY_PERMS,
  type PolicyInput,
  type RouteInput,
  type StepInput,
  validatePolicy,
  validateRoute,
  validateStep,
  validateStepChannel,
} from "../notifications/config.ts";

const CHANNELS_VIEW = { permission: NOTIFY_PERMS.channelsView } as const;
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
      name: { type: "string", nullable: false },
      description: { type: "string" },
      provider: { type: "enum", values: ["webhook", "email"], nullable: false },
      enabled: { type: "boolean", nullable: false },
      // Webhook headers such as Authorization are write-only, as in check configs.
      config: { type: "object", nullable: false, redact: redactCheckConfig },
      execution_route: { type: "enum", values: ["control_plane", "edge_agent"], nullable: false },
      agent_uid: { type: "string" },
      fallback_channel_id: { type: "uuid" },
      fail_closed: { type: "boolean", nullable: false },
      rate_limit_per_minute: { type: "integer" },
      max_attempts: { type: "integer", nullable: false },
      health: { type: "enum", values: ["unknown", "healthy", "degraded", "failing"], nullable: false },
      last_success_at: { type: "datetime" },
      last_failure_at: { type: "datetime" },
      last_error: { type: "string" },
      metadata: { type: "object", nullable: false },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    defaultSort: "name",
    routes: { index: false, read: false },
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
    ],
    hooks: {
      beforeCreate: (c, _actor, input) => validateRoute(c.tx, input as RouteInput, true),
    },
    touchColumn: "updated_at",
  }),
);
