/**
 * The poll-job state machine (reference §2.3). This module is the ONLY place that changes a
 * poll job's `status`: every other module calls `transitionJob`, which locks the row, checks
 * the transition, computes the side effects and writes them in one UPDATE.
 *
 *   pending → dispatching → running → completed | failed | timeout
 *   pending | dispatching → cancelled        dispatching → failed
 *   failed | timeout → pending (retry, while retry_count < max_retries, with backoff)
 */
import { InvalidTransitionError, NotFoundError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";

export const POLL_JOB_STATUSES = [
  "pending",
  "dispatching",
  "running",
  "completed",
  "failed",
  "timeout",
  "cancelled",
] as const;
export type PollJobStatus = (typeof POLL_JOB_STATUSES)[number];

export const TERMINAL_STATUSES: ReadonlySet<PollJobStatus> = new Set([
  "completed",
  "failed",
  "timeout",
  "cancelled",
]);

export type PollJobOperation = "dispatch" | "start" | "complete" | "fail" | "timeout" | "cancel" | "retry";

export const TRANSITIONS: Readonly<
  Record<PollJobOperation, { from: readonly PollJobStatus[]; to: PollJobStatus }>
> = {
  dispatch: { from: ["pending"], to: "dispatching" },
  start: { from: ["dispatching"], to: "running" },
  complete: { from: ["running"], to: "completed" },
  fail: { from: ["dispatching", "running"], to: "failed" },
  timeout: { from: ["running"], to: "timeout" },
  cancel: { from: ["pending", "dispatching"], to: "cancelled" },
  retry: { from: ["failed", "timeout"], to: "pending" },
};

export interface PollJobRow {
  id: string;
  schedule_id: string;
  schedule_name: string | null;
  status: PollJobStatus;
  agent_id: string | null;
  gateway_id: string | null;
  check_count: number | null;
  check_ids: string[] | null;
  success_count: number | null;
  failure_count: number | null;
  priority: number | null;
  retry_count: number | null;
  max_retries: number | null;
  timeout_seconds: number | null;
  duration_ms: number | null;
  dispatched_at: Date | null;
  started_at: Date | null;
  completed_at: Date | null;
  error_code: string | null;
  error_message: string | null;
  results: unknown[] | null;
  metadata: Record<string, unknown> | null;
  target_agent_uid: string | null;
  available_at: Date;
  inserted_at: Date;
  updated_at: Date;
}

export type TransitionArgs =
  | { op: "dispatch"; gatewayId: string }
  | { op: "start"; agentId: string }
  | { op: "complete"; successCount: number; failureCount: number; results: unknown[] }
  | { op: "fail"; errorMessage: string; errorCode: string }
  | { op: "timeout" }
  | { op: "cancel"; reason?: string }
  | { op: "retry" };

/** Seconds a retried job waits before it can be claimed again: 2, 4, 8 … capped at 60. */
export function retryBackoffSeconds(retryCount: number): number {
  return Math.min(60, 2 ** Math.max(1, retryCount + 1));
}

export function canRetry(job: Pick<PollJobRow, "status" | "retry_count" | "max_retries">): boolean {
  return (
    (job.status === "failed" || job.status === "timeout") && (job.retry_count ?? 0) < (job.max_retries ?? 3)
  );
}

/** The next status for `op` from `current`; throws InvalidTransitionError when not allowed. */
export function nextStatus(op: PollJobOperation, current: PollJobStatus): PollJobStatus {
  const t = TRANSITIONS[op];
  if (!t?.from.includes(current)) throw new InvalidTransitionError(op, current);
  return t.to;
}

function elapsedMs(from: Date | null, now: Date): number | null {
  return from ? Math.max(0, now.getTime() - from.getTime()) : null;
}

/**
 * Pure: the column changes `args` makes to `job` at `now` (including the new status).
 * Throws InvalidTransitionError for an illegal transition or an exhausted retry budget.
 */
export function planTransition(
  job: Pick<PollJobRow, "status" | "retry_count" | "max_retries" | "started_at" | "dispatched_at">,
  args: TransitionArgs,
  now: Date,
): Partial<PollJobRow> {
  const status = nextStatus(args.op, job.status);
  switch (args.op) {
    case "dispatch":
      return { status, gateway_id: args.gatewayId, dispatched_at: now };
    case "start":
      return { status, agent_id: args.agentId, started_at: now };
    case "complete":
      return {
        status,
        success_count: args.successCount,
        failure_count: args.failureCount,
        results: args.results,
        completed_at: now,
        duration_ms: elapsedMs(job.started_at, now),
      };
    case "fail":
      return {
        status,
        error_message: args.errorMessage,
        error_code: args.errorCode,
        completed_at: now,
        duration_ms: elapsedMs(job.started_at ?? job.dispatched_at, now),
      };
    case "timeout":
      return {
        status,
        error_message: "Job execution timed out",
        error_code: "TIMEOUT",
        completed_at: now,
        duration_ms: elapsedMs(job.started_at, now),
      };
    case "cancel":
      return { status, error_message: args.reason || "Job cancelled", completed_at: now };
    case "retry": {
      const retryCount = job.retry_count ?? 0;
      if (retryCount >= (job.max_retries ?? 3)) {
        throw new InvalidTransitionError("retry", job.status, {
          extra: { reason: "retry budget exhausted", retry_count: retryCount, max_retries: job.max_retries },
        });
      }
      return {
        status,
        retry_count: retryCount + 1,
        dispatched_at: null,
        started_at: null,
        completed_at: null,
        duration_ms: null,
        error_message: null,
        error_code: null,
        results: [],
        // A retried job may run on another gateway/agent ("retry elsewhere").
        gateway_id: null,
        agent_id: null,
        available_at: new Date(now.getTime() + retryBackoffSeconds(retryCount) * 1000),
      };
    }
  }
}

const COLUMNS: ReadonlySet<string> = new Set([
  "status",
  "gateway_id",
  "agent_id",
  "dispatched_at",
  "started_at",
  "completed_at",
  "duration_ms",
  "success_count",
  "failure_count",
  "results",
  "error_message",
  "error_code",
  "retry_count",
  "available_at",
]);

/**
 * Lock the job, apply the transition and return the updated row. Must run inside a
 * transaction when the caller does more work atomically with it; on its own the single
 * `UPDATE … WHERE status = <seen>` is still safe against concurrent transitions.
 */
export async function transitionJob(
  q: Queryable,
  id: string,
  args: TransitionArgs,
  now: Date,
): Promise<PollJobRow> {
  const job = await q.one<PollJobRow & Record<string, unknown>>(
    sql`SELECT * FROM poll_jobs WHERE id = ${id} FOR UPDATE`,
  );
  if (!job) throw new NotFoundError(`poll job ${id} not found`);
  const changes = planTransition(job, args, now);
  const sets = [];
  for (const [k, v] of Object.entries(changes)) {
    if (!COLUMNS.has(k)) throw new Error(`poll job column ${k} is not writable by a transition`);
    sets.push({ k, v: k === "results" ? JSON.stringify(v) : v });
  }
  const values: unknown[] = [id, job.status, now];
  const assignments = sets.map(({ k, v }) => {
    values.push(v);
    return `${k} = $${values.length}${k === "results" ? "::jsonb" : ""}`;
  });
  const updated = await q.one<PollJobRow & Record<string, unknown>>(
    `UPDATE poll_jobs SET ${assignments.join(", ")}, updated_at = $3 WHERE id = $1 AND status = $2 RETURNING *`,
    values,
  );
  if (!updated) {
    // Someone moved it between our read and write (only possible outside a transaction).
    const current = await q.one<{ status: PollJobStatus }>(
      sql`SELECT status FROM poll_jobs WHERE id = ${id}`,
    );
    throw new InvalidTransitionError(args.op, current?.status ?? "unknown");
  }
  return updated;
}
