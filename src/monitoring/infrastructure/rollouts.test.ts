import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../test/helpers/database.ts";
import { SYSTEM_ACTOR } from "../../access/actor.ts";
import { loadConfig } from "../../config/config.ts";
import type { AppContext } from "../../kernel/context.ts";
import { InvalidTransitionError } from "../../kernel/errors.ts";
import { createLogger } from "../../kernel/logger.ts";
import { sql } from "../../storage/sql.ts";
import {
  createRollout,
  dispatchRollout,
  reconcileAgent,
  reportProgress,
  reportResult,
  setRolloutState,
} from "./rollouts.ts";

describe("agent release rollouts", () => {
  let tdb: TestDatabase;
  let ctx: AppContext;
  beforeAll(async () => {
    tdb = await createTestDatabase();
    ctx = {
      config: loadConfig({}),
      db: tdb.db,
      log: createLogger("silent"),
      secretKey: Buffer.alloc(32),
      now: () => new Date(),
    };
    for (const [uid, version] of [
      ["a1", "1.0"],
      ["a2", "1.0"],
      ["a3", "2.0"],
      ["a4", "1.0"],
      ["a5", "1.0"],
    ]) {
      await tdb.db.query(sql`INSERT INTO agents (uid, version) VALUES (${uid}, ${version})`);
    }
  });
  afterAll(async () => {
    await tdb?.db.close();
  });

  const target = async (rollout: string, uid: string) =>
    (await tdb.db.one(sql`SELECT t.status, t.message, t.last_error, t.progress_percent, a.release_rollout_state
      FROM agent_release_targets t JOIN agents a ON a.uid = t.agent_uid WHERE t.rollout_id = ${rollout} AND t.agent_uid = ${uid}`)) as Record<
      string,
      unknown
    >;

  it("dispatches within batch capacity, follows progress and results, completes when all terminal", async () => {
    const r = await createRollout(ctx, SYSTEM_ACTOR, {
      desired_version: "2.0",
      agent_uids: ["a1", "a2", "a3", "a4"],
      batch_size: 2,
    });
    expect((await target(r.id, "a1")).release_rollout_state).toBe("pending");
    const reachable = new Set(["a1", "a2", "a3"]);
    const sent: string[] = [];
    const d1 = await dispatchRollout(ctx, r.id, (uid) => {
      sent.push(uid);
      return reachable.has(uid);
    });
    expect(d1.dispatched).toBe(2);
    expect((await target(r.id, "a3")).status).toBe("healthy"); // already compliant
    expect((await target(r.id, "a3")).message).toBe("agent already compliant");
    expect((await target(r.id, "a1")).status).toBe("dispatched");
    expect((await target(r.id, "a2")).status).toBe("dispatched");
    expect((await target(r.id, "a4")).status).toBe("pending"); // capacity exhausted
    expect(await reportProgress(ctx, r.id, "a1", "downloading", 40)).toBe("downloading");
    expect(await reportProgress(ctx, r.id, "a1", "weird")).toBe("dispatched");
    expect(await reportProgress(ctx, r.id, "a1", "verifying", 80)).toBe("verifying");
    expect(await reportResult(ctx, r.id, "a1", { success: true, version: "2.0" })).toBe("healthy");
    expect((await tdb.db.one(sql`SELECT version FROM agents WHERE uid = 'a1'`))?.version).toBe("2.0");
    await expect(reportProgress(ctx, r.id, "a1", "downloading")).rejects.toBeInstanceOf(
      InvalidTransitionError,
    );
    expect(await reportResult(ctx, r.id, "a2", { success: false, reason: "disk full" })).toBe("failed");
    expect((await target(r.id, "a2")).last_error).toBe("disk full");
    // a4 unreachable: stays pending
    const d2 = await dispatchRollout(ctx, r.id, () => false);
    expect(d2.dispatched).toBe(0);
    expect((await target(r.id, "a4")).message).toBe("waiting for agent control stream");
    expect(await reconcileAgent(ctx, "a4", "2.0")).toBe(1);
    expect((await target(r.id, "a4")).status).toBe("healthy");
    const row = await tdb.db.one(
      sql`SELECT status, completed_at FROM agent_release_rollouts WHERE id = ${r.id}`,
    );
    expect(row?.status).toBe("completed");
    expect(row?.completed_at).toBeInstanceOf(Date);
  });

  it("cancel marks pending targets canceled; a dispatch error fails the target", async () => {
    const r = await createRollout(ctx, SYSTEM_ACTOR, {
      desired_version: "3.0",
      agent_uids: ["a5", "a2"],
      batch_size: 1,
    });
    await dispatchRollout(ctx, r.id, (uid) => {
      if (uid === "a2") throw new Error("stream closed");
      return false; // a5 unreachable: stays pending
    });
    expect((await target(r.id, "a2")).status).toBe("failed");
    expect((await target(r.id, "a2")).message).toBe("release dispatch failed");
    expect(await setRolloutState(ctx, r.id, "pause")).toBe("paused");
    expect((await dispatchRollout(ctx, r.id, () => true)).dispatched).toBe(0);
    expect(await setRolloutState(ctx, r.id, "cancel")).toBe("canceled");
    const a5 = await target(r.id, "a5");
    expect(a5.status).toBe("canceled");
    expect(a5.last_error).toBe("rollout_canceled");
    expect(a5.release_rollout_state).toBe("canceled");
    await expect(setRolloutState(ctx, r.id, "resume")).rejects.toBeInstanceOf(InvalidTransitionError);
  });
});
