/**
 * Poll-job dispatch and results on the core: claiming (FOR UPDATE SKIP LOCKED, priority
 * order), start, result recording (check fields, service_status, time series, alerts),
 * failure, and the reaper that times out stale jobs and retries them elsewhere. Every status
 * change goes through `transitionJob` (poll-job-state.ts).
 */
import { EventEmitter } from "node:events";
import { SYSTEM_ACTOR } from "../access/actor.ts";
import { clearAlertsFor, raiseAlert } from "../alerting/raise.ts";
import { ingestSightings, MAX_BATCH } from "../inventory/ingest.ts";
import type { AppContext } from "../kernel/context.ts";
import { InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import type { SnmpInterface } from "./checks/snmp-interfaces.ts";
import { CHECK_STATUSES, type CheckResult, type CheckSpec, FAILING_STATUSES } from "./checks/types.ts";
import { recordInterfaces } from "./interfaces.ts";
import { canRetry, type PollJobRow, transitionJob } from "./poll-job-state.ts";
import type { SweepHost, SweepSpec } from "./sweep.ts";

/** Consecutive failures at which a check opens an alert (and `/service-checks/failing` > 0). */
export const FAILURE_ALERT_THRESHOLD = 3;

export interface JobCheck extends CheckSpec {
  id: string;
  name: string;
  interval_seconds: number;
}

export interface JobPayload {
  id: string;
  schedule_id: string;
  timeout_seconds: number;
  target_agent_uid: string | null;
  due_at: string | null;
  retry_count: number;
  checks: JobCheck[];
  /** Present on network-sweep jobs. */
  sweep?: SweepSpec;
}

export interface SubmittedResult extends CheckResult {
  check_id: string;
  started_at?: string;
  finished_at?: string;
}

/** In-process wake-ups for long-polling claimers (other replicas poll on a short timer). */
const signals = new WeakMap<AppContext, EventEmitter>();
export function jobSignal(ctx: AppContext): EventEmitter {
  let e = signals.get(ctx);
  if (!e) {
    e = new EventEmitter();
    e.setMaxListeners(0);
    signals.set(ctx, e);
  }
  return e;
}

async function loadPayloads(q: Queryable, jobs: PollJobRow[]): Promise<JobPayload[]> {
  const ids = jobs.flatMap((j) => j.check_ids ?? []);
  const checks =
    ids.length === 0
      ? []
      : await q.many<JobCheck & Record<string, unknown>>(sql`
          SELECT id, name, check_type, target, port, timeout_seconds, interval_seconds, config,
                 warning_threshold_ms, critical_threshold_ms
          FROM service_checks WHERE id = ANY(${ids}::uuid[])`);
  const byId = new Map(checks.map((c) => [c.id, c]));
  return jobs.map((j) => ({
    id: j.id,
    schedule_id: j.schedule_id,
    timeout_seconds: j.timeout_seconds ?? 60,
    target_agent_uid: j.target_agent_uid,
    due_at: typeof j.metadata?.due_at === "string" ? j.metadata.due_at : null,
    retry_count: j.retry_count ?? 0,
    checks: (j.check_ids ?? [])
      .map((id) => byId.get(id))
      .filter((c): c is JobCheck & Record<string, unknown> => !!c),
    ...(j.metadata?.kind === "sweep" ? { sweep: j.metadata.sweep as SweepSpec } : {}),
  }));
}

/**
 * Claim up to `max` pending jobs for a gateway: highest priority first, then oldest; jobs
 * pinned to an agent only go to a gateway fronting that agent. Safe across replicas.
 */
export async function claimJobs(
  ctx: AppContext,
  opts: { gatewayId: string; agentUids: readonly string[]; max: number },
): Promise<JobPayload[]> {
  const now = ctx.now();
  const max = Math.max(1, Math.min(500, opts.max));
  return ctx.db.transaction(async (tx) => {
    const rows = await tx.many<{ id: string }>(sql`
      SELECT id FROM poll_jobs
      WHERE status = 'pending' AND available_at <= ${now}
        AND (target_agent_uid IS NULL OR target_agent_uid = ANY(${[...opts.agentUids]}::text[]))
      ORDER BY priority DESC, available_at, inserted_at
      LIMIT ${max} FOR UPDATE SKIP LOCKED`);
    const jobs: PollJobRow[] = [];
    for (const r of rows)
      jobs.push(await transitionJob(tx, r.id, { op: "dispatch", gatewayId: opts.gatewayId }, now));
    return loadPayloads(tx, jobs);
  });
}

/** Long-poll variant: waits up to `waitMs` for work (woken by the scheduler in this process). */
export async function claimJobsWait(
  ctx: AppContext,
  opts: {
    gatewayId: string;
    agentUids: readonly string[];
    max: number;
    waitMs: number;
    signal?: AbortSignal;
  },
): Promise<JobPayload[]> {
  const deadline = Date.now() + Math.max(0, Math.min(60_000, opts.waitMs));
  for (;;) {
    const jobs = await claimJobs(ctx, opts);
    if (jobs.length > 0 || Date.now() >= deadline || opts.signal?.aborted) return jobs;
    await new Promise<void>((resolve) => {
      const emitter = jobSignal(ctx);
      const done = () => {
        clearTimeout(t);
        emitter.off("jobs", done);
        opts.signal?.removeEventListener("abort", done);
        resolve();
      };
      // Other replicas' schedulers cannot wake us: re-check every second.
      const t = setTimeout(done, Math.min(1000, Math.max(0, deadline - Date.now())));
      emitter.on("jobs", done);
      opts.signal?.addEventListener("abort", done);
    });
  }
}

/** The gateway handed the job to an agent. */
export async function startJob(ctx: AppContext, jobId: string, agentId: string): Promise<PollJobRow> {
  return ctx.db.transaction((tx) => transitionJob(tx, jobId, { op: "start", agentId }, ctx.now()));
}

/** The gateway or agent could not run the job (no agent, agent refused…). */
export async function failJob(
  ctx: AppContext,
  jobId: string,
  error: { message: string; code: string },
): Promise<PollJobRow> {
  const now = ctx.now();
  const job = await ctx.db.transaction(async (tx) => {
    const failed = await transitionJob(
      tx,
      jobId,
      { op: "fail", errorMessage: error.message, errorCode: error.code },
      now,
    );
    return retryOrRelease(tx, failed, now);
  });
  jobSignal(ctx).emit("jobs");
  return job;
}

/** After a failure/timeout: retry (back to pending, with backoff) or release the checks. */
async function retryOrRelease(tx: Queryable, job: PollJobRow, now: Date): Promise<PollJobRow> {
  if (canRetry(job)) return transitionJob(tx, job.id, { op: "retry" }, now);
  const msg = job.error_message ?? "poll job failed";
  await tx.query(sql`UPDATE network_sweeps SET inflight_job_id = NULL WHERE inflight_job_id = ${job.id}`);
  await tx.query(sql`
    UPDATE service_checks SET inflight_job_id = NULL,
      last_check_at = ${now}, last_result = 'unknown', last_error = ${`${msg} after ${job.retry_count ?? 0} retries`},
      last_response_time_ms = NULL, consecutive_failures = consecutive_failures + 1, updated_at = ${now}
    WHERE inflight_job_id = ${job.id}`);
  return job;
}

interface CheckAfter {
  [k: string]: unknown;
  id: string;
  name: string;
  check_type: string;
  target: string;
  port: number | null;
  device_uid: string | null;
  agent_uid: string | null;
  critical_threshold_ms: number | null;
  consecutive_failures: number;
  prev_failures: number;
  prev_result: string | null;
}

function validResults(raw: unknown): SubmittedResult[] {
  if (!Array.isArray(raw))
    throw new InvalidRequestError("results must be an array", { source: { pointer: "/results" } });
  return raw.map((r, i) => {
    const o = r as Record<string, unknown>;
    if (
      !o ||
      typeof o.check_id !== "string" ||
      !(CHECK_STATUSES as readonly string[]).includes(String(o.status))
    ) {
      throw new InvalidRequestError(
        `results[${i}] needs check_id and a status (${CHECK_STATUSES.join(", ")})`,
        {
          source: { pointer: `/results/${i}` },
        },
      );
    }
    const rt = o.response_time_ms;
    return {
      check_id: o.check_id,
      status: o.status as SubmittedResult["status"],
      response_time_ms: typeof rt === "number" && Number.isFinite(rt) ? rt : null,
      error: typeof o.error === "string" ? o.error.slice(0, 4000) : undefined,
      metrics: o.metrics && typeof o.metrics === "object" ? (o.metrics as Record<string, number>) : undefined,
      details:
        o.details && typeof o.details === "object" ? (o.details as Record<string, unknown>) : undefined,
      started_at: typeof o.started_at === "string" ? o.started_at : undefined,
      finished_at: typeof o.finished_at === "string" ? o.finished_at : undefined,
    };
  });
}

/**
 * Record a job's results: complete the job, update every check (last_*, consecutive
 * failures), append service_status rows and time series, then raise/clear alerts.
 * Results for checks not in the job are ignored.
 */
export async function completeJob(
  ctx: AppContext,
  jobId: string,
  submission: { agentId: string; gatewayId?: string | null; results: unknown; sweepHosts?: unknown },
): Promise<{ job: PollJobRow; recorded: number }> {
  const results = validResults(submission.results);
  const now = ctx.now();
  const { job, after, recorded } = await ctx.db.transaction(async (tx) => {
    const found = await tx.one<PollJobRow & Record<string, unknown>>(
      sql`SELECT * FROM poll_jobs WHERE id = ${jobId} FOR UPDATE`,
    );
    if (!found) throw new NotFoundError(`poll job ${jobId} not found`);
    let job: PollJobRow = found;
    if (job.status === "dispatching")
      job = await transitionJob(tx, jobId, { op: "start", agentId: submission.agentId }, now);
    const inJob = new Set(job.check_ids ?? []);
    const mine = results.filter((r) => inJob.has(r.check_id));
    const success = mine.filter((r) => !FAILING_STATUSES.has(r.status)).length;
    const completed = await transitionJob(
      tx,
      jobId,
      {
        op: "complete",
        successCount: success,
        failureCount: mine.length - success,
        results: mine.map((r) => ({
          check_id: r.check_id,
          status: r.status,
          response_time_ms: r.response_time_ms,
          error: r.error ?? null,
          metrics: r.metrics ?? {},
          started_at: r.started_at ?? null,
        })),
      },
      now,
    );
    if (mine.length === 0) {
      await tx.query(sql`UPDATE service_checks SET inflight_job_id = NULL WHERE inflight_job_id = ${jobId}`);
      return { job: completed, after: [] as CheckAfter[], recorded: 0 };
    }
    const ids = mine.map((r) => r.check_id);
    const statuses = mine.map((r) => r.status);
    const rts = mine.map((r) => (r.response_time_ms == null ? null : Math.round(r.response_time_ms)));
    const errors = mine.map((r) => r.error ?? null);
    const prev = new Map(
      (
        await tx.many<{ id: string; consecutive_failures: number; last_result: string | null }>(sql`
          SELECT id, consecutive_failures, last_result FROM service_checks WHERE id = ANY(${ids}::uuid[]) FOR UPDATE`)
      ).map((r) => [r.id, r]),
    );
    const updated = await tx.many<CheckAfter>(sql`
      UPDATE service_checks s SET
        last_check_at = ${now},
        last_result = v.status,
        last_response_time_ms = v.rt,
        last_error = v.err,
        consecutive_failures = CASE WHEN v.status IN ('critical', 'unknown', 'error') THEN s.consecutive_failures + 1 ELSE 0 END,
        inflight_job_id = CASE WHEN s.inflight_job_id = ${jobId}::uuid THEN NULL ELSE s.inflight_job_id END,
        updated_at = ${now}
      FROM unnest(${ids}::uuid[], ${statuses}::text[], ${rts}::int[], ${errors}::text[]) AS v(id, status, rt, err)
      WHERE s.id = ANY(${ids}::uuid[]) AND s.id = v.id
      RETURNING s.id, s.name, s.check_type, s.target, s.port, s.device_uid, s.agent_uid, s.critical_threshold_ms,
                s.consecutive_failures`);
    const after = updated.map((u) => ({
      ...u,
      prev_failures: prev.get(u.id)?.consecutive_failures ?? 0,
      prev_result: prev.get(u.id)?.last_result ?? null,
    }));
    await tx.query(sql`UPDATE service_checks SET inflight_job_id = NULL WHERE inflight_job_id = ${jobId}`);
    const byId = new Map(after.map((a) => [a.id, a]));
    const gatewayId = submission.gatewayId ?? completed.gateway_id;
    // Bulk inserts through unnest(): a dozen array parameters instead of thousands of scalars.
    const st = {
      ts: [] as string[],
      check: [] as string[],
      device: [] as (string | null)[],
      name: [] as string[],
      type: [] as string[],
      avail: [] as boolean[],
      status: [] as string[],
      rt: [] as (number | null)[],
      msg: [] as (string | null)[],
      details: [] as string[],
      port: [] as (number | null)[],
    };
    const ts = {
      metric: [] as string[],
      mtype: [] as string[],
      device: [] as (string | null)[],
      target: [] as string[],
      value: [] as number[],
      unit: [] as (string | null)[],
      tags: [] as string[],
    };
    for (const r of mine) {
      const c = byId.get(r.check_id);
      if (!c) continue;
      const at = r.finished_at ? new Date(r.finished_at) : now;
      st.ts.push((Number.isNaN(at.getTime()) ? now : at).toISOString());
      st.check.push(c.id);
      st.device.push(c.device_uid);
      st.name.push(c.name);
      st.type.push(c.check_type);
      st.avail.push(!FAILING_STATUSES.has(r.status));
      st.status.push(r.status);
      st.rt.push(r.response_time_ms);
      st.msg.push(r.error ?? null);
      st.details.push(
        JSON.stringify({
          target: c.target,
          metrics: r.metrics ?? {},
          ...(r.details ?? {}),
          interfaces: undefined,
        }),
      );
      st.port.push(c.port);
      const tags = JSON.stringify({
        service_check_id: c.id,
        check_name: c.name,
        check_type: c.check_type,
        target: c.target,
      });
      const metricType = c.check_type === "ping" ? "icmp" : c.check_type;
      // Time series: the response time, plus packet loss for ping (other measurements stay in service_status.details).
      if (r.response_time_ms != null) {
        ts.metric.push("response_time_ms");
        ts.mtype.push(metricType);
        ts.device.push(c.device_uid);
        ts.target.push(c.target);
        ts.value.push(r.response_time_ms);
        ts.unit.push("ms");
        ts.tags.push(tags);
      }
      const loss = r.metrics?.packet_loss;
      if (c.check_type === "ping" && typeof loss === "number") {
        ts.metric.push("packet_loss");
        ts.mtype.push(metricType);
        ts.device.push(c.device_uid);
        ts.target.push(c.target);
        ts.value.push(loss);
        ts.unit.push("%");
        ts.tags.push(tags);
      }
    }
    if (st.check.length > 0) {
      await tx.query(sql`
        INSERT INTO service_status ("timestamp", service_check_id, device_uid, agent_id, gateway_id, service_name,
          service_type, available, status, response_time_ms, message, details, port, protocol)
        SELECT v.ts, v.check, v.device, ${submission.agentId}, ${gatewayId}, v.name, v.type, v.avail, v.status, v.rt,
               v.msg, v.details::jsonb, v.port, v.type
        FROM unnest(${st.ts}::timestamptz[], ${st.check}::uuid[], ${st.device}::text[], ${st.name}::text[], ${st.type}::text[],
                    ${st.avail}::boolean[], ${st.status}::text[], ${st.rt}::float8[], ${st.msg}::text[], ${st.details}::text[],
                    ${st.port}::int[]) AS v(ts, "check", device, name, type, avail, status, rt, msg, details, port)`);
    }
    if (ts.metric.length > 0) {
      await tx.query(sql`
        INSERT INTO timeseries_metrics ("timestamp", gateway_id, agent_id, metric_name, metric_type, device_id,
          target_device_ip, value, unit, tags)
        SELECT ${now}, ${gatewayId}, ${submission.agentId}, v.metric, v.mtype, v.device, v.target, v.value, v.unit, v.tags::jsonb
        FROM unnest(${ts.metric}::text[], ${ts.mtype}::text[], ${ts.device}::text[], ${ts.target}::text[], ${ts.value}::float8[],
                    ${ts.unit}::text[], ${ts.tags}::text[]) AS v(metric, mtype, device, target, value, unit, tags)`);
    }
    return { job: completed, after, recorded: after.length };
  });
  if (job.metadata?.kind === "sweep") await recordSweep(ctx, job, submission);
  await recordDiscoveredInterfaces(ctx, after, results, submission, job);
  await applyAlerts(ctx, after, results);
  return { job, recorded };
}

/** A finished network sweep: live hosts become device sightings (inventory ingestion). */
async function recordSweep(
  ctx: AppContext,
  job: PollJobRow,
  submission: { agentId: string; gatewayId?: string | null; sweepHosts?: unknown },
): Promise<void> {
  const sweep = job.metadata?.sweep as SweepSpec | undefined;
  if (!sweep) return;
  const hosts = (Array.isArray(submission.sweepHosts) ? submission.sweepHosts : []) as SweepHost[];
  const now = ctx.now();
  let ingested = 0;
  let error: string | null = null;
  try {
    for (let i = 0; i < hosts.length; i += MAX_BATCH) {
      const updates = hosts.slice(i, i + MAX_BATCH).map((h) => ({
        ip: h.ip,
        source: "sweep",
        partition: sweep.partition || "default",
        is_available: true,
        observed_at: now.toISOString(),
        // agent_id is an identity field in ingestion (the agent's own device): keep the
        // observer in metadata so swept hosts stay separate devices.
        metadata: {
          sweep: sweep.name,
          icmp: h.icmp,
          rtt_ms: h.rtt_ms,
          open_ports: h.open_ports,
          seen_by_agent: submission.agentId,
          seen_by_gateway: submission.gatewayId ?? job.gateway_id,
        },
      }));
      const r = await ingestSightings(ctx, SYSTEM_ACTOR, updates);
      ingested += (r as { results?: unknown[] }).results?.length ?? updates.length;
    }
  } catch (err) {
    error = (err as Error).message;
    ctx.log.error({ err, sweep: sweep.id }, "could not ingest sweep results");
  }
  await ctx.db.query(sql`
    UPDATE network_sweeps SET inflight_job_id = NULL, last_run_at = ${now}, updated_at = ${now},
      last_summary = ${JSON.stringify({ job_id: job.id, hosts_alive: hosts.length, ingested, error })}::jsonb
    WHERE id = ${sweep.id}`);
}

/** SNMP checks with `discover_interfaces`: store interfaces and counter rates. */
async function recordDiscoveredInterfaces(
  ctx: AppContext,
  after: CheckAfter[],
  results: SubmittedResult[],
  submission: { agentId: string; gatewayId?: string | null },
  job: PollJobRow,
): Promise<void> {
  const byId = new Map(after.map((a) => [a.id, a]));
  for (const r of results) {
    const c = byId.get(r.check_id);
    const ifaces = r.details?.interfaces;
    if (c?.check_type !== "snmp" || !Array.isArray(ifaces)) continue;
    try {
      await recordInterfaces(ctx, {
        deviceId: c.device_uid ?? `snmp:${c.target}`,
        deviceIp: typeof r.details?.address === "string" ? r.details.address : null,
        agentId: submission.agentId,
        gatewayId: submission.gatewayId ?? job.gateway_id,
        sysDescr: typeof r.details?.sys_descr === "string" ? r.details.sys_descr : null,
        interfaces: ifaces as SnmpInterface[],
        at: r.finished_at ? new Date(r.finished_at) : ctx.now(),
      });
    } catch (err) {
      ctx.log.error({ err, service_check_id: c.id }, "could not record discovered interfaces");
    }
  }
}

/** Raise or clear alerts after results are committed (alerting runs its own transactions). */
async function applyAlerts(ctx: AppContext, after: CheckAfter[], results: SubmittedResult[]): Promise<void> {
  const byId = new Map(results.map((r) => [r.check_id, r]));
  for (const c of after) {
    const r = byId.get(c.id);
    if (!r) continue;
    try {
      const failing = FAILING_STATUSES.has(r.status);
      const overCritical =
        c.critical_threshold_ms != null &&
        r.response_time_ms != null &&
        r.response_time_ms >= c.critical_threshold_ms;
      if (overCritical) {
        await raiseAlert(
          ctx,
          {
            title: `${c.name}: response time ${Math.round(r.response_time_ms as number)} ms over ${c.critical_threshold_ms} ms`,
            severity: "warning",
            service_check_id: c.id,
            device_uid: c.device_uid,
            agent_uid: c.agent_uid,
            reason: "critical_threshold",
            metric_name: "response_time_ms",
            metric_value: r.response_time_ms,
            threshold_value: c.critical_threshold_ms,
          },
          SYSTEM_ACTOR,
        );
      }
      if (failing && c.consecutive_failures >= FAILURE_ALERT_THRESHOLD) {
        await raiseAlert(
          ctx,
          {
            title: `${c.name} is failing (${c.consecutive_failures} consecutive ${r.status} results)`,
            description: r.error ?? null,
            severity: "critical",
            service_check_id: c.id,
            device_uid: c.device_uid,
            agent_uid: c.agent_uid,
            reason: "consecutive_failures",
            metric_name: "consecutive_failures",
            metric_value: c.consecutive_failures,
            threshold_value: FAILURE_ALERT_THRESHOLD,
          },
          SYSTEM_ACTOR,
        );
      }
      if (!failing && (c.prev_failures > 0 || c.prev_result === "critical")) {
        await clearAlertsFor(ctx, { serviceCheckId: c.id, reason: "consecutive_failures" });
      }
      if (!overCritical && (c.prev_result === "critical" || c.prev_result === "warning")) {
        await clearAlertsFor(ctx, { serviceCheckId: c.id, reason: "critical_threshold" });
      }
    } catch (err) {
      ctx.log.error({ err, service_check_id: c.id }, "could not raise or clear the check's alert");
    }
  }
}

/**
 * Time out stale jobs and retry them (another agent may take them). Running jobs past their
 * `timeout_seconds` → timeout; jobs stuck in dispatching that long (the gateway died after
 * claiming) → failed with DISPATCH_TIMEOUT. Both then retry while the budget lasts.
 */
export async function reapStaleJobs(ctx: AppContext): Promise<{ timedOut: number; failed: number }> {
  const now = ctx.now();
  const stale = await ctx.db.many<{ id: string; status: string }>(sql`
    SELECT id, status FROM poll_jobs
    WHERE (status = 'running' AND started_at + make_interval(secs => timeout_seconds) < ${now})
       OR (status = 'dispatching' AND dispatched_at + make_interval(secs => timeout_seconds) < ${now})
    LIMIT 1000`);
  let timedOut = 0;
  let failed = 0;
  for (const s of stale) {
    try {
      await ctx.db.transaction(async (tx) => {
        const job =
          s.status === "running"
            ? await transitionJob(tx, s.id, { op: "timeout" }, now)
            : await transitionJob(
                tx,
                s.id,
                {
                  op: "fail",
                  errorMessage: "No agent started the job in time",
                  errorCode: "DISPATCH_TIMEOUT",
                },
                now,
              );
        await retryOrRelease(tx, job, now);
      });
      if (s.status === "running") timedOut++;
      else failed++;
    } catch (err) {
      ctx.log.debug({ err, job: s.id }, "stale job changed while reaping");
    }
  }
  if (timedOut + failed > 0) jobSignal(ctx).emit("jobs");
  return { timedOut, failed };
}

/** Release checks held by jobs that ended without releasing them (defensive; cheap). */
export async function releaseOrphans(ctx: AppContext): Promise<number> {
  const res = await ctx.db.query(sql`
    UPDATE service_checks s SET inflight_job_id = NULL
    WHERE s.inflight_job_id IS NOT NULL AND NOT EXISTS (
      SELECT 1 FROM poll_jobs j WHERE j.id = s.inflight_job_id AND j.status IN ('pending', 'dispatching', 'running'))`);
  return res.rowCount;
}

/** Delete finished jobs older than `days` (results live on in service_status). */
export async function pruneJobs(ctx: AppContext, days = 7): Promise<number> {
  const cutoff = new Date(ctx.now().getTime() - days * 86_400_000);
  const res = await ctx.db.query(sql`
    DELETE FROM poll_jobs WHERE completed_at < ${cutoff} AND status IN ('completed', 'failed', 'timeout', 'cancelled')`);
  return res.rowCount;
}
