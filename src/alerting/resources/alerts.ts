/**
 * JSON:API declaration of alerts (type `alert`, base `/alerts`): spec 2.3, 3, 4.1 and
 * reference 2.4. Status changes go through src/alerting/lifecycle.ts (the one state machine);
 * notification routing runs after commit through the lifecycle listeners.
 */
import type { Actor } from "../../access/actor.ts";
import { defineResource, type HookEvent } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import type { AppContext } from "../../kernel/context.ts";
import { sql } from "../../storage/sql.ts";
import { publishK8sNodeReadiness } from "../k8s.ts";
import {
  ALERT_STATE_MACHINE,
  type AlertLifecycleEvent,
  applyAcknowledge,
  applyEscalate,
  applyReopen,
  applyResolve,
  applySuppress,
  emitAlertLifecycle,
  insertAlert,
  type TriggerAlertInput,
} from "../lifecycle.ts";
import {
  ALERT_SEVERITIES,
  ALERT_SOURCE_TYPES,
  ALERT_STATUSES,
  type AlertRow,
  COMPARISONS,
} from "../types.ts";

const VIEW = { permission: "observability.alerts.view" } as const;
const MANAGE = { permission: "observability.alerts.manage" } as const;
const ACK = { permission: "alerts.acknowledge" } as const;

/** Operations that change an alert's status; listeners (notification routing) hear each after commit. */
const LIFECYCLE_OPERATIONS: ReadonlySet<string> = new Set([
  "acknowledge",
  "resolve",
  "escalate",
  "suppress",
  "reopen",
]);
const ADMIN = { role: "admin" } as const;

async function afterCommit(app: AppContext, _actor: Actor, ev: HookEvent): Promise<void> {
  let event: AlertLifecycleEvent | null = null;
  if (ev.action === "create") event = "trigger";
  else if (ev.action === "operation" && LIFECYCLE_OPERATIONS.has(ev.operation)) {
    event = ev.operation as AlertLifecycleEvent;
  }
  const id = ev.record?.id;
  if (!event || !id) return;
  const row = await app.db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${id}`);
  if (row) await emitAlertLifecycle(app, event, row);
}

const k8sArgs = {
  cluster_id: { type: "string", required: true, maxLength: 255 },
  node: { type: "string", required: true, maxLength: 255 },
  role: { type: "string", maxLength: 64, description: '"control-plane"; any other value becomes "worker"' },
} as const;

export const alertResource = registerResource(
  defineResource({
    type: "alert",
    base: "/alerts",
    table: "alerts",
    tag: "alert",
    description: "Alerts and their lifecycle (pending → acknowledged/escalated/suppressed → resolved)",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      title: { type: "string", required: true, nullable: false, maxLength: 1000 },
      description: { type: "string", create: true, maxLength: 10000 },
      severity: { type: "enum", values: ALERT_SEVERITIES, default: "warning", create: true, nullable: false },
      status: { type: "enum", values: ALERT_STATUSES, nullable: false },
      source_type: { type: "enum", values: ALERT_SOURCE_TYPES, create: true },
      source_id: { type: "string", create: true, maxLength: 1000 },
      service_check_id: { type: "uuid", create: true },
      device_uid: { type: "string", create: true, maxLength: 1000 },
      agent_uid: { type: "string", create: true, maxLength: 1000 },
      event_id: { type: "uuid", create: true },
      event_time: { type: "any", create: true, description: "related OCSF event timestamp" },
      metric_name: { type: "string", create: true, maxLength: 1000 },
      metric_value: { type: "float", create: true },
      threshold_value: { type: "float", create: true },
      comparison: { type: "enum", values: COMPARISONS, create: true },
      triggered_at: { type: "datetime", nullable: false },
      acknowledged_at: { type: "datetime" },
      acknowledged_by: { type: "string" },
      resolved_at: { type: "datetime" },
      resolved_by: { type: "string" },
      resolution_note: { type: "string" },
      escalated_at: { type: "datetime" },
      escalation_level: { type: "integer", nullable: false },
      escalation_reason: { type: "string" },
      notification_count: { type: "integer", nullable: false },
      last_notification_at: { type: "datetime" },
      suppressed_until: { type: "datetime" },
      metadata: { type: "object", create: true, default: {}, nullable: false },
      tags: { type: "array", items: "string", create: true, default: [], nullable: false, filterable: false },
      created_at: { type: "datetime", public: false },
      updated_at: { type: "datetime", public: false },
    },
    defaultSort: "-triggered_at,-id",
    pagination: { styles: ["offset", "keyset"], defaultLimit: 100, maxLimit: 1000 },
    stateMachine: ALERT_STATE_MACHINE,
    collections: [
      {
        name: "active",
        path: "/active",
        summary: "Non-resolved alerts: pending, acknowledged, escalated (no page)",
        paginate: false,
        maxRows: 1000,
        where: ({ col }) => sql`${col("status")} IN ('pending', 'acknowledged', 'escalated')`,
      },
      {
        name: "pending",
        path: "/pending",
        summary: "Alerts awaiting acknowledgement",
        paginate: { styles: ["keyset", "offset"], defaultLimit: 100, maxLimit: 1000 },
        where: ({ col }) => sql`${col("status")} = 'pending'`,
      },
    ],
    policies: { read: { access: VIEW } },
    actions: {
      create: {
        access: MANAGE,
        summary: "Trigger an alert (starts pending)",
        handler: async (c, _actor, _record, input) => {
          const row = await insertAlert(c.tx, c.now, input as unknown as TriggerAlertInput);
          return { id: row.id };
        },
      },
    },
    operations: [
      {
        name: "acknowledge",
        path: "/acknowledge",
        access: ACK,
        summary: "Acknowledge (from pending or escalated); acknowledged_by defaults to the caller",
        arguments: {
          acknowledged_by: { type: "string", maxLength: 1000 },
          note: { type: "string", maxLength: 10000 },
        },
        handler: async (c, actor, record, input) => {
          await applyAcknowledge(c.tx, c.now, actor, String(record?.id), {
            acknowledged_by: input.acknowledged_by as string | undefined,
            note: input.note as string | undefined,
          });
        },
      },
      {
        name: "resolve",
        path: "/resolve",
        access: ACK,
        summary: "Resolve (from pending, acknowledged or escalated)",
        arguments: {
          resolved_by: { type: "string", maxLength: 1000 },
          resolution_note: { type: "string", maxLength: 10000 },
        },
        handler: async (c, actor, record, input) => {
          await applyResolve(c.tx, c.now, actor, String(record?.id), {
            resolved_by: input.resolved_by as string | undefined,
            resolution_note: input.resolution_note as string | undefined,
          });
        },
      },
      // By hand, admins only, and without a v2 route (spec 4.1 names acknowledge and resolve):
      // run through the action runner by the CLI, MCP and domain code.
      {
        name: "escalate",
        access: ADMIN,
        summary: "Escalate (from pending or acknowledged); the escalation level rises by one",
        arguments: { reason: { type: "string", maxLength: 10000 } },
        handler: async (c, _actor, record, input) => {
          await applyEscalate(c.tx, c.now, String(record?.id), {
            reason: input.reason as string | undefined,
          });
        },
      },
      {
        name: "suppress",
        access: ADMIN,
        summary: "Suppress (from pending, acknowledged or escalated) until a time, or indefinitely",
        arguments: { until: { type: "datetime" } },
        handler: async (c, _actor, record, input) => {
          await applySuppress(c.tx, c.now, String(record?.id), {
            until: input.until as string | Date | undefined,
          });
        },
      },
      {
        name: "reopen",
        access: ADMIN,
        summary: "Reopen (from resolved or suppressed) back to pending",
        handler: async (c, _actor, record) => {
          await applyReopen(c.tx, c.now, String(record?.id));
        },
      },
      {
        name: "k8s-node-not-ready-test",
        path: "/k8s-node-not-ready-test",
        method: "POST",
        target: "collection",
        bodyStyle: "data",
        access: MANAGE,
        transaction: false,
        summary: "Emit a node.not_ready internal log (opens an incident through the event-rule path)",
        arguments: k8sArgs,
        handler: async (c, _actor, _record, input) => {
          const { promotion: _p, ...out } = await publishK8sNodeReadiness(c.app, false, input);
          return { raw: out };
        },
      },
      {
        name: "k8s-node-ready-test",
        path: "/k8s-node-ready-test",
        method: "POST",
        target: "collection",
        bodyStyle: "data",
        access: MANAGE,
        transaction: false,
        summary: "Emit a node.ready internal log (clears the open incident of that node)",
        arguments: k8sArgs,
        handler: async (c, _actor, _record, input) => {
          const { promotion: _p, ...out } = await publishK8sNodeReadiness(c.app, true, input);
          return { raw: out };
        },
      },
    ],
    hooks: { afterCommit },
  }),
);
