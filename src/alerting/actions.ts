/**
 * Alert lifecycle operations for callers outside HTTP (CLI, MCP, jobs, tests): each runs the
 * alert resource's declared action through the action runner, so its policy, transition check
 * and notification hooks are exactly those of `POST /api/v2/alerts/{id}/acknowledge` and kin.
 */
import { type Actor, SYSTEM_ACTOR } from "../access/actor.ts";
import { runAction } from "../jsonapi/engine/actions.ts";
import type { AppContext } from "../kernel/context.ts";
import { InvalidTransitionError } from "../kernel/errors.ts";
import { sql } from "../storage/sql.ts";
import { canTransition, findOpenIncident, type TriggerAlertInput } from "./lifecycle.ts";
import { alertResource } from "./resources/alerts.ts";
import type { AlertRow } from "./types.ts";

async function act(
  ctx: AppContext,
  actor: Actor | null,
  action: string,
  id: string | null,
  input: object = {},
): Promise<AlertRow> {
  const out = await runAction(ctx, actor, alertResource.type, action, {
    id,
    input: input as Record<string, unknown>,
  });
  const row = await ctx.db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${out.id}`);
  if (!row) throw new Error(`alert ${action}: no alert ${out.id} after the action`);
  return row;
}

export const triggerAlert = (ctx: AppContext, actor: Actor | null, input: TriggerAlertInput) =>
  act(ctx, actor, "create", null, input);

export const acknowledgeAlert = (
  ctx: AppContext,
  actor: Actor | null,
  id: string,
  input: { acknowledged_by?: string; note?: string } = {},
) => act(ctx, actor, "acknowledge", id, input);

export const resolveAlert = (
  ctx: AppContext,
  actor: Actor | null,
  id: string,
  input: { resolved_by?: string; resolution_note?: string } = {},
) => act(ctx, actor, "resolve", id, input);

export const escalateAlert = (
  ctx: AppContext,
  actor: Actor | null,
  id: string,
  input: { reason?: string } = {},
) => act(ctx, actor, "escalate", id, input);

export const suppressAlert = (
  ctx: AppContext,
  actor: Actor | null,
  id: string,
  input: { until?: string | Date } = {},
) => act(ctx, actor, "suppress", id, input);

export const reopenAlert = (ctx: AppContext, actor: Actor | null, id: string) =>
  act(ctx, actor, "reopen", id);

// ---------------------------------------------------------------------------------------------
// Jobs: the notifier's escalation steps, incident resolution by rules and checks, auto-escalation.
// They act as the system actor through the same actions.

/**
 * Escalation by the notification policy (a later step fired while unacknowledged): a pending
 * or acknowledged alert is escalated; an already escalated one only has its level raised.
 */
export async function recordPolicyEscalation(
  ctx: AppContext,
  id: string,
  level: number,
  reason: string,
): Promise<AlertRow | null> {
  const current = await ctx.db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${id}`);
  if (!current) return null;
  if (canTransition("escalate", current.status)) {
    return escalateAlert(ctx, SYSTEM_ACTOR, id, { reason });
  }
  if (current.status === "escalated") {
    const now = ctx.now();
    return (
      (await ctx.db.one<AlertRow>(sql`
        UPDATE alerts SET escalation_level = GREATEST(escalation_level, ${level}), escalation_reason = ${reason},
          updated_at = ${now}
        WHERE id = ${id} AND status = 'escalated' RETURNING *`)) ?? null
    );
  }
  return null;
}

/** Resolve the open alert of an incident (if any) as the system. */
export async function resolveIncident(
  ctx: AppContext,
  incidentKey: string,
  input: { resolved_by?: string; resolution_note?: string } = {},
): Promise<AlertRow | null> {
  const open = await findOpenIncident(ctx.db, incidentKey);
  if (!open) return null;
  try {
    return await resolveAlert(ctx, SYSTEM_ACTOR, open.id, {
      resolved_by: input.resolved_by ?? "system",
      ...input,
    });
  } catch (err) {
    if (err instanceof InvalidTransitionError) return null; // resolved concurrently
    throw err;
  }
}

/** Pending critical/emergency alerts older than this are escalated automatically (reference 2.4). */
export const AUTO_ESCALATE_AFTER_SECONDS = 30 * 60;

/**
 * The auto-escalation job: pending alerts of severity critical or emergency triggered more than
 * 30 minutes ago are escalated by the system. Returns the escalated alerts.
 */
export async function autoEscalate(ctx: AppContext, limit = 500): Promise<AlertRow[]> {
  const cutoff = new Date(ctx.now().getTime() - AUTO_ESCALATE_AFTER_SECONDS * 1000);
  const due = await ctx.db.many<{ id: string }>(sql`
    SELECT id FROM alerts
    WHERE status = 'pending' AND severity IN ('critical', 'emergency') AND triggered_at < ${cutoff}
    ORDER BY triggered_at LIMIT ${limit}`);
  const out: AlertRow[] = [];
  for (const { id } of due) {
    try {
      out.push(await escalateAlert(ctx, SYSTEM_ACTOR, id, { reason: "unacknowledged for 30 minutes" }));
    } catch (err) {
      if (!(err instanceof InvalidTransitionError)) throw err; // changed concurrently
    }
  }
  return out;
}
