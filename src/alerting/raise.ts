/**
 * Entry points for other domains (monitoring) that open and clear alerts as the system:
 * a check crossing `critical_threshold_ms` or accumulating consecutive failures.
 * One open alert per (service check, reason): raising again while it is open is a no-op.
 */
import type { Actor } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";
import { resolveIncident } from "./actions.ts";
import { openIncident, type TriggerAlertInput } from "./lifecycle.ts";
import type { AlertRow } from "./types.ts";

export interface RaiseAlertInput extends Omit<TriggerAlertInput, "incident_key"> {
  /**
   * Identity of the condition, e.g. "consecutive_failures" or "critical_threshold". With
   * `service_check_id` it forms the incident key; raising the same condition twice while
   * the alert is open returns the open alert.
   */
  reason?: string;
  /** Explicit incident key (overrides service_check_id + reason). */
  incident_key?: string;
}

export function incidentKeyFor(input: {
  service_check_id?: string | null;
  reason?: string;
  incident_key?: string;
}) {
  if (input.incident_key) return input.incident_key;
  if (input.service_check_id) return `service_check:${input.service_check_id}:${input.reason ?? "failing"}`;
  return null;
}

/**
 * Open an alert as the system (the caller's actor is recorded in metadata only). Returns the
 * alert and whether it was newly created.
 */
export async function raiseAlert(
  ctx: AppContext,
  input: RaiseAlertInput,
  actor?: Actor,
): Promise<{ alert: AlertRow; created: boolean }> {
  const key = incidentKeyFor(input);
  const { reason, incident_key: _ik, ...rest } = input;
  const base: TriggerAlertInput = {
    source_type: input.service_check_id ? "service_check" : (input.source_type ?? "system"),
    source_id: input.source_id ?? input.service_check_id ?? null,
    ...rest,
    metadata: {
      ...(input.metadata ?? {}),
      ...(reason ? { reason } : {}),
      ...(actor ? { raised_by: actor.id } : {}),
    },
  };
  if (!key) {
    return openIncident(ctx, { ...base, incident_key: `adhoc:${crypto.randomUUID()}` });
  }
  return openIncident(ctx, { ...base, incident_key: key });
}

/**
 * Resolve every open alert of a service check (all reasons, or one reason). Returns the
 * resolved alerts.
 */
export async function clearAlertsFor(
  ctx: AppContext,
  target: { serviceCheckId: string; reason?: string; resolutionNote?: string },
): Promise<AlertRow[]> {
  const keys = target.reason
    ? [`service_check:${target.serviceCheckId}:${target.reason}`]
    : (
        await ctx.db.many<{ incident_key: string }>(sql`
          SELECT incident_key FROM alerts
          WHERE service_check_id = ${target.serviceCheckId} AND incident_key IS NOT NULL
            AND status IN ('pending', 'acknowledged', 'escalated')`)
      ).map((r) => r.incident_key);
  const out: AlertRow[] = [];
  for (const key of keys) {
    const resolved = await resolveIncident(ctx, key, {
      resolved_by: "system",
      resolution_note: target.resolutionNote ?? "service check recovered",
    });
    if (resolved) out.push(resolved);
  }
  return out;
}
