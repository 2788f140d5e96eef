import { SYSTEM_ACTOR } from "../access/actor.ts";
import { clearAlertsFor, raiseAlert } from "../alerting/raise.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";

/**
 * A check whose result is overdue must never keep showing its last success (issue 13). "Overdue"
 * is no result for three intervals, and at least the interval plus two minutes (room for a
 * slow job, a retry and a scheduler hand-over). The API marks such checks `is_stale`; the
 * leader opens a warning alert naming the likely reason, and resolves it once results flow.
 */
export function overdueAfterSeconds(intervalSeconds: number): number {
  return Math.max(intervalSeconds * 3, intervalSeconds + 120);
}

export function isStale(
  row: {
    enabled?: unknown;
    interval_seconds?: unknown;
    last_check_at?: unknown;
    created_at?: unknown;
  },
  now = Date.now(),
): boolean {
  if (row.enabled !== true) return false;
  const last = row.last_check_at ?? row.created_at;
  const t = last instanceof Date ? last.getTime() : Date.parse(String(last));
  if (!Number.isFinite(t)) return false;
  return now - t > overdueAfterSeconds(Number(row.interval_seconds ?? 60)) * 1000;
}

type OverdueRow = {
  id: string;
  name: string;
  agent_uid: string | null;
  device_uid: string | null;
  last_check_at: Date | null;
  agent_status: string | null;
};

function why(c: OverdueRow): string {
  if (c.agent_uid && c.agent_status === null)
    return `it is pinned to agent ${c.agent_uid}, which is not registered`;
  if (c.agent_uid && c.agent_status !== "connected" && c.agent_status !== "degraded") {
    return `it is pinned to agent ${c.agent_uid}, which is ${c.agent_status}`;
  }
  return "no agent has returned a result for it";
}

export async function sweepOverdueChecks(
  ctx: AppContext,
  limit = 500,
): Promise<{ raised: number; cleared: number }> {
  const now = ctx.now();
  const overdue = await ctx.db.many<OverdueRow>(sql`
    SELECT c.id, c.name, c.agent_uid, c.device_uid, c.last_check_at, ag.status AS agent_status
    FROM service_checks c LEFT JOIN agents ag ON ag.uid = c.agent_uid
    WHERE c.enabled
      AND COALESCE(c.last_check_at, c.created_at)
        < ${now}::timestamptz - GREATEST(c.interval_seconds * 3, c.interval_seconds + 120) * interval '1 second'
    ORDER BY COALESCE(c.last_check_at, c.created_at)
    LIMIT ${limit}`);
  let raised = 0;
  for (const c of overdue) {
    const { created } = await raiseAlert(
      ctx,
      {
        title: `${c.name}: no result ${c.last_check_at ? "since " + c.last_check_at.toISOString() : "yet"}`,
        description: `The check is overdue: ${why(c)}. Its last result is stale.`,
        severity: "warning",
        service_check_id: c.id,
        device_uid: c.device_uid,
        agent_uid: c.agent_uid,
        reason: "overdue",
      },
      SYSTEM_ACTOR,
    );
    if (created) raised++;
  }
  // Results flow again (or the check no longer exists as overdue): resolve.
  const fresh = await ctx.db.many<{ id: string }>(sql`
    SELECT c.id FROM service_checks c
    WHERE EXISTS (SELECT 1 FROM alerts a WHERE a.incident_key = 'service_check:' || c.id || ':overdue'
                    AND a.status IN ('pending', 'acknowledged', 'escalated'))
      AND c.last_check_at
        >= ${now}::timestamptz - GREATEST(c.interval_seconds * 3, c.interval_seconds + 120) * interval '1 second'`);
  let cleared = 0;
  for (const c of fresh) {
    cleared += (
      await clearAlertsFor(ctx, {
        serviceCheckId: c.id,
        reason: "overdue",
        resolutionNote: "results arrive again",
      })
    ).length;
  }
  return { raised, cleared };
}
