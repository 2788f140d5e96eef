/**
 * The alert lifecycle: the ONE place alert status changes (reference 2.4).
 *
 *   trigger                         → pending
 *   acknowledge  pending, escalated → acknowledged  (acknowledged_at/by; by defaults to the caller)
 *   resolve      pending, acknowledged, escalated → resolved (resolved_at/by, resolution_note)
 *   escalate     pending, acknowledged → escalated  (escalated_at, escalation_reason, level + 1)
 *   suppress     pending, acknowledged, escalated → suppressed (suppressed_until)
 *   reopen       resolved, suppressed → pending
 *
 * An operation from any other state throws InvalidTransitionError (400) and changes nothing.
 * Every transition runs through the action runner's state writer (src/jsonapi/engine/transitions.ts)
 * in a transaction holding the alert's row lock, so concurrent operations serialise; listeners
 * (notification routing) run after commit.
 */
import type { Actor } from "../access/actor.ts";
import { stateTable, transitionRow } from "../jsonapi/engine/transitions.ts";
import {
  canTransition as canMachineTransition,
  defineStateMachine,
  type StateMachine,
} from "../jsonapi/state-machine.ts";
import type { AppContext } from "../kernel/context.ts";
import { ValidationError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import {
  ALERT_SEVERITIES,
  ALERT_SOURCE_TYPES,
  ALERT_STATUSES,
  type AlertRow,
  type AlertSeverity,
  type AlertSourceType,
  type AlertStatus,
  COMPARISONS,
  type Comparison,
} from "./types.ts";

export type AlertOperation = "acknowledge" | "resolve" | "escalate" | "suppress" | "reopen";

/** Allowed source states of each operation, and where it leads. */
export const ALERT_STATE_MACHINE: StateMachine<AlertStatus> = defineStateMachine<AlertStatus>({
  name: "alert",
  attribute: "status",
  states: ALERT_STATUSES,
  initial: ["pending"],
  transitions: {
    acknowledge: { from: ["pending", "escalated"], to: "acknowledged" },
    resolve: { from: ["pending", "acknowledged", "escalated"], to: "resolved" },
    escalate: { from: ["pending", "acknowledged"], to: "escalated" },
    suppress: { from: ["pending", "acknowledged", "escalated"], to: "suppressed" },
    reopen: { from: ["resolved", "suppressed"], to: "pending" },
  },
});

export function canTransition(op: AlertOperation, from: AlertStatus): boolean {
  return canMachineTransition(ALERT_STATE_MACHINE, op, from);
}

// ---------------------------------------------------------------------------------------------
// Listeners: notification routing subscribes to lifecycle changes (after commit).

/** `renotify`: a stateful rule still fires after its renotify interval (no status change). */
export type AlertLifecycleEvent = "trigger" | "renotify" | AlertOperation;
export type AlertListener = (
  ctx: AppContext,
  event: AlertLifecycleEvent,
  alert: AlertRow,
) => Promise<void> | void;

const listeners: AlertListener[] = [];

export function onAlertLifecycle(listener: AlertListener): () => void {
  listeners.push(listener);
  return () => {
    const i = listeners.indexOf(listener);
    if (i >= 0) listeners.splice(i, 1);
  };
}

export async function emitAlertLifecycle(
  ctx: AppContext,
  event: AlertLifecycleEvent,
  alert: AlertRow,
): Promise<void> {
  for (const l of listeners) {
    try {
      await l(ctx, event, alert);
    } catch (err) {
      ctx.log.error({ err, alert_id: alert.id, event }, "alert lifecycle listener failed");
    }
  }
}

function actorLabel(actor: Actor): string {
  if (actor.kind === "user") return actor.email ?? actor.id;
  return actor.id;
}

// ---------------------------------------------------------------------------------------------
// Trigger.

export interface TriggerAlertInput {
  title: string;
  description?: string | null;
  severity?: AlertSeverity;
  source_type?: AlertSourceType | null;
  source_id?: string | null;
  service_check_id?: string | null;
  device_uid?: string | null;
  agent_uid?: string | null;
  event_id?: string | null;
  event_time?: Date | string | null;
  metric_name?: string | null;
  metric_value?: number | null;
  threshold_value?: number | null;
  comparison?: Comparison | null;
  metadata?: Record<string, unknown> | null;
  tags?: string[] | null;
  /** Internal incident identity; at most one open alert per key. */
  incident_key?: string | null;
}

function validateTrigger(input: TriggerAlertInput): void {
  if (typeof input.title !== "string" || input.title.trim() === "") {
    throw new ValidationError("title is required", { source: { pointer: "/data/attributes/title" } });
  }
  if (input.severity !== undefined && !ALERT_SEVERITIES.includes(input.severity)) {
    throw new ValidationError(`severity must be one of ${ALERT_SEVERITIES.join(", ")}`, {
      source: { pointer: "/data/attributes/severity" },
    });
  }
  if (input.source_type != null && !ALERT_SOURCE_TYPES.includes(input.source_type)) {
    throw new ValidationError(`source_type must be one of ${ALERT_SOURCE_TYPES.join(", ")}`, {
      source: { pointer: "/data/attributes/source_type" },
    });
  }
  if (input.comparison != null && !COMPARISONS.includes(input.comparison)) {
    throw new ValidationError(`comparison must be one of ${COMPARISONS.join(", ")}`, {
      source: { pointer: "/data/attributes/comparison" },
    });
  }
}

function toDate(v: Date | string | null | undefined): Date | null {
  if (v == null) return null;
  const d = v instanceof Date ? v : new Date(v);
  if (Number.isNaN(d.getTime())) {
    throw new ValidationError("event_time must be a date-time", {
      source: { pointer: "/data/attributes/event_time" },
    });
  }
  return d;
}

/** Insert a pending alert inside an open transaction (no permission check, no listeners). */
export async function insertAlert(q: Queryable, now: Date, input: TriggerAlertInput): Promise<AlertRow> {
  validateTrigger(input);
  const row = await q.one<AlertRow>(sql`
    INSERT INTO alerts (title, description, severity, status, source_type, source_id, service_check_id,
      device_uid, agent_uid, event_id, event_time, metric_name, metric_value, threshold_value, comparison,
      triggered_at, metadata, tags, incident_key, created_at, updated_at)
    VALUES (${input.title}, ${input.description ?? null}, ${input.severity ?? "warning"}, 'pending',
      ${input.source_type ?? null}, ${input.source_id ?? null}, ${input.service_check_id ?? null},
      ${input.device_uid ?? null}, ${input.agent_uid ?? null}, ${input.event_id ?? null},
      ${toDate(input.event_time)}, ${input.metric_name ?? null}, ${input.metric_value ?? null},
      ${input.threshold_value ?? null}, ${input.comparison ?? null}, ${now},
      ${JSON.stringify(input.metadata ?? {})}::jsonb, ${input.tags ?? []}::text[], ${input.incident_key ?? null},
      ${now}, ${now})
    RETURNING *`);
  if (!row) throw new Error("alert insert returned no row");
  return row;
}

// ---------------------------------------------------------------------------------------------
// Transitions. `apply*` run on an open transaction (the JSON:API engine's, or a rule engine's
// batch) and do not notify listeners; they write through the action runner's state writer, which
// locks the alert, checks the transition against ALERT_STATE_MACHINE and guards the write.

/** The alerts table as its lifecycle writes it: the columns each transition may change. */
export const ALERT_STATES = stateTable({
  machine: ALERT_STATE_MACHINE,
  table: "alerts",
  key: "id",
  keyType: "uuid",
  touch: "updated_at",
  columns: {
    acknowledged_at: "timestamptz",
    acknowledged_by: "text",
    acknowledged_by_user_id: "uuid",
    acknowledge_note: "text",
    snooze_until: "timestamptz",
    resolved_at: "timestamptz",
    resolved_by: "text",
    resolution_note: "text",
    escalated_at: "timestamptz",
    escalation_reason: "text",
    escalation_level: "integer",
    suppressed_until: "timestamptz",
  },
});

const transition = (
  q: Queryable,
  now: Date,
  id: string,
  op: AlertOperation,
  changes: Record<string, unknown>,
) => transitionRow<AlertRow & Record<string, unknown>>(q, ALERT_STATES, id, op, changes, now);

export interface AcknowledgeInput {
  /** Who acknowledged; defaults to the caller. */
  acknowledged_by?: string | null;
  note?: string | null;
}

export function applyAcknowledge(
  q: Queryable,
  now: Date,
  actor: Actor,
  id: string,
  input: AcknowledgeInput = {},
): Promise<AlertRow> {
  const by = input.acknowledged_by?.trim() ? input.acknowledged_by.trim() : actorLabel(actor);
  return transition(q, now, id, "acknowledge", {
    acknowledged_at: now,
    acknowledged_by: by,
    acknowledged_by_user_id: actor.kind === "user" ? actor.id : null,
    acknowledge_note: input.note ?? null,
    snooze_until: null,
  });
}

export interface ResolveInput {
  resolved_by?: string | null;
  resolution_note?: string | null;
}

export function applyResolve(
  q: Queryable,
  now: Date,
  actor: Actor,
  id: string,
  input: ResolveInput = {},
): Promise<AlertRow> {
  const by = input.resolved_by?.trim() ? input.resolved_by.trim() : actorLabel(actor);
  return transition(q, now, id, "resolve", {
    resolved_at: now,
    resolved_by: by,
    resolution_note: input.resolution_note ?? null,
  });
}

export function applyEscalate(
  q: Queryable,
  now: Date,
  id: string,
  input: { reason?: string | null } = {},
): Promise<AlertRow> {
  return transition(q, now, id, "escalate", {
    escalated_at: now,
    escalation_reason: input.reason ?? null,
    escalation_level: sql`escalation_level + 1`,
  });
}

export function applySuppress(
  q: Queryable,
  now: Date,
  id: string,
  input: { until?: Date | string | null } = {},
): Promise<AlertRow> {
  return transition(q, now, id, "suppress", { suppressed_until: toDate(input.until) });
}

export function applyReopen(q: Queryable, now: Date, id: string): Promise<AlertRow> {
  return transition(q, now, id, "reopen", {
    resolved_at: null,
    resolved_by: null,
    suppressed_until: null,
  });
}

// ---------------------------------------------------------------------------------------------
// Incidents opened by rules and checks: one open alert per incident key.

/** The open alert of an incident, if any. */
export async function findOpenIncident(q: Queryable, incidentKey: string): Promise<AlertRow | undefined> {
  return q.one<AlertRow>(sql`
    SELECT * FROM alerts WHERE incident_key = ${incidentKey}
      AND status IN ('pending', 'acknowledged', 'escalated')
    LIMIT 1`);
}

/**
 * Open an incident alert unless one is already open for the key. Returns the alert and
 * whether it was created now. Safe under concurrency (the partial unique index decides).
 */
export async function openIncident(
  ctx: AppContext,
  input: TriggerAlertInput & { incident_key: string },
): Promise<{ alert: AlertRow; created: boolean }> {
  const existing = await findOpenIncident(ctx.db, input.incident_key);
  if (existing) return { alert: existing, created: false };
  try {
    const alert = await insertAlert(ctx.db, ctx.now(), input);
    await emitAlertLifecycle(ctx, "trigger", alert);
    return { alert, created: true };
  } catch (err) {
    const again = await findOpenIncident(ctx.db, input.incident_key);
    if (again) return { alert: again, created: false };
    throw err;
  }
}
