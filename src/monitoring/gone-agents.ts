import { SYSTEM_ACTOR } from "../access/actor.ts";
import { clearAlertsFor, raiseAlert } from "../alerting/raise.ts";
import type { AppContext } from "../kernel/context.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { describeLabels } from "./labels.ts";
import { canRetry, type PollJobStatus, transitionJob } from "./poll-job-state.ts";

/**
 * Jobs held for an agent that is gone (issue 13: "a job whose agent is gone is failed and
 * retried elsewhere, or marked unknown with a reason, within a bounded time").
 *
 * Runs in the leader's liveness sweep right after silent agents are marked disconnected, so the
 * bound is the heartbeat timeout plus one sweep period. A job claimed by the dead agent is
 * failed; when its checks may run anywhere it is retried (another agent claims it). A job whose
 * checks are pinned to the dead agent cannot run anywhere else: it is ended, its checks show
 * `unknown` with the reason (never their last success), and each such check opens an
 * "unplaceable" alert, resolved once the agent is back or the check is moved.
 *
 * An agent that never registered gets the heartbeat timeout from the job's creation as grace,
 * so a check can be created before its agent is installed.
 *
 * A job the scheduler gave to its own embedded agent only because its checks name no agent
 * (`metadata.default_placement`, NETMON_UNASSIGNED_CHECKS=embedded) is not pinned: when that
 * agent is gone — typically a replica that led and was killed, its agent holding the runs — the
 * job moves to the current leader's default agent (`defaultAgentUid`; none: any agent), a
 * started one failed and retried, a pending one (e.g. retried by the reaper) just re-targeted.
 * Ending these as unknown with a "cannot run" alert, as before, meant every kill of a leading
 * replica showed its in-flight checks as unknown and raised an alert naming "gateway null",
 * although the new leader's agent could run them (found by test/reliability/poll-kill.test.ts).
 */
const ALIVE = ["connecting", "connected", "degraded"];
const GATEWAY_ALIVE = ["healthy", "degraded", "recovering"];

const DEFAULT_PLACED = JSON.stringify({ default_placement: true });

type HeldJob = {
  id: string;
  status: PollJobStatus;
  agent: string;
  agent_status: string | null;
  pinned: boolean;
  /** Placed on an agent by default (see above): may move to the current default agent. */
  movable: boolean;
};

export async function endJobsOfGoneAgents(
  ctx: AppContext,
  heartbeatTimeoutSeconds: number,
  opts: { defaultAgentUid?: string } = {},
): Promise<{ retried: number; ended: number; alerted: number }> {
  const now = ctx.now();
  const graceCutoff = new Date(now.getTime() - heartbeatTimeoutSeconds * 1000);
  const moveTo = opts.defaultAgentUid ?? null;
  const held = await ctx.db.many<HeldJob>(sql`
    SELECT j.id, j.status, COALESCE(j.agent_id, j.target_agent_uid) AS agent, ag.status AS agent_status,
           (j.target_agent_uid IS NOT NULL AND NOT p.by_default) AS pinned,
           (p.by_default AND j.target_agent_uid IS DISTINCT FROM ${moveTo}::text) AS movable
    FROM poll_jobs j
      CROSS JOIN LATERAL (SELECT COALESCE(j.metadata @> ${DEFAULT_PLACED}::jsonb, false) AS by_default) p
      LEFT JOIN agents ag ON ag.uid = COALESCE(j.agent_id, j.target_agent_uid)
    WHERE j.status IN ('pending', 'dispatching', 'running')
      AND COALESCE(j.agent_id, j.target_agent_uid) IS NOT NULL
      AND (ag.status IS NULL AND j.inserted_at < ${graceCutoff}
           OR ag.status IS NOT NULL AND NOT (ag.status = ANY(${ALIVE}::text[])))
    LIMIT 1000`);
  let retried = 0;
  let ended = 0;
  const unplaceable = new Map<string, string>();
  for (const h of held) {
    const why =
      h.agent_status === null
        ? `agent ${h.agent} is not registered`
        : `agent ${h.agent} is ${h.agent_status}`;
    try {
      const released = await ctx.db.transaction(async (tx) => {
        if (h.status === "pending" && h.movable) {
          await retarget(tx, h.id, moveTo, now);
          return [];
        }
        if (h.status === "pending") {
          const job = await transitionJob(tx, h.id, { op: "cancel", reason: why }, now);
          return releaseAsUnknown(tx, job.id, why, now);
        }
        const job = await transitionJob(
          tx,
          h.id,
          { op: "fail", errorMessage: why, errorCode: "AGENT_UNAVAILABLE" },
          now,
        );
        if (!h.pinned && canRetry(job)) {
          await transitionJob(tx, job.id, { op: "retry" }, now);
          if (h.movable) await retarget(tx, job.id, moveTo, now);
          return [];
        }
        return releaseAsUnknown(tx, job.id, why, now);
      });
      if (released.length === 0) retried++;
      else ended++;
      for (const id of released) if (h.pinned) unplaceable.set(id, why);
    } catch (err) {
      ctx.log.debug({ err, job: h.id }, "job changed while ending it for a gone agent");
    }
  }
  // Jobs placed on a gateway that cannot take them (offline, drained, in maintenance, or never
  // registered after the grace) wait for nothing: end them the same way.
  const stranded = await ctx.db.many<{ id: string; gateway: string; gateway_status: string | null }>(sql`
    SELECT j.id, j.target_gateway_id AS gateway, g.status AS gateway_status
    FROM poll_jobs j LEFT JOIN gateways g ON g.gateway_id = j.target_gateway_id
    WHERE j.status = 'pending' AND j.target_gateway_id IS NOT NULL
      AND (g.status IS NULL AND j.inserted_at < ${graceCutoff}
           OR g.status IS NOT NULL AND NOT (g.status = ANY(${GATEWAY_ALIVE}::text[])))
    LIMIT 1000`);
  for (const j of stranded) {
    const why =
      j.gateway_status === null
        ? `gateway ${j.gateway} is not registered`
        : `gateway ${j.gateway} is ${j.gateway_status}`;
    try {
      const released = await ctx.db.transaction(async (tx) => {
        const job = await transitionJob(tx, j.id, { op: "cancel", reason: why }, now);
        return releaseAsUnknown(tx, job.id, why, now);
      });
      ended++;
      for (const id of released) unplaceable.set(id, why);
    } catch (err) {
      ctx.log.debug({ err, job: j.id }, "job changed while ending it for a gone gateway");
    }
  }
  // Pooled jobs (agent_labels) wait for nothing when no live agent carries the labels: the same
  // grace as an unregistered agent, then ended the same way. Labels can be set after the check.
  const unpooled = await ctx.db.many<{
    id: string;
    labels: Record<string, string>;
    gateway: string | null;
  }>(sql`
    SELECT j.id, j.target_agent_labels AS labels, j.target_gateway_id AS gateway
    FROM poll_jobs j
    WHERE j.status = 'pending' AND j.target_agent_labels IS NOT NULL AND j.inserted_at < ${graceCutoff}
      AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.status = ANY(${ALIVE}::text[])
                        AND a.labels @> j.target_agent_labels
                        AND (j.target_gateway_id IS NULL OR a.gateway_id = j.target_gateway_id))
    LIMIT 1000`);
  for (const j of unpooled) {
    const why = `no connected agent${j.gateway ? ` of gateway ${j.gateway}` : ""} has the labels ${describeLabels(j.labels)}`;
    try {
      const released = await ctx.db.transaction(async (tx) => {
        const job = await transitionJob(tx, j.id, { op: "cancel", reason: why }, now);
        return releaseAsUnknown(tx, job.id, why, now);
      });
      ended++;
      for (const id of released) unplaceable.set(id, why);
    } catch (err) {
      ctx.log.debug({ err, job: j.id }, "job changed while ending it for an empty pool");
    }
  }
  let alerted = 0;
  for (const [checkId, why] of unplaceable) {
    const check = await ctx.db.one<{
      name: string;
      device_uid: string | null;
      agent_uid: string | null;
      gateway_id: string | null;
      agent_labels: Record<string, string> | null;
    }>(
      sql`SELECT name, device_uid, agent_uid, gateway_id, agent_labels FROM service_checks WHERE id = ${checkId}`,
    );
    if (!check) continue;
    const where = check.agent_uid
      ? `agent ${check.agent_uid}`
      : check.agent_labels
        ? `the agents labelled ${describeLabels(check.agent_labels)}`
        : `gateway ${check.gateway_id}`;
    const { created } = await raiseAlert(
      ctx,
      {
        title: `${check.name}: cannot run, ${why}`,
        description: `The check is placed on ${where}, and ${why}. Its status is unknown until that returns or the check is moved.`,
        severity: "warning",
        service_check_id: checkId,
        device_uid: check.device_uid,
        agent_uid: check.agent_uid,
        reason: "unplaceable",
      },
      SYSTEM_ACTOR,
    );
    if (created) alerted++;
  }
  return { retried, ended, alerted };
}

/**
 * Move a pending job placed by default to another agent (null: any agent). Not a status change,
 * so not the state machine's business; `status = 'pending'` guards against a concurrent claim.
 */
async function retarget(tx: Queryable, jobId: string, agentUid: string | null, now: Date): Promise<void> {
  await tx.query(sql`
    UPDATE poll_jobs SET target_agent_uid = ${agentUid}, updated_at = ${now}
    WHERE id = ${jobId} AND status = 'pending'`);
}

/** End a job's hold on its checks and show them `unknown` with the reason; returns their ids. */
async function releaseAsUnknown(tx: Queryable, jobId: string, why: string, now: Date): Promise<string[]> {
  await tx.query(sql`UPDATE network_sweeps SET inflight_job_id = NULL WHERE inflight_job_id = ${jobId}`);
  // consecutive_failures is left alone: the target did not fail, netmon could not look.
  const rows = await tx.many<{ id: string }>(sql`
    UPDATE service_checks SET inflight_job_id = NULL,
      last_check_at = ${now}, last_result = 'unknown', last_error = ${`not run: ${why}`},
      last_response_time_ms = NULL, updated_at = ${now}
    WHERE inflight_job_id = ${jobId}
    RETURNING id`);
  return rows.map((r) => r.id);
}

/** Resolve "unplaceable" alerts of checks whose agent, gateway or pool is alive again, or no longer pinned. */
export async function clearPlaceableAlerts(ctx: AppContext): Promise<number> {
  const back = await ctx.db.many<{ id: string }>(sql`
    SELECT c.id FROM service_checks c
    WHERE EXISTS (SELECT 1 FROM alerts a WHERE a.incident_key = 'service_check:' || c.id || ':unplaceable'
                    AND a.status IN ('pending', 'acknowledged', 'escalated'))
      AND (c.agent_uid IS NULL OR EXISTS (SELECT 1 FROM agents ag
             WHERE ag.uid = c.agent_uid AND ag.status = ANY(${ALIVE}::text[])))
      AND (c.agent_uid IS NOT NULL OR c.gateway_id IS NULL OR EXISTS (SELECT 1 FROM gateways g
             WHERE g.gateway_id = c.gateway_id AND g.status = ANY(${GATEWAY_ALIVE}::text[])))
      AND (c.agent_uid IS NOT NULL OR c.agent_labels IS NULL OR EXISTS (SELECT 1 FROM agents ag
             WHERE ag.status = ANY(${ALIVE}::text[]) AND ag.labels @> c.agent_labels
               AND (c.gateway_id IS NULL OR ag.gateway_id = c.gateway_id)))`);
  let n = 0;
  for (const c of back) {
    n += (
      await clearAlertsFor(ctx, {
        serviceCheckId: c.id,
        reason: "unplaceable",
        resolutionNote: "the check can run again",
      })
    ).length;
  }
  return n;
}
