/**
 * Poll-job dispatch and results on the core: claiming (FOR UPDATE SKIP LOCKED, priority
 * order), start, result recording (check fields, service_status, time series, alerts),
 * failure, and the reaper that times out stale jobs and retries them elsewhere. Every status
 * change goes through `transitionJob` (poll-job-state.ts).
 */
import { EventEmitter } from "node:events";
import { SYSTEM_ACTOR } from "../access/actor.ts";
import { clearAlertsFor, raiseAlert } from "../alerting/raise.ts";
import { assignGroup } from "../inventory/groups.ts";
import { ingestSightings, MAX_BATCH } from "../inventory/ingest.ts";
import type { AppContext } from "../kernel/context.ts";
import { InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import { isUuid } from "../kernel/ids.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import type { SnmpInterface } from "./checks/snmp-interfaces.ts";
import { CHECK_STATUSES, type CheckResult, type CheckSpec, FAILING_STATUSES } from "./checks/types.ts";
import { deriveDeviceAvailability } from "./device-availability.ts";
import { recordInterfaces } from "./interfaces.ts";
import { labelsMatch } from "./labels.ts";
import {
  canRetry,
  type PollJobRow,
  type TransitionArgs,
  transitionJob,
  transitionJobs,
  transitionLockedJobs,
} from "./poll-job-state.ts";
import type { SweepHost, SweepSpec } from "./sweep.ts";

/** Consecutive failures at which a check opens an alert (and `/service-checks/failing` > 0). */
export const FAILURE_ALERT_THRESHOLD = 3;

/** Job ids are UUIDs; anything else cannot name a job (and would be a SQL cast error). */

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
  /**
   * A pooled job (check with agent_labels): the claiming gateway's agents that carry the
   * labels, decided at claim time; the gateway hands the job only to one of them.
   */
  eligible_agent_uids?: string[];
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
 * pinned to an agent only go to a gateway fronting that agent, jobs pinned to a gateway only to
 * that gateway. Safe across replicas.
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
        AND (target_gateway_id IS NULL OR target_gateway_id = ${opts.gatewayId})
        AND (target_agent_labels IS NULL OR EXISTS (SELECT 1 FROM agents a
               WHERE a.uid = ANY(${[...opts.agentUids]}::text[]) AND a.labels @> poll_jobs.target_agent_labels))
      ORDER BY priority DESC, available_at, inserted_at
      LIMIT ${max} FOR UPDATE SKIP LOCKED`);
    if (rows.length === 0) return [];
    // One UPDATE for all claimed jobs (rows come back in claim order).
    const jobs = await transitionJobs(
      tx,
      rows.map((r) => r.id),
      { op: "dispatch", gatewayId: opts.gatewayId },
      now,
    );
    const payloads = await loadPayloads(tx, jobs);
    const pooled = jobs.filter((j) => j.target_agent_labels && !j.target_agent_uid);
    if (pooled.length === 0) return payloads;
    const agents = await tx.many<{ uid: string; labels: unknown }>(
      sql`SELECT uid, labels FROM agents WHERE uid = ANY(${[...opts.agentUids]}::text[])`,
    );
    const selectors = new Map(pooled.map((j) => [j.id, j.target_agent_labels]));
    for (const p of payloads) {
      if (!selectors.has(p.id)) continue;
      p.eligible_agent_uids = agents
        .filter((a) => labelsMatch(a.labels, selectors.get(p.id)))
        .map((a) => a.uid);
    }
    return payloads;
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

/** The gateway handed the job to an agent (one guarded UPDATE: no transaction needed). */
export async function startJob(
  ctx: AppContext,
  jobId: string,
  agentId: string,
  owner?: JobOwner,
): Promise<PollJobRow> {
  if (!isUuid(jobId)) throw new NotFoundError(`poll job ${jobId} not found`);
  if (!owner) return transitionJob(ctx.db, jobId, { op: "start", agentId }, ctx.now());
  return ctx.db.transaction(async (tx) => {
    await lockOwnedJob(tx, jobId, owner);
    return transitionJob(tx, jobId, { op: "start", agentId }, ctx.now());
  });
}

/** The gateway or agent could not run the job (no agent, agent refused…). */
export async function failJob(
  ctx: AppContext,
  jobId: string,
  error: { message: string; code: string },
  owner?: JobOwner,
): Promise<PollJobRow> {
  if (!isUuid(jobId)) throw new NotFoundError(`poll job ${jobId} not found`);
  const now = ctx.now();
  const job = await ctx.db.transaction(async (tx) => {
    if (owner) await lockOwnedJob(tx, jobId, owner);
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

/** A check as the result UPDATE returns it. */
interface CheckRow {
  [k: string]: unknown;
  id: string;
  job_id: string;
  name: string;
  check_type: string;
  target: string;
  port: number | null;
  device_uid: string | null;
  agent_uid: string | null;
  critical_threshold_ms: number | null;
  consecutive_failures: number;
  last_result: string | null;
}

/** A check after its result, with its values before (for raising and clearing alerts). */
interface CheckAfter extends CheckRow {
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

type Submission = {
  agentId: string;
  gatewayId?: string | null;
  results: unknown;
  sweepHosts?: unknown;
  /** The gateway whose credential submits: only the gateway that claimed the job may. */
  owner?: JobOwner;
};

/**
 * Who may act on a claimed job: the gateway that claimed it (its credential), or null for
 * in-process and admin callers. Another gateway's job answers 404, as if it did not exist.
 */
export type JobOwner = { gatewayId: string } | null;

function ownedBy(job: { gateway_id?: string | null }, owner: JobOwner | undefined): boolean {
  return !owner || job.gateway_id === owner.gatewayId;
}

async function lockOwnedJob(tx: Queryable, jobId: string, owner: JobOwner | undefined): Promise<void> {
  const row = await tx.one<{ gateway_id: string | null }>(
    sql`SELECT gateway_id FROM poll_jobs WHERE id = ${jobId} FOR UPDATE`,
  );
  if (!row || !ownedBy(row, owner)) throw new NotFoundError(`poll job ${jobId} not found`);
}

interface Recorded {
  job: PollJobRow;
  after: CheckAfter[];
  recorded: number;
}

interface QueuedResults {
  jobId: string;
  submission: Submission;
  results: SubmittedResult[];
  resolve: (r: Recorded) => void;
  reject: (err: unknown) => void;
}

/** Caps on one group commit: one write holds PGlite's only connection for its whole duration. */
const GROUP_MAX_JOBS = 20;
const GROUP_MAX_RESULTS = 1000;

/**
 * Group commit for results. A submission is written at once when no write is running;
 * submissions that arrive while one is running wait and are then written together, in one
 * transaction with set-based statements (the cost of a transaction and of each statement is
 * paid once per group, not once per job). PGlite has one connection, so one write at a time;
 * PostgreSQL keeps a few in parallel. Every caller still gets its own answer (its job row,
 * or its own error), only after the transaction holding its results has committed.
 */
class ResultWriter {
  private queue: QueuedResults[] = [];
  private running = 0;
  readonly stats = { submissions: 0, transactions: 0 };

  constructor(
    private readonly ctx: AppContext,
    private readonly parallel: number,
  ) {}

  submit(jobId: string, submission: Submission, results: SubmittedResult[]): Promise<Recorded> {
    this.stats.submissions++;
    return new Promise<Recorded>((resolve, reject) => {
      this.queue.push({ jobId, submission, results, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.running < this.parallel && this.queue.length > 0) {
      const group = this.take();
      this.running++;
      void this.write(group).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  /**
   * The next group, oldest first. A second submission for a job already in the group, or
   * one naming a check already in it, waits for the next group (each job and each check is
   * written at most once per transaction).
   */
  private take(): QueuedResults[] {
    const group: QueuedResults[] = [];
    const rest: QueuedResults[] = [];
    const jobs = new Set<string>();
    const checks = new Set<string>();
    let n = 0;
    for (const item of this.queue) {
      const ids = item.results.map((r) => r.check_id);
      const fits =
        group.length === 0 ||
        (group.length < GROUP_MAX_JOBS &&
          n + ids.length <= GROUP_MAX_RESULTS &&
          !jobs.has(item.jobId) &&
          !ids.some((id) => checks.has(id)));
      if (!fits) {
        rest.push(item);
        continue;
      }
      group.push(item);
      jobs.add(item.jobId);
      for (const id of ids) checks.add(id);
      n += ids.length;
    }
    this.queue = rest;
    return group;
  }

  private async write(group: QueuedResults[]): Promise<void> {
    let outcomes: (Recorded | Error)[];
    try {
      this.stats.transactions++;
      outcomes = await writeResults(this.ctx, group);
    } catch (err) {
      if (group.length === 1) {
        group[0]?.reject(err);
        return;
      }
      // A database error rolled back the whole group: write each submission on its own so
      // only the one that causes it fails.
      for (const item of group) {
        try {
          this.stats.transactions++;
          const [one] = await writeResults(this.ctx, [item]);
          if (one instanceof Error) item.reject(one);
          else item.resolve(one as Recorded);
        } catch (e) {
          item.reject(e);
        }
      }
      return;
    }
    group.forEach((item, i) => {
      const o = outcomes[i];
      if (o instanceof Error) item.reject(o);
      else item.resolve(o as Recorded);
    });
  }
}

const writers = new WeakMap<AppContext, ResultWriter>();
function resultWriter(ctx: AppContext): ResultWriter {
  let w = writers.get(ctx);
  if (!w) {
    w = new ResultWriter(ctx, ctx.db.kind === "pglite" ? 1 : 4);
    writers.set(ctx, w);
  }
  return w;
}

/** Submissions queued and transactions written so far (benchmarks, tests). */
export function resultWriterStats(ctx: AppContext): { submissions: number; transactions: number } {
  return { ...resultWriter(ctx).stats };
}

/**
 * Record a job's results: complete the job, update every check (last_*, consecutive
 * failures), append service_status rows and time series, then raise/clear alerts.
 * Results for checks not in the job are ignored. Submissions that arrive while another is
 * being written are committed together (see ResultWriter); this call resolves once its own
 * results are committed. Call it outside any transaction.
 */
export async function completeJob(
  ctx: AppContext,
  jobId: string,
  submission: Submission,
): Promise<{ job: PollJobRow; recorded: number }> {
  const results = validResults(submission.results);
  if (!isUuid(jobId)) throw new NotFoundError(`poll job ${jobId} not found`);
  const { job, after, recorded } = await resultWriter(ctx).submit(jobId, submission, results);
  if (job.metadata?.kind === "sweep") await recordSweep(ctx, job, submission);
  await recordDiscoveredInterfaces(ctx, after, results, submission, job);
  await applyAlerts(ctx, after, results);
  // Only checks whose result changed can change a device's availability.
  const moved = after.filter((c) => c.device_uid && c.prev_result !== c.last_result).map((c) => c.device_uid);
  if (moved.length > 0) await deriveDeviceAvailability(ctx, moved as string[]);
  return { job, recorded };
}

/**
 * Write a group of submissions in one transaction: lock the jobs, complete them (through the
 * state machine; a job that cannot complete gets its error and writes nothing), then one
 * statement updates every check and appends the service_status and time-series rows.
 * The answer is aligned with `items`.
 */
async function writeResults(ctx: AppContext, items: readonly QueuedResults[]): Promise<(Recorded | Error)[]> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const ids = [...new Set(items.map((i) => i.jobId))];
    const found = await tx.many<PollJobRow & Record<string, unknown>>(
      sql`SELECT * FROM poll_jobs WHERE id = ANY(${ids}::uuid[]) ORDER BY id FOR UPDATE`,
    );
    const byId = new Map<string, PollJobRow>(found.map((j) => [j.id, j]));
    const out: (Recorded | Error)[] = new Array(items.length);
    const planned: { i: number; job: PollJobRow; mine: SubmittedResult[]; ops: TransitionArgs[] }[] = [];
    items.forEach((item, i) => {
      const job = byId.get(item.jobId);
      if (!job || !ownedBy(job, item.submission.owner)) {
        out[i] = new NotFoundError(`poll job ${item.jobId} not found`);
        return;
      }
      const inJob = new Set(job.check_ids ?? []);
      const mine = item.results.filter((r) => inJob.has(r.check_id));
      const success = mine.filter((r) => !FAILING_STATUSES.has(r.status)).length;
      const ops: TransitionArgs[] = [];
      if (job.status === "dispatching") ops.push({ op: "start", agentId: item.submission.agentId });
      ops.push({
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
      });
      planned.push({ i, job, mine, ops });
    });
    const transitioned = await transitionLockedJobs(tx, planned, now);

    // One row per result of every completed job (unnest() arrays: a fixed number of parameters).
    const v = {
      check: [] as string[],
      job: [] as string[],
      status: [] as string[],
      failing: [] as boolean[],
      rt: [] as (number | null)[],
      rtInt: [] as (number | null)[],
      err: [] as (string | null)[],
      at: [] as string[],
      details: [] as string[],
      loss: [] as (number | null)[],
      agent: [] as string[],
      gateway: [] as (string | null)[],
    };
    const release = { checks: [] as string[], jobs: [] as string[] };
    const done: { i: number; job: PollJobRow }[] = [];
    planned.forEach((p, k) => {
      const t = transitioned[k];
      if (t instanceof Error || !t) {
        out[p.i] = t ?? new Error("poll job not transitioned");
        return;
      }
      done.push({ i: p.i, job: t });
      const sub = (items[p.i] as QueuedResults).submission;
      const gatewayId = sub.gatewayId ?? t.gateway_id;
      for (const r of p.mine) {
        const at = r.finished_at ? new Date(r.finished_at) : now;
        const loss = r.metrics?.packet_loss;
        v.check.push(r.check_id);
        v.job.push(t.id);
        v.status.push(r.status);
        v.failing.push(FAILING_STATUSES.has(r.status));
        v.rt.push(r.response_time_ms);
        v.rtInt.push(r.response_time_ms == null ? null : Math.round(r.response_time_ms));
        v.err.push(r.error ?? null);
        v.at.push((Number.isNaN(at.getTime()) ? now : at).toISOString());
        // service_status.details = {target, metrics, ...details} (target is added in SQL).
        v.details.push(
          JSON.stringify({ metrics: r.metrics ?? {}, ...(r.details ?? {}), interfaces: undefined }),
        );
        v.loss.push(typeof loss === "number" && Number.isFinite(loss) ? loss : null);
        v.agent.push(sub.agentId);
        v.gateway.push(gatewayId);
      }
      // Checks of the job without a result are released here (the others in the UPDATE below).
      const answered = new Set(p.mine.map((r) => r.check_id));
      const missing = (p.job.check_ids ?? []).filter((c) => !answered.has(c));
      if (missing.length > 0) {
        release.checks.push(...missing);
        release.jobs.push(t.id);
      }
    });

    let updated: CheckAfter[] = [];
    if (v.check.length > 0) {
      // Every part of one statement sees the rows as they were before it, so `prev` holds the
      // values before this update. Nothing else writes these columns while the job is running:
      // its checks belong to it, and other paths that touch them (failure, reaper) take the
      // job row first, which this transaction holds.
      updated = await tx.many<CheckAfter>(sql`
        WITH v AS (
          SELECT * FROM unnest(${v.check}::uuid[], ${v.job}::uuid[], ${v.status}::text[], ${v.failing}::boolean[],
                               ${v.rt}::float8[], ${v.rtInt}::int[], ${v.err}::text[], ${v.at}::timestamptz[],
                               ${v.details}::text[], ${v.loss}::float8[], ${v.agent}::text[], ${v.gateway}::text[])
            WITH ORDINALITY AS v(check_id, job_id, status, failing, rt, rt_int, err, at, details, loss, agent_id, gateway_id, n)
        ),
        latest AS (SELECT DISTINCT ON (check_id) * FROM v ORDER BY check_id, n DESC),
        prev AS MATERIALIZED (
          SELECT id, consecutive_failures, last_result FROM service_checks WHERE id = ANY(${v.check}::uuid[])
        ),
        upd AS (
          UPDATE service_checks s SET
            last_check_at = ${now},
            last_result = l.status,
            last_response_time_ms = l.rt_int,
            last_error = l.err,
            consecutive_failures = CASE WHEN l.failing THEN s.consecutive_failures + 1 ELSE 0 END,
            inflight_job_id = CASE WHEN s.inflight_job_id = l.job_id THEN NULL ELSE s.inflight_job_id END,
            updated_at = ${now}
          FROM latest l
          WHERE s.id = ANY(${v.check}::uuid[]) AND s.id = l.check_id
          RETURNING s.id, l.job_id, s.name, s.check_type, s.target, s.port, s.device_uid, s.agent_uid,
                    s.critical_threshold_ms, s.consecutive_failures, s.last_result
        ),
        status_rows AS (
          INSERT INTO service_status ("timestamp", service_check_id, device_uid, agent_id, gateway_id, service_name,
            service_type, available, status, response_time_ms, message, details, port, protocol)
          SELECT v.at, u.id, u.device_uid, v.agent_id, v.gateway_id, u.name, u.check_type, NOT v.failing, v.status,
                 v.rt, v.err, jsonb_build_object('target', u.target) || v.details::jsonb, u.port, u.check_type
          FROM v JOIN upd u ON u.id = v.check_id
        ),
        -- Time series: the response time, plus packet loss for ping (other measurements stay in
        -- service_status.details).
        metric_rows AS (
          INSERT INTO timeseries_metrics ("timestamp", gateway_id, agent_id, metric_name, metric_type, device_id,
            target_device_ip, value, unit, tags)
          SELECT ${now}, v.gateway_id, v.agent_id, m.metric,
                 CASE WHEN u.check_type = 'ping' THEN 'icmp' ELSE u.check_type END, u.device_uid, u.target, m.value,
                 m.unit, jsonb_build_object('service_check_id', u.id, 'check_name', u.name, 'check_type', u.check_type,
                                            'target', u.target)
          FROM v JOIN upd u ON u.id = v.check_id
          CROSS JOIN LATERAL (VALUES ('response_time_ms', v.rt, 'ms'),
                                     ('packet_loss', CASE WHEN u.check_type = 'ping' THEN v.loss END, '%'))
            AS m(metric, value, unit)
          WHERE m.value IS NOT NULL
        )
        SELECT u.*, p.consecutive_failures AS prev_failures, p.last_result AS prev_result
        FROM upd u JOIN prev p ON p.id = u.id`);
    }
    if (release.checks.length > 0) {
      await tx.query(sql`
        UPDATE service_checks SET inflight_job_id = NULL
        WHERE id = ANY(${release.checks}::uuid[]) AND inflight_job_id = ANY(${release.jobs}::uuid[])`);
    }
    const afterByJob = new Map<string, CheckAfter[]>();
    for (const c of updated) {
      const list = afterByJob.get(c.job_id) ?? [];
      list.push(c);
      afterByJob.set(c.job_id, list);
    }
    for (const { i, job } of done) {
      const after = afterByJob.get(job.id) ?? [];
      out[i] = { job, after, recorded: after.length };
    }
    return out;
  });
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
    const group = await ctx.db.one<{ group_id: string | null }>(
      sql`SELECT group_id FROM network_sweeps WHERE id = ${sweep.id}`,
    );
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
      const uids = ((r as { results?: { uid: string }[] }).results ?? []).map((x) => x.uid);
      ingested += uids.length;
      if (group?.group_id) await assignGroup(ctx.db, uids, group.group_id, { onlyUngrouped: true });
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
/**
 * A person resolved this condition's alert while the check was still failing: the condition is
 * acknowledged as handled until the check recovers (one success after the resolve), as
 * Alertmanager/Zabbix users expect; it re-fires only after that (decision 0600). Resolves by
 * `system` (recovery, disable, delete) never suppress.
 */
async function resolvedByHandWhileFailing(
  ctx: AppContext,
  checkId: string,
  reason: string,
): Promise<boolean> {
  const latest = await ctx.db.one<{ status: string; resolved_by: string | null; recovered: boolean }>(sql`
    SELECT a.status, a.resolved_by, EXISTS (
      SELECT 1 FROM service_status s
      WHERE s.service_check_id = ${checkId} AND s.status = 'success' AND s."timestamp" > a.resolved_at
    ) AS recovered
    FROM alerts a
    WHERE a.incident_key = ${`service_check:${checkId}:${reason}`}
    ORDER BY a.triggered_at DESC
    LIMIT 1`);
  return (
    latest?.status === "resolved" &&
    latest.resolved_by !== null &&
    latest.resolved_by !== "system" &&
    !latest.recovered
  );
}

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
      if (
        failing &&
        c.consecutive_failures >= FAILURE_ALERT_THRESHOLD &&
        !(await resolvedByHandWhileFailing(ctx, c.id, "consecutive_failures"))
      ) {
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
