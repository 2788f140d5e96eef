import { SYSTEM_ACTOR } from "../access/actor.ts";
import { resolveIncident } from "../alerting/actions.ts";
import { raiseAlert } from "../alerting/raise.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";

/**
 * Watch the watchers (issue 13): a gateway or agent that stops heartbeating opens a critical
 * alert — its checks are not running, and a dashboard of stale successes would say otherwise —
 * and the alert resolves itself when heartbeats resume. A gateway that drains on purpose, or an
 * agent that disconnects cleanly, is not "silent" and raises nothing.
 */
export const livenessKey = (kind: "gateway" | "agent", id: string) => `${kind}:${id}:heartbeat`;

export async function raiseSilenceAlerts(
  ctx: AppContext,
  silent: { gateways: string[]; agents: string[] },
  timeoutSeconds: number,
): Promise<void> {
  for (const id of silent.gateways) {
    await raiseAlert(
      ctx,
      {
        title: `Gateway ${id} stopped heartbeating`,
        description: `No heartbeat for more than ${timeoutSeconds} s: the checks of its agents are not running.`,
        severity: "critical",
        source_type: "gateway",
        source_id: id,
        incident_key: livenessKey("gateway", id),
        reason: "heartbeat_timeout",
      },
      SYSTEM_ACTOR,
    );
  }
  for (const uid of silent.agents) {
    await raiseAlert(
      ctx,
      {
        title: `Agent ${uid} stopped heartbeating`,
        description: `No heartbeat for more than ${timeoutSeconds} s: its checks are not running.`,
        severity: "critical",
        source_type: "agent",
        source_id: uid,
        agent_uid: uid,
        incident_key: livenessKey("agent", uid),
        reason: "heartbeat_timeout",
      },
      SYSTEM_ACTOR,
    );
  }
}

/** Resolve the silence alerts of gateways and agents that are heartbeating again. */
export async function clearRecoveredSilenceAlerts(ctx: AppContext): Promise<number> {
  const back = await ctx.db.many<{ incident_key: string }>(sql`
    SELECT a.incident_key FROM alerts a
    WHERE a.status IN ('pending', 'acknowledged', 'escalated')
      AND a.incident_key LIKE '%:heartbeat'
      AND (
        (a.source_type = 'gateway' AND EXISTS (SELECT 1 FROM gateways g
           WHERE g.gateway_id = a.source_id AND g.status IN ('healthy', 'degraded')))
        OR (a.source_type = 'agent' AND EXISTS (SELECT 1 FROM agents ag
           WHERE ag.uid = a.source_id AND ag.status IN ('connected', 'degraded')))
      )`);
  let n = 0;
  for (const { incident_key } of back) {
    const done = await resolveIncident(ctx, incident_key, {
      resolved_by: "system",
      resolution_note: "heartbeats resumed",
    });
    if (done) n++;
  }
  return n;
}
