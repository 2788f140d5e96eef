/**
 * The poll-job state machine (reference §2.3). `status` is written only through the action
 * runner's state writer (src/jsonapi/engine/transitions.ts, issue 11): every other module calls
 * `transitionJob`, which locks the row, checks the transition, computes the side effects and
 * writes them in one guarded UPDATE — or, for many jobs at once, `transitionJobs` (status-only
 * operations by id) and `transitionLockedJobs` (rows the caller locked), which write them
 * set-based. `planTransition` stays pure: it computes the changes (and the status callers see).
 *
 *   pending → dispatching → running → completed | failed | timeout
 *   pending | dispatching → cancelled        dispatching → failed
 *   failed | timeout → pending (retry, while retry_count < max_retries, with backoff)
 */

import {
  type Changes,
  type LockedTransition,
  stateTable,
  transitionRow,
  transitionRows,
  writeTransitions,
} from "../jsonapi/engine/transitions.ts";
import { checkTransition, defineStateMachine } from "../jsonapi/state-machine.ts";
import { InvalidTransitionError, NotFoundError } from "../kernel/errors.ts";
import type { Queryable, Row } from "../storage/db.ts";
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
  target_gateway_id: string | null;
  target_agent_labels?: Record<string, string> | null;
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

export const pollJobMachine = defineStateMachine<PollJobStatus>({
  name: "poll-job",
  attribute: "status",
  states: POLL_JOB_STATUSES,
  initial: ["pending"],
  transitions: TRANSITIONS,
});

/** The next status for `op` from `current`; throws InvalidTransitionError when not allowed. */
export function nextStatus(op: PollJobOperation, current: PollJobStatus): PollJobStatus {
  return checkTransition(pollJobMachine, op, current) as PollJobStatus;
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

/** poll_jobs for the state writer: the columns a transition may write besides `status`. */
export const pollJobTable = stateTable({
  machine: pollJobMachine,
  table: "poll_jobs",
  key: "id",
  keyType: "uuid",
  touch: "updated_at",
  columns: {
    gateway_id: "text",
    agent_id: "text",
    dispatched_at: "timestamptz",
    started_at: "timestamptz",
    completed_at: "timestamptz",
    duration_ms: "int",
    success_count: "int",
    failure_count: "int",
    results: "jsonb",
    error_message: "text",
    error_code: "text",
    retry_count: "int",
    available_at: "timestamptz",
  },
});

/**
 * Operations whose changes depend only on the current status (not on other columns): they
 * are written with one guarded `UPDATE … WHERE status = ANY(<from>)`, without reading first.
 */
const STATUS_ONLY: ReadonlySet<PollJobOperation> = new Set(["dispatch", "start", "cancel"]);

/** Plan `ops` applied in order to `job` (e.g. start then complete); the merged changes. */
export function planTransitions(
  job: Pick<PollJobRow, "status" | "retry_count" | "max_retries" | "started_at" | "dispatched_at">,
  ops: readonly TransitionArgs[],
  now: Date,
): Partial<PollJobRow> {
  let current = { ...job };
  let changes: Partial<PollJobRow> = {};
  for (const args of ops) {
    const step = planTransition(current, args, now);
    changes = { ...changes, ...step };
    current = { ...current, ...step };
  }
  return changes;
}

/** A plan's column changes for the writer (which sets the status from the transition). */
function changesOf(plan: Partial<PollJobRow>): Changes {
  const { status: _status, ...changes } = plan;
  return changes;
}

type JobRow = PollJobRow & Row;

async function refuse(q: Queryable, id: string, op: PollJobOperation): Promise<never> {
  const current = await q.one<{ status: PollJobStatus }>(sql`SELECT status FROM poll_jobs WHERE id = ${id}`);
  if (!current) throw new NotFoundError(`poll job ${id} not found`);
  throw new InvalidTransitionError(op, current.status);
}

/**
 * Lock the job, apply the transition and return the updated row. Must run inside a
 * transaction when the caller does more work atomically with it; on its own the single
 * `UPDATE … WHERE status = <seen>` is still safe against concurrent transitions.
 * Status-only operations (dispatch, start, cancel) are one guarded UPDATE.
 */
export async function transitionJob(
  q: Queryable,
  id: string,
  args: TransitionArgs,
  now: Date,
): Promise<PollJobRow> {
  if (STATUS_ONLY.has(args.op)) {
    const [row] = await transitionJobs(q, [id], args, now);
    return row as PollJobRow;
  }
  return transitionRow<JobRow>(
    q,
    pollJobTable,
    id,
    args.op,
    (job) => changesOf(planTransition(job, args, now)),
    now,
  );
}

/**
 * A status-only operation (dispatch, start, cancel) on several jobs in one UPDATE; rows come
 * back in the order of `ids`. Throws InvalidTransitionError (nothing written when the caller
 * runs it in a transaction) if any job is not in a status the operation accepts.
 */
export async function transitionJobs(
  q: Queryable,
  ids: readonly string[],
  args: TransitionArgs,
  now: Date,
): Promise<PollJobRow[]> {
  if (!STATUS_ONLY.has(args.op)) throw new Error(`${args.op} needs the job row: use transitionJob`);
  if (ids.length === 0) return [];
  // The plan is the same from every accepted status (that is what makes the op status-only).
  const plan = planTransition(
    {
      status: TRANSITIONS[args.op].from[0] as PollJobStatus,
      retry_count: null,
      max_retries: null,
      started_at: null,
      dispatched_at: null,
    },
    args,
    now,
  );
  const rows = await transitionRows<JobRow>(q, pollJobTable, args.op, { ids }, changesOf(plan), now);
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const id of ids) if (!byId.has(id)) await refuse(q, id, args.op);
  return ids.map((id) => byId.get(id) as PollJobRow);
}

/**
 * Apply `ops` to jobs the caller has already locked (`SELECT … FOR UPDATE` in the same
 * transaction), writing all of them with one UPDATE per set of changed columns. The answer is
 * aligned with `items`: the updated row, or the error (InvalidTransitionError…) that kept the
 * job unchanged — one job's illegal transition does not stop the others.
 */
export async function transitionLockedJobs(
  q: Queryable,
  items: readonly { job: PollJobRow; ops: readonly TransitionArgs[] }[],
  now: Date,
): Promise<(PollJobRow | Error)[]> {
  const out: (PollJobRow | Error)[] = new Array(items.length);
  const planned: LockedTransition[] = [];
  const at: number[] = [];
  items.forEach(({ job, ops }, i) => {
    let plan: Partial<PollJobRow>;
    try {
      // Also refuses what the machine does not know about (an exhausted retry budget).
      plan = planTransitions(job, ops, now);
    } catch (err) {
      out[i] = err as Error;
      return;
    }
    planned.push({
      id: job.id,
      seen: job.status,
      transitions: ops.map((o) => o.op),
      changes: changesOf(plan),
    });
    at.push(i);
  });
  const written = await writeTransitions<JobRow>(q, pollJobTable, planned, now);
  written.forEach((r, k) => {
    out[at[k] as number] = r;
  });
  return out;
}
