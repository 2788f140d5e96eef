/**
 * Agent release rollouts (reference §2.5): a rollout moves agents to `desired_version`, at
 * most `batch_size` in flight at once. Each agent has a target whose status follows
 * `releaseTargetMachine` and is mirrored into `agents.release_rollout_state`. Driven by the
 * release manager (these functions), not by JSON:API routes (spec 4.1 has none).
 */
import { randomUUID } from "node:crypto";
import type { Actor } from "../../access/actor.ts";
import {
  type StateTable,
  stateTable,
  transitionRows,
  writeTransitions,
} from "../../jsonapi/engine/transitions.ts";
import type { AppContext } from "../../kernel/context.ts";
import { InvalidRequestError, NotFoundError } from "../../kernel/errors.ts";
import type { Queryable } from "../../storage/db.ts";
import { join, sql } from "../../storage/sql.ts";
import {
  IN_FLIGHT,
  type ReleaseTargetState,
  releaseTargetMachine,
  rolloutMachine,
  TERMINAL,
} from "./machines.ts";

/** The rollouts' and targets' status columns are written only through these (issue 11). */
export const rolloutsTable = stateTable({
  machine: rolloutMachine,
  table: "agent_release_rollouts",
  key: "id",
  keyType: "uuid",
  touch: "updated_at",
  columns: { completed_at: "timestamptz" },
});

export const releaseTargetsTable = stateTable({
  machine: releaseTargetMachine,
  table: "agent_release_targets",
  key: "id",
  keyType: "uuid",
  touch: "updated_at",
  columns: {
    progress_percent: "integer",
    message: "text",
    last_error: "text",
    command_id: "text",
    current_version: "text",
    dispatched_at: "timestamptz",
    completed_at: "timestamptz",
  },
});

/** Apply one transition to a row the caller locked; throws InvalidTransitionError when refused. */
async function writeLocked<R extends { id: string; status: string }>(
  tx: Queryable,
  t: StateTable,
  row: R,
  transition: string,
  changes: Record<string, unknown>,
  now: Date,
): Promise<R> {
  const [out] = await writeTransitions<R & { [k: string]: unknown }>(
    tx,
    t,
    [{ id: row.id, seen: row.status, transitions: [transition], changes }],
    now,
  );
  if (out instanceof Error) throw out;
  return out as R;
}

export interface RolloutRow {
  id: string;
  desired_version: string;
  status: string;
  batch_size: number;
  batch_delay_seconds: number;
  completed_at: Date | null;
  [k: string]: unknown;
}

export interface TargetRow {
  id: string;
  rollout_id: string;
  agent_uid: string;
  status: ReleaseTargetState;
  progress_percent: number;
  command_id: string | null;
  current_version: string | null;
  message: string | null;
  last_error: string | null;
  dispatched_at: Date | null;
  completed_at: Date | null;
  [k: string]: unknown;
}

/** Sends the `agent.update_release` command; returns false when the agent is not reachable. */
export type Dispatcher = (
  agentUid: string,
  command: { type: "agent.update_release"; command_id: string; version: string },
) => Promise<boolean> | boolean;

async function lockTarget(tx: Queryable, rolloutId: string, agentUid: string): Promise<TargetRow> {
  const t = await tx.one<TargetRow>(
    sql`SELECT * FROM agent_release_targets WHERE rollout_id = ${rolloutId} AND agent_uid = ${agentUid} FOR UPDATE`,
  );
  if (!t) throw new NotFoundError(`no release target for agent '${agentUid}' in rollout ${rolloutId}`);
  return t;
}

/** Move a target through `transition`; mirrors the state onto the agent. */
async function moveTarget(
  tx: Queryable,
  now: Date,
  t: TargetRow,
  transition: string,
  changes: {
    progress_percent?: number;
    message?: string | null;
    last_error?: string | null;
    command_id?: string;
    current_version?: string;
  } = {},
): Promise<ReleaseTargetState> {
  // The target the machine allows (InvalidTransitionError otherwise), for the derived columns.
  const to = (releaseTargetMachine.transitions[transition]?.to ?? t.status) as ReleaseTargetState;
  const terminal = TERMINAL.includes(to);
  const inFlight = IN_FLIGHT.includes(to);
  await writeLocked(
    tx,
    releaseTargetsTable,
    t,
    transition,
    {
      progress_percent: changes.progress_percent ?? (to === "healthy" ? 100 : t.progress_percent),
      message: changes.message === undefined ? t.message : changes.message,
      last_error: changes.last_error === undefined ? t.last_error : changes.last_error,
      command_id: changes.command_id ?? t.command_id,
      current_version: changes.current_version ?? t.current_version,
      dispatched_at: inFlight && !t.dispatched_at ? now : t.dispatched_at,
      completed_at: terminal ? now : null,
    },
    now,
  );
  await tx.query(
    sql`UPDATE agents SET release_rollout_state = ${to}, last_update_at = ${now},
        last_update_error = ${to === "failed" || to === "rolled_back" ? (changes.last_error ?? t.last_error) : null}
        WHERE uid = ${t.agent_uid}`,
  );
  return to;
}

export async function createRollout(
  ctx: AppContext,
  actor: Actor,
  input: {
    desired_version: string;
    agent_uids: readonly string[];
    batch_size?: number;
    batch_delay_seconds?: number;
    notes?: string;
  },
): Promise<RolloutRow> {
  if (!input.desired_version?.trim()) throw new InvalidRequestError("desired_version is required");
  if (input.agent_uids.length === 0) throw new InvalidRequestError("a rollout needs at least one agent");
  const batch = input.batch_size ?? 10;
  if (!Number.isInteger(batch) || batch < 1)
    throw new InvalidRequestError("batch_size must be a positive integer");
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const r = (await tx.one<RolloutRow>(
      sql`INSERT INTO agent_release_rollouts (desired_version, batch_size, batch_delay_seconds, notes, created_by, created_at, updated_at)
          VALUES (${input.desired_version}, ${batch}, ${input.batch_delay_seconds ?? 0}, ${input.notes ?? null}, ${actor.email ?? actor.id}, ${now}, ${now})
          RETURNING *`,
    )) as RolloutRow;
    const uids = [...new Set(input.agent_uids)];
    await tx.query(
      sql`INSERT INTO agent_release_targets (rollout_id, agent_uid, created_at, updated_at) VALUES ${join(
        uids.map((u) => sql`(${r.id}, ${u}, ${now}, ${now})`),
      )}`,
    );
    await tx.query(sql`UPDATE agents SET desired_version = ${input.desired_version}, release_rollout_state = 'pending'
                       WHERE uid IN (${join(uids.map((u) => sql`${u}`))})`);
    return r;
  });
}

/**
 * Dispatch pending targets up to the in-flight capacity (batch_size). An agent already on the
 * desired version becomes healthy ("agent already compliant"); an unreachable one stays
 * pending ("waiting for agent control stream"); a dispatch error fails the target.
 */
export async function dispatchRollout(
  ctx: AppContext,
  rolloutId: string,
  dispatch: Dispatcher,
): Promise<{ dispatched: number }> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const r = await tx.one<RolloutRow>(
      sql`SELECT * FROM agent_release_rollouts WHERE id = ${rolloutId} FOR UPDATE`,
    );
    if (!r) throw new NotFoundError(`rollout ${rolloutId} not found`);
    if (r.status !== "active") return { dispatched: 0 };
    const inFlight = await tx.one<{ n: number }>(
      sql`SELECT count(*)::int8 AS n FROM agent_release_targets WHERE rollout_id = ${rolloutId}
          AND status IN (${join(IN_FLIGHT.map((s) => sql`${s}`))})`,
    );
    let capacity = r.batch_size - Number(inFlight?.n ?? 0);
    let dispatched = 0;
    const pending = await tx.many<TargetRow & { version: string | null }>(
      sql`SELECT t.*, a.version FROM agent_release_targets t LEFT JOIN agents a ON a.uid = t.agent_uid
          WHERE t.rollout_id = ${rolloutId} AND t.status = 'pending' ORDER BY t.created_at, t.agent_uid FOR UPDATE OF t`,
    );
    for (const t of pending) {
      if (t.version === r.desired_version) {
        await moveTarget(tx, now, t, "dispatch_compliant", {
          message: "agent already compliant",
          current_version: t.version,
        });
        continue;
      }
      if (capacity <= 0) continue;
      const commandId = randomUUID();
      let ok: boolean;
      try {
        ok = await dispatch(t.agent_uid, {
          type: "agent.update_release",
          command_id: commandId,
          version: r.desired_version,
        });
      } catch (err) {
        await moveTarget(tx, now, t, "dispatch_failed", {
          message: "release dispatch failed",
          last_error: (err as Error).message,
        });
        continue;
      }
      if (!ok) {
        await tx.query(
          sql`UPDATE agent_release_targets SET message = 'waiting for agent control stream', updated_at = ${now} WHERE id = ${t.id}`,
        );
        continue;
      }
      await moveTarget(tx, now, t, "dispatch", {
        command_id: commandId,
        progress_percent: 0,
        message: "dispatched",
      });
      capacity--;
      dispatched++;
    }
    await completeIfDone(tx, now, rolloutId);
    return { dispatched };
  });
}

/** A progress report from the agent: downloading|verifying|staged|restarting (unknown → dispatched). */
export async function reportProgress(
  ctx: AppContext,
  rolloutId: string,
  agentUid: string,
  status: string,
  percent?: number,
): Promise<ReleaseTargetState> {
  const known = ["downloading", "verifying", "staged", "restarting"];
  const transition = `progress_${known.includes(status) ? status : "dispatched"}`;
  return ctx.db.transaction(async (tx) => {
    const t = await lockTarget(tx, rolloutId, agentUid);
    const p = percent === undefined ? undefined : Math.max(0, Math.min(100, Math.round(percent)));
    return moveTarget(tx, ctx.now(), t, transition, { progress_percent: p });
  });
}

/**
 * The command's result. Success: reported `staged` → staged, `rolled_back` → rolled_back, else
 * healthy with current_version. Failure: `rolled_back` → rolled_back, else failed
 * (last_error = reason || "command_failed").
 */
export async function reportResult(
  ctx: AppContext,
  rolloutId: string,
  agentUid: string,
  result: { success: boolean; status?: string; version?: string; reason?: string },
): Promise<ReleaseTargetState> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const t = await lockTarget(tx, rolloutId, agentUid);
    let to: ReleaseTargetState;
    if (result.success) {
      if (result.status === "staged") to = await moveTarget(tx, now, t, "result_staged");
      else if (result.status === "rolled_back") to = await moveTarget(tx, now, t, "result_rolled_back");
      else {
        to = await moveTarget(tx, now, t, "result_healthy", { current_version: result.version });
        if (result.version)
          await tx.query(sql`UPDATE agents SET version = ${result.version} WHERE uid = ${agentUid}`);
      }
    } else if (result.status === "rolled_back") {
      to = await moveTarget(tx, now, t, "result_rolled_back", {
        last_error: result.reason ?? "command_failed",
      });
    } else {
      to = await moveTarget(tx, now, t, "result_failed", { last_error: result.reason ?? "command_failed" });
    }
    await completeIfDone(tx, now, rolloutId);
    return to;
  });
}

/** An agent reporting the desired version makes its open target healthy. */
export async function reconcileAgent(ctx: AppContext, agentUid: string, version: string): Promise<number> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const targets = await tx.many<TargetRow>(
      sql`SELECT t.* FROM agent_release_targets t JOIN agent_release_rollouts r ON r.id = t.rollout_id
          WHERE t.agent_uid = ${agentUid} AND r.desired_version = ${version}
          AND t.status NOT IN (${join(TERMINAL.map((s) => sql`${s}`))}) FOR UPDATE OF t`,
    );
    for (const t of targets) {
      await moveTarget(tx, now, t, "reconcile", {
        message: "agent already at desired version",
        current_version: version,
      });
      await completeIfDone(tx, now, t.rollout_id);
    }
    return targets.length;
  });
}

export async function setRolloutState(
  ctx: AppContext,
  rolloutId: string,
  transition: "pause" | "resume" | "cancel",
): Promise<string> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const r = await tx.one<RolloutRow>(
      sql`SELECT * FROM agent_release_rollouts WHERE id = ${rolloutId} FOR UPDATE`,
    );
    if (!r) throw new NotFoundError(`rollout ${rolloutId} not found`);
    const { status: to } = await writeLocked(
      tx,
      rolloutsTable,
      r,
      transition,
      { completed_at: transition === "cancel" ? now : r.completed_at },
      now,
    );
    if (transition === "cancel") {
      const pending = await tx.many<TargetRow>(
        sql`SELECT * FROM agent_release_targets WHERE rollout_id = ${rolloutId} AND status = 'pending' FOR UPDATE`,
      );
      for (const t of pending) {
        await moveTarget(tx, now, t, "cancel", {
          message: "rollout canceled before dispatch",
          last_error: "rollout_canceled",
        });
      }
    }
    return to;
  });
}

async function completeIfDone(tx: Queryable, now: Date, rolloutId: string): Promise<void> {
  const open = await tx.one<{ n: number }>(
    sql`SELECT count(*)::int8 AS n FROM agent_release_targets WHERE rollout_id = ${rolloutId}
        AND status NOT IN (${join(TERMINAL.map((s) => sql`${s}`))})`,
  );
  if (Number(open?.n ?? 0) > 0) return;
  await transitionRows(tx, rolloutsTable, "complete", { ids: [rolloutId] }, { completed_at: now }, now);
}
