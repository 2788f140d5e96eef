/**
 * JSON:API declarations of event rules (type `event-rule`) and stateful alert rules (type
 * `stateful-alert-rule`), spec 4.1 rule behaviours 1–5 and reference 7.1–7.2.
 *
 * Event rules: reads need observability.rules.view and are HIDDEN otherwise (anonymous or
 * unprivileged lists answer `data: []`, detail reads 404); create/update/delete need their own
 * permission (a write permission never grants reads); every write bumps the shared rule
 * version in its transaction and drops the in-process promotion cache after commit.
 *
 * Stateful alert rules: reads viewer+, mutations operator+; engine state, history and
 * templates are not exposed (no attributes or routes for them).
 */
import { defineResource } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { NotFoundError } from "../../kernel/errors.ts";
import { sql } from "../../storage/sql.ts";
import {
  bumpEventRuleVersion,
  EVENT_RULE_PERMISSIONS,
  type EventRuleInput,
  invalidateEventRuleCache,
  validateEventRuleInput,
} from "../event-rules.ts";
import {
  bumpStatefulRuleVersion,
  invalidateStatefulRuleCache,
  type StatefulRuleInput,
  type StatefulRuleRow,
  validateStatefulRule,
} from "../stateful-rules.ts";

export const eventRuleResource = registerResource(
  defineResource({
    type: "event-rule",
    base: "/event-rules",
    table: "event_rules",
    tag: "event-rule",
    description: "Log promotion rules: logs matching a rule become OCSF events (and optionally alerts)",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      name: { type: "string", required: true, update: true, nullable: false, maxLength: 255 },
      description: { type: "string", create: true, update: true, maxLength: 10000 },
      enabled: { type: "boolean", create: true, update: true, default: true, nullable: false },
      priority: { type: "integer", create: true, update: true, default: 100, nullable: false },
      source_type: {
        type: "enum",
        values: ["log", "metric"],
        create: true,
        update: true,
        default: "log",
        nullable: false,
      },
      source: { type: "object", create: true, update: true, default: {}, nullable: false },
      match: { type: "object", create: true, update: true, default: {}, nullable: false },
      event: { type: "object", create: true, update: true, default: {}, nullable: false },
      managed: { type: "boolean", nullable: false },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    defaultSort: "priority,inserted_at",
    collections: [
      {
        name: "active",
        path: "/active",
        summary: "Enabled event rules in evaluation order",
        defaultSort: "priority,inserted_at",
        where: ({ col }) => sql`${col("enabled")} = true`,
      },
    ],
    policies: { read: { access: { permission: EVENT_RULE_PERMISSIONS.view }, whenDenied: "hide" } },
    actions: {
      create: { access: { permission: EVENT_RULE_PERMISSIONS.create } },
      update: {
        access: { permission: EVENT_RULE_PERMISSIONS.update },
        set: (input) => {
          validateEventRuleInput(input as EventRuleInput, false);
          return {};
        },
      },
      delete: { access: { permission: EVENT_RULE_PERMISSIONS.delete } },
    },
    hooks: {
      beforeCreate: (_c, _actor, input) => validateEventRuleInput(input as EventRuleInput, true),
      afterWrite: (c) => bumpEventRuleVersion(c.tx),
      afterCommit: (app) => invalidateEventRuleCache(app.db),
    },
    touchColumn: "updated_at",
  }),
);

const STATEFUL_DEFAULTS = {
  enabled: true,
  priority: 100,
  signal: "log",
  match: {},
  group_by: [],
  threshold: 5,
  window_seconds: 600,
  bucket_seconds: 60,
  cooldown_seconds: 300,
  renotify_seconds: 21600,
  event: {},
  alert: {},
} as const;

const STATEFUL_WRITABLE = [
  "name",
  "description",
  "enabled",
  "priority",
  "signal",
  "match",
  "group_by",
  "threshold",
  "window_seconds",
  "bucket_seconds",
  "cooldown_seconds",
  "renotify_seconds",
  "event",
  "alert",
] as const;

export const statefulAlertRuleResource = registerResource(
  defineResource({
    type: "stateful-alert-rule",
    base: "/stateful-alert-rules",
    table: "stateful_alert_rules",
    tag: "stateful-alert-rule",
    description: "Threshold-over-window alert rules on logs or promoted events",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      name: { type: "string", required: true, update: true, nullable: false, maxLength: 255 },
      description: { type: "string", create: true, update: true, maxLength: 10000 },
      enabled: { type: "boolean", create: true, update: true, default: true, nullable: false },
      priority: { type: "integer", create: true, update: true, default: 100, nullable: false },
      signal: {
        type: "enum",
        values: ["log", "event"],
        create: true,
        update: true,
        default: "log",
        nullable: false,
      },
      match: { type: "object", create: true, update: true, default: {}, nullable: false },
      group_by: { type: "array", items: "string", create: true, update: true, default: [], nullable: false },
      threshold: { type: "integer", create: true, update: true, default: 5, nullable: false },
      window_seconds: { type: "integer", create: true, update: true, default: 600, nullable: false },
      bucket_seconds: { type: "integer", create: true, update: true, default: 60, nullable: false },
      cooldown_seconds: {
        type: "integer",
        create: true,
        update: true,
        default: 300,
        nullable: false,
        minimum: 0,
      },
      renotify_seconds: {
        type: "integer",
        create: true,
        update: true,
        default: 21600,
        nullable: false,
        minimum: 0,
      },
      event: { type: "object", create: true, update: true, default: {}, nullable: false },
      alert: { type: "object", create: true, update: true, default: {}, nullable: false },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    defaultSort: "priority,inserted_at",
    collections: [
      {
        name: "active",
        path: "/active",
        summary: "Enabled stateful alert rules (priority, then inserted_at)",
        defaultSort: "priority,inserted_at",
        where: ({ col }) => sql`${col("enabled")} = true`,
      },
    ],
    policies: { read: { access: { role: "viewer" } } },
    actions: {
      create: {
        access: { role: "operator" },
        // group_by is a text[] column (the engine writes array attributes as jsonb).
        handler: async (c, _actor, _record, input) => {
          const m = { ...STATEFUL_DEFAULTS, ...input } as unknown as StatefulRuleRow;
          const row = await c.tx.one<{ id: string }>(sql`
            INSERT INTO stateful_alert_rules (name, description, enabled, priority, signal, match, group_by, threshold,
              window_seconds, bucket_seconds, cooldown_seconds, renotify_seconds, event, alert, inserted_at, updated_at)
            VALUES (${m.name}, ${m.description ?? null}, ${m.enabled}, ${m.priority}, ${m.signal},
              ${JSON.stringify(m.match)}::jsonb, ${m.group_by}::text[], ${m.threshold}, ${m.window_seconds},
              ${m.bucket_seconds}, ${m.cooldown_seconds}, ${m.renotify_seconds}, ${JSON.stringify(m.event)}::jsonb,
              ${JSON.stringify(m.alert)}::jsonb, ${c.now}, ${c.now})
            RETURNING id`);
          return { id: String(row?.id) };
        },
      },
      update: {
        access: { role: "operator" },
        // Validate the merged rule (bucket_seconds must divide window_seconds, …) before writing.
        handler: async (c, _actor, record, input) => {
          const cur = record?._row as StatefulRuleRow | undefined;
          if (!cur) throw new NotFoundError("stateful alert rule not found");
          const merged = { ...cur } as Record<string, unknown>;
          for (const k of STATEFUL_WRITABLE) if (input[k] !== undefined) merged[k] = input[k];
          validateStatefulRule(merged as StatefulRuleInput);
          const m = merged as unknown as StatefulRuleRow;
          await c.tx.query(sql`
            UPDATE stateful_alert_rules SET name = ${m.name}, description = ${m.description}, enabled = ${m.enabled},
              priority = ${m.priority}, signal = ${m.signal}, match = ${JSON.stringify(m.match)}::jsonb,
              group_by = ${m.group_by}::text[], threshold = ${m.threshold}, window_seconds = ${m.window_seconds},
              bucket_seconds = ${m.bucket_seconds}, cooldown_seconds = ${m.cooldown_seconds},
              renotify_seconds = ${m.renotify_seconds}, event = ${JSON.stringify(m.event)}::jsonb,
              alert = ${JSON.stringify(m.alert)}::jsonb, updated_at = ${c.now}
            WHERE id = ${cur.id}`);
        },
      },
      delete: { access: { role: "operator" } },
    },
    hooks: {
      beforeCreate: (_c, _actor, input) =>
        validateStatefulRule({ ...STATEFUL_DEFAULTS, ...input } as unknown as StatefulRuleInput),
      afterWrite: (c) => bumpStatefulRuleVersion(c.tx),
      afterCommit: (app) => invalidateStatefulRuleCache(app.db),
    },
    touchColumn: "updated_at",
  }),
);
