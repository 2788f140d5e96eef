import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import { InvalidTransitionError } from "../kernel/errors.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import {
  canRetry,
  nextStatus,
  POLL_JOB_STATUSES,
  type PollJobOperation,
  type PollJobRow,
  planTransition,
  planTransitions,
  TRANSITIONS,
  transitionJob,
  transitionJobs,
  transitionLockedJobs,
} from "./poll-job-state.ts";

const T0 = new Date("2026-01-01T00:00:00Z");

describe("poll job transitions (pure)", () => {
  it("allows exactly the reference table and rejects everything else", () => {
    const allowed: Record<PollJobOperation, string[]> = {
      dispatch: ["pending"],
      start: ["dispatching"],
      complete: ["running"],
      fail: ["dispatching", "running"],
      timeout: ["running"],
      cancel: ["pending", "dispatching"],
      retry: ["failed", "timeout"],
    };
    for (const op of Object.keys(TRANSITIONS) as PollJobOperation[]) {
      for (const s of POLL_JOB_STATUSES) {
        if (allowed[op].includes(s)) expect(nextStatus(op, s)).toBe(TRANSITIONS[op].to);
        else expect(() => nextStatus(op, s), `${op} from ${s}`).toThrow(InvalidTransitionError);
      }
    }
  });

  it("names the operation and the current state in the error", () => {
    try {
      nextStatus("complete", "pending");
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidTransitionError);
      const e = err as InvalidTransitionError;
      expect(e.status).toBe(400);
      expect(e.message).toBe("cannot complete from state 'pending'");
      expect(e.extra).toMatchObject({ operation: "complete", current_state: "pending" });
    }
  });

  it("computes durations and clears fields on retry with backoff", () => {
    const started = new Date(T0.getTime() - 1500);
    const done = planTransition(
      { status: "running", retry_count: 0, max_retries: 3, started_at: started, dispatched_at: started },
      { op: "complete", successCount: 2, failureCount: 1, results: [{ a: 1 }] },
      T0,
    );
    expect(done).toMatchObject({
      status: "completed",
      duration_ms: 1500,
      success_count: 2,
      failure_count: 1,
    });
    const timedOut = planTransition(
      { status: "running", retry_count: 0, max_retries: 3, started_at: started, dispatched_at: started },
      { op: "timeout" },
      T0,
    );
    expect(timedOut.error_message).toBe("Job execution timed out");
    const retried = planTransition(
      { status: "timeout", retry_count: 1, max_retries: 3, started_at: started, dispatched_at: started },
      { op: "retry" },
      T0,
    );
    expect(retried).toMatchObject({ status: "pending", retry_count: 2, started_at: null, agent_id: null });
    expect((retried.available_at as Date).getTime()).toBeGreaterThan(T0.getTime());
  });

  it("refuses a retry once max_retries is reached", () => {
    const job = {
      status: "failed" as const,
      retry_count: 3,
      max_retries: 3,
      started_at: null,
      dispatched_at: null,
    };
    expect(canRetry(job)).toBe(false);
    expect(() => planTransition(job, { op: "retry" }, T0)).toThrow(InvalidTransitionError);
    expect(canRetry({ ...job, retry_count: 2 })).toBe(true);
  });

  it("plans a sequence of operations on one row (start then complete from dispatching)", () => {
    const dispatched = new Date(T0.getTime() - 2000);
    const changes = planTransitions(
      { status: "dispatching", retry_count: 0, max_retries: 3, started_at: null, dispatched_at: dispatched },
      [
        { op: "start", agentId: "a1" },
        { op: "complete", successCount: 1, failureCount: 0, results: [] },
      ],
      T0,
    );
    expect(changes).toMatchObject({ status: "completed", agent_id: "a1", started_at: T0, duration_ms: 0 });
    expect(() =>
      planTransitions(
        { status: "pending", retry_count: 0, max_retries: 3, started_at: null, dispatched_at: null },
        [
          { op: "start", agentId: "a1" },
          { op: "complete", successCount: 0, failureCount: 0, results: [] },
        ],
        T0,
      ),
    ).toThrow(InvalidTransitionError);
  });

  it("cancel uses the reason or a default message", () => {
    const job = {
      status: "pending" as const,
      retry_count: 0,
      max_retries: 3,
      started_at: null,
      dispatched_at: null,
    };
    expect(planTransition(job, { op: "cancel" }, T0).error_message).toBe("Job cancelled");
    expect(planTransition(job, { op: "cancel", reason: "schedule deleted" }, T0).error_message).toBe(
      "schedule deleted",
    );
  });
});

describe("poll job transitions (database)", () => {
  let db: Db;
  let scheduleId: string;
  beforeAll(async () => {
    db = (await createTestDatabase()).db;
    const row = await db.one<{ id: string }>(
      sql`INSERT INTO polling_schedules (name, interval_seconds) VALUES ('s1', 60) RETURNING id`,
    );
    scheduleId = row?.id as string;
  });
  afterAll(async () => {
    await db?.close();
  });

  async function newJob(): Promise<string> {
    const row = await db.one<{ id: string }>(
      sql`INSERT INTO poll_jobs (schedule_id) VALUES (${scheduleId}) RETURNING id`,
    );
    return row?.id as string;
  }

  it("walks a job through its whole life and persists every side effect", async () => {
    const id = await newJob();
    let job = await transitionJob(db, id, { op: "dispatch", gatewayId: "gw-1" }, T0);
    expect(job).toMatchObject({ status: "dispatching", gateway_id: "gw-1" });
    job = await transitionJob(db, id, { op: "start", agentId: "agent-1" }, new Date(T0.getTime() + 100));
    expect(job.status).toBe("running");
    job = await transitionJob(
      db,
      id,
      { op: "complete", successCount: 1, failureCount: 0, results: [{ check_id: "x", status: "success" }] },
      new Date(T0.getTime() + 600),
    );
    expect(job).toMatchObject({ status: "completed", duration_ms: 500, success_count: 1 });
    expect(job.results).toEqual([{ check_id: "x", status: "success" }]);
  });

  it("leaves the row unchanged after an illegal transition", async () => {
    const id = await newJob();
    await expect(
      transitionJob(db, id, { op: "complete", successCount: 0, failureCount: 0, results: [] }, T0),
    ).rejects.toThrow(InvalidTransitionError);
    const row = await db.one<{ status: string; completed_at: Date | null }>(
      sql`SELECT status, completed_at FROM poll_jobs WHERE id = ${id}`,
    );
    expect(row).toEqual({ status: "pending", completed_at: null });
  });

  it("retries a timed-out job back to pending for another agent", async () => {
    const id = await newJob();
    await transitionJob(db, id, { op: "dispatch", gatewayId: "gw-1" }, T0);
    await transitionJob(db, id, { op: "start", agentId: "a1" }, T0);
    await transitionJob(db, id, { op: "timeout" }, T0);
    const job = await transitionJob(db, id, { op: "retry" }, T0);
    expect(job).toMatchObject({ status: "pending", retry_count: 1, agent_id: null, gateway_id: null });
  });

  it("dispatches several jobs in one statement, or none when one of them cannot move", async () => {
    const a = await newJob();
    const b = await newJob();
    const rows = await transitionJobs(db, [b, a], { op: "dispatch", gatewayId: "gw-2" }, T0);
    expect(rows.map((r) => [r.id, r.status, r.gateway_id])).toEqual([
      [b, "dispatching", "gw-2"],
      [a, "dispatching", "gw-2"],
    ]);
    const c = await newJob();
    await expect(
      db.transaction((tx) => transitionJobs(tx, [c, a], { op: "dispatch", gatewayId: "gw-3" }, T0)),
    ).rejects.toThrow("cannot dispatch from state 'dispatching'");
    const after = await db.one<{ status: string }>(sql`SELECT status FROM poll_jobs WHERE id = ${c}`);
    expect(after?.status).toBe("pending"); // rolled back with the transaction
    await expect(
      transitionJobs(db, ["00000000-0000-4000-8000-000000000000"], { op: "start", agentId: "x" }, T0),
    ).rejects.toThrow("not found");
    await expect(
      transitionJobs(db, [a], { op: "complete", successCount: 0, failureCount: 0, results: [] }, T0),
    ).rejects.toThrow("needs the job row");
  });

  it("completes locked jobs together; an illegal one gets its error and stays unchanged", async () => {
    const dispatching = await newJob();
    await transitionJob(db, dispatching, { op: "dispatch", gatewayId: "gw-1" }, T0);
    const running = await newJob();
    await transitionJob(db, running, { op: "dispatch", gatewayId: "gw-1" }, T0);
    await transitionJob(db, running, { op: "start", agentId: "a0" }, T0);
    const pending = await newJob();
    const later = new Date(T0.getTime() + 250);
    const out = await db.transaction(async (tx) => {
      const locked = await tx.many<PollJobRow & Record<string, unknown>>(
        sql`SELECT * FROM poll_jobs WHERE id = ANY(${[dispatching, running, pending]}::uuid[]) FOR UPDATE`,
      );
      const row = (id: string) => locked.find((l) => l.id === id) as PollJobRow;
      const complete = { op: "complete" as const, successCount: 1, failureCount: 0, results: [{ n: 1 }] };
      return transitionLockedJobs(
        tx,
        [
          { job: row(dispatching), ops: [{ op: "start", agentId: "a1" }, complete] },
          { job: row(pending), ops: [complete] },
          { job: row(running), ops: [complete] },
        ],
        later,
      );
    });
    expect(out[0]).toMatchObject({
      id: dispatching,
      status: "completed",
      agent_id: "a1",
      results: [{ n: 1 }],
    });
    expect(out[1]).toBeInstanceOf(InvalidTransitionError);
    expect(out[2]).toMatchObject({ id: running, status: "completed", agent_id: "a0", duration_ms: 250 });
    expect((out[2] as PollJobRow).completed_at?.getTime()).toBe(later.getTime());
    const p = await db.one<{ status: string }>(sql`SELECT status FROM poll_jobs WHERE id = ${pending}`);
    expect(p?.status).toBe("pending");
  });
});
