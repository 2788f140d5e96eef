import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../test/helpers/context.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";
import { agentOperation, markSilent, registerAgent, registerGateway } from "./fleet.ts";
import { clearPlaceableAlerts, endJobsOfGoneAgents } from "./gone-agents.ts";
import { claimJobs, startJob } from "./jobs.ts";
import { scheduleDue } from "./scheduler.ts";

describe("jobs of an agent that is gone", () => {
  let ctx: AppContext;
  let clock = Date.parse("2026-11-24T12:00:00Z");
  beforeAll(async () => {
    ctx = await createTestContext();
    ctx.now = () => new Date(clock);
  });
  afterAll(async () => {
    await ctx?.db.close();
  });

  const check = (id: string) =>
    ctx.db.one<{ last_result: string | null; last_error: string | null; inflight_job_id: string | null }>(
      sql`SELECT last_result, last_error, inflight_job_id FROM service_checks WHERE id = ${id}`,
    );
  const job = (checkId: string) =>
    ctx.db.one<{
      status: string;
      error_code: string | null;
      error_message: string | null;
      retry_count: number;
    }>(
      sql`SELECT status, error_code, error_message, retry_count FROM poll_jobs
          WHERE ${checkId}::uuid = ANY(check_ids) ORDER BY inserted_at DESC LIMIT 1`,
    );
  const openAlerts = () =>
    ctx.db.many<{ title: string; service_check_id: string; severity: string }>(
      sql`SELECT title, service_check_id, severity FROM alerts
          WHERE status IN ('pending', 'acknowledged', 'escalated') ORDER BY title`,
    );

  it("retry a running unpinned job elsewhere, end a pinned one as unknown with the reason, and alert", async () => {
    await registerGateway(ctx, "gw-1", {});
    for (const uid of ["ag-dead", "ag-alive"]) {
      await registerAgent(ctx, uid, {});
      await agentOperation(ctx, uid, "establish_connection", { gateway_id: "gw-1" });
    }
    const at = new Date(clock);
    const [pinned, free, ghost] = await ctx.db.many<{ id: string }>(sql`
      INSERT INTO service_checks (name, check_type, target, interval_seconds, agent_uid, next_run_at)
      VALUES ('pinned to the dead agent', 'tcp', '127.0.0.1', 60, 'ag-dead', ${at}),
             ('may run anywhere', 'tcp', '127.0.0.1', 60, NULL, ${at}),
             ('pinned to an agent not yet installed', 'tcp', '127.0.0.1', 60, 'ag-later', ${at})
      RETURNING id`);
    if (!pinned || !free || !ghost) throw new Error("checks not created");
    await scheduleDue(ctx, {});
    // The unpinned job is claimed and started by the agent that is about to die; the pinned job
    // stays pending (its agent never claims again).
    const claimed = await claimJobs(ctx, { gatewayId: "gw-1", agentUids: ["ag-alive-later"], max: 10 });
    const freeJob = claimed.find((j) => j.checks.some((c) => c.id === free.id));
    if (!freeJob) throw new Error("the unpinned job was not claimable");
    await startJob(ctx, freeJob.id, "ag-dead");

    // Nothing happens while the agents heartbeat (and the unregistered agent has its grace).
    expect(await endJobsOfGoneAgents(ctx, 60)).toEqual({ retried: 0, ended: 0, alerted: 0 });

    clock += 120_000;
    await registerAgent(ctx, "ag-alive", {}); // still heartbeating
    await agentOperation(ctx, "ag-alive", "establish_connection", { gateway_id: "gw-1" }).catch(() => {});
    expect((await markSilent(ctx, 60)).agents).toContain("ag-dead");
    const out = await endJobsOfGoneAgents(ctx, 60);
    expect(out).toEqual({ retried: 1, ended: 2, alerted: 2 });

    // The unpinned job went back to pending for another agent, with the reason kept on the check.
    expect(await job(free.id)).toMatchObject({ status: "pending", retry_count: 1 });
    expect((await check(free.id))?.inflight_job_id).not.toBeNull();

    // The pinned checks are unknown with the reason, never their last success; their jobs ended.
    expect(await check(pinned.id)).toMatchObject({
      last_result: "unknown",
      last_error: "not run: agent ag-dead is disconnected",
      inflight_job_id: null,
    });
    expect(await job(pinned.id)).toMatchObject({
      status: "cancelled",
      error_message: "agent ag-dead is disconnected",
    });
    expect(await check(ghost.id)).toMatchObject({
      last_result: "unknown",
      last_error: "not run: agent ag-later is not registered",
    });
    expect(await openAlerts()).toEqual([
      {
        title: "pinned to an agent not yet installed: cannot run, agent ag-later is not registered",
        service_check_id: ghost.id,
        severity: "warning",
      },
      {
        title: "pinned to the dead agent: cannot run, agent ag-dead is disconnected",
        service_check_id: pinned.id,
        severity: "warning",
      },
    ]);
    // A second sweep finds nothing new to end and opens nothing twice.
    expect(await endJobsOfGoneAgents(ctx, 60)).toEqual({ retried: 0, ended: 0, alerted: 0 });

    // The dead agent returns: its check's alert resolves; the ghost's stays.
    expect(await clearPlaceableAlerts(ctx)).toBe(0);
    await registerAgent(ctx, "ag-dead", {});
    await agentOperation(ctx, "ag-dead", "establish_connection", { gateway_id: "gw-1" });
    expect(await clearPlaceableAlerts(ctx)).toBe(1);
    expect((await openAlerts()).map((a) => a.service_check_id)).toEqual([ghost.id]);
    // Moving the ghost's check off its pin resolves the last one.
    await ctx.db.query(sql`UPDATE service_checks SET agent_uid = NULL WHERE id = ${ghost.id}`);
    expect(await clearPlaceableAlerts(ctx)).toBe(1);
    expect(await openAlerts()).toEqual([]);
  });
});

describe("checks placed on a gateway", () => {
  let ctx: AppContext;
  let clock = Date.parse("2026-11-24T12:00:00Z");
  beforeAll(async () => {
    ctx = await createTestContext();
    ctx.now = () => new Date(clock);
  });
  afterAll(async () => {
    await ctx?.db.close();
  });

  it("go only to that gateway, never to the default agent, and end as unknown when it goes offline", async () => {
    await registerGateway(ctx, "gw-site-a", {});
    await registerGateway(ctx, "gw-site-b", {});
    const at = new Date(clock);
    const [placed] = await ctx.db.many<{ id: string }>(sql`
      INSERT INTO service_checks (name, check_type, target, interval_seconds, gateway_id, next_run_at)
      VALUES ('behind site a', 'tcp', '127.0.0.1', 60, 'gw-site-a', ${at}) RETURNING id`);
    if (!placed) throw new Error("check not created");
    // The embedded default placement does not capture a gateway-placed check.
    await scheduleDue(ctx, { defaultAgentUid: "embedded-host" });
    const job = await ctx.db.one<{ target_agent_uid: string | null; target_gateway_id: string | null }>(
      sql`SELECT target_agent_uid, target_gateway_id FROM poll_jobs WHERE ${placed.id}::uuid = ANY(check_ids)`,
    );
    expect(job).toEqual({ target_agent_uid: null, target_gateway_id: "gw-site-a" });
    expect(await claimJobs(ctx, { gatewayId: "gw-site-b", agentUids: ["ag-b"], max: 10 })).toEqual([]);

    // Site a goes offline before claiming: the job ends, the check is unknown, an alert says why.
    clock += 120_000;
    expect((await markSilent(ctx, 60)).gateways).toContain("gw-site-a");
    await registerGateway(ctx, "gw-site-b", {}); // b is still alive
    const out = await endJobsOfGoneAgents(ctx, 60);
    expect(out).toMatchObject({ ended: 1, alerted: 1 });
    const c = await ctx.db.one<{ last_result: string; last_error: string }>(
      sql`SELECT last_result, last_error FROM service_checks WHERE id = ${placed.id}`,
    );
    expect(c).toEqual({ last_result: "unknown", last_error: "not run: gateway gw-site-a is offline" });
    // Site a is back: the alert resolves; the next job is claimable by site a only.
    await registerGateway(ctx, "gw-site-a", {});
    expect(await clearPlaceableAlerts(ctx)).toBe(1);
    await scheduleDue(ctx, {});
    expect(await claimJobs(ctx, { gatewayId: "gw-site-b", agentUids: ["ag-b"], max: 10 })).toEqual([]);
    const claimed = await claimJobs(ctx, { gatewayId: "gw-site-a", agentUids: ["ag-a"], max: 10 });
    expect(claimed.map((j) => j.checks.map((k) => k.id))).toEqual([[placed.id]]);
  });
});

describe("checks placed on a pool of agents by label", () => {
  let ctx: AppContext;
  let clock = Date.parse("2026-11-24T12:00:00Z");
  beforeAll(async () => {
    ctx = await createTestContext();
    ctx.now = () => new Date(clock);
  });
  afterAll(async () => {
    await ctx?.db.close();
  });

  const label = (uid: string, labels: Record<string, string>) =>
    ctx.db.query(sql`UPDATE agents SET labels = ${JSON.stringify(labels)}::jsonb WHERE uid = ${uid}`);

  it("go only to agents carrying every label, never to the default agent, and say so when the pool is empty", async () => {
    await registerGateway(ctx, "gw-1", {});
    for (const uid of ["ag-dc1", "ag-dc2", "ag-dc2-edge"]) {
      await registerAgent(ctx, uid, {});
      await agentOperation(ctx, uid, "establish_connection", { gateway_id: "gw-1" });
    }
    await label("ag-dc1", { site: "dc1" });
    await label("ag-dc2", { site: "dc2" });
    await label("ag-dc2-edge", { site: "dc2", role: "edge" });
    const at = new Date(clock);
    const [edge, dc3] = await ctx.db.many<{ id: string }>(sql`
      INSERT INTO service_checks (name, check_type, target, interval_seconds, agent_labels, next_run_at)
      VALUES ('edge in dc2', 'tcp', '127.0.0.1', 60, '{"role": "edge", "site": "dc2"}', ${at}),
             ('somewhere in dc3', 'tcp', '127.0.0.1', 60, '{"site": "dc3"}', ${at})
      RETURNING id`);
    if (!edge || !dc3) throw new Error("checks not created");
    await scheduleDue(ctx, { defaultAgentUid: "embedded-host" });
    const jobs = await ctx.db.many<{ target_agent_uid: string | null; target_agent_labels: unknown }>(
      sql`SELECT target_agent_uid, target_agent_labels FROM poll_jobs ORDER BY target_agent_labels::text`,
    );
    expect(jobs).toEqual([
      { target_agent_uid: null, target_agent_labels: { role: "edge", site: "dc2" } },
      { target_agent_uid: null, target_agent_labels: { site: "dc3" } },
    ]);
    // A gateway fronting only agents without the labels claims nothing.
    expect(await claimJobs(ctx, { gatewayId: "gw-1", agentUids: ["ag-dc1", "ag-dc2"], max: 10 })).toEqual([]);
    // With a matching agent among its waiters, the job names who may run it.
    const claimed = await claimJobs(ctx, {
      gatewayId: "gw-1",
      agentUids: ["ag-dc1", "ag-dc2", "ag-dc2-edge"],
      max: 10,
    });
    expect(claimed.map((j) => [j.checks.map((c) => c.id), j.eligible_agent_uids])).toEqual([
      [[edge.id], ["ag-dc2-edge"]],
    ]);

    // Nobody carries site=dc3: after the grace the check is unknown and an alert says why.
    expect(await endJobsOfGoneAgents(ctx, 60)).toMatchObject({ ended: 0, alerted: 0 });
    clock += 120_000;
    for (const uid of ["ag-dc1", "ag-dc2", "ag-dc2-edge"]) await registerAgent(ctx, uid, {});
    const out = await endJobsOfGoneAgents(ctx, 60);
    expect(out).toMatchObject({ ended: 1, alerted: 1 });
    const c = await ctx.db.one<{ last_result: string; last_error: string }>(
      sql`SELECT last_result, last_error FROM service_checks WHERE id = ${dc3.id}`,
    );
    expect(c).toEqual({
      last_result: "unknown",
      last_error: "not run: no connected agent has the labels site=dc3",
    });
    const alert = await ctx.db.one<{ title: string; description: string }>(
      sql`SELECT title, description FROM alerts WHERE service_check_id = ${dc3.id} AND status = 'pending'`,
    );
    expect(alert?.title).toBe("somewhere in dc3: cannot run, no connected agent has the labels site=dc3");
    expect(alert?.description).toContain("the agents labelled site=dc3");
    // An operator labels an agent dc3: the alert resolves and the next job is claimable by it.
    await label("ag-dc1", { site: "dc3" });
    expect(await clearPlaceableAlerts(ctx)).toBe(1);
    clock += 60_000;
    await scheduleDue(ctx, {});
    const next = await claimJobs(ctx, { gatewayId: "gw-1", agentUids: ["ag-dc1", "ag-dc2"], max: 10 });
    expect(next.map((j) => [j.checks.map((k) => k.id), j.eligible_agent_uids])).toEqual([
      [[dc3.id], ["ag-dc1"]],
    ]);
  });
});

describe("checks placed by default on the leader's embedded agent", () => {
  let ctx: AppContext;
  let clock = Date.parse("2026-11-24T12:00:00Z");
  beforeAll(async () => {
    ctx = await createTestContext();
    ctx.now = () => new Date(clock);
  });
  afterAll(async () => {
    await ctx?.db.close();
  });

  const jobOf = (checkId: string) =>
    ctx.db.one<{
      id: string;
      status: string;
      retry_count: number;
      target_agent_uid: string | null;
      default_placement: boolean;
    }>(
      sql`SELECT id, status, retry_count, target_agent_uid,
                 COALESCE((metadata->>'default_placement')::boolean, false) AS default_placement
          FROM poll_jobs WHERE ${checkId}::uuid = ANY(check_ids) ORDER BY inserted_at DESC LIMIT 1`,
    );

  it("move to the new leader's agent when the old leader's agent dies; checks pinned to it still end unknown", async () => {
    // Two replicas' embedded gateways and agents; the old leader's will die.
    for (const id of ["embedded-old", "embedded-new"]) {
      await registerGateway(ctx, id, {});
      await registerAgent(ctx, id, {});
      await agentOperation(ctx, id, "establish_connection", { gateway_id: id });
    }
    const at = new Date(clock);
    const [running, pinned] = await ctx.db.many<{ id: string }>(sql`
      INSERT INTO service_checks (name, check_type, target, interval_seconds, agent_uid, next_run_at)
      VALUES ('unassigned, running', 'tcp', '127.0.0.1', 60, NULL, ${at}),
             ('pinned to the old leader', 'tcp', '127.0.0.1', 60, 'embedded-old', ${at})
      RETURNING id`);
    const [pending] = await ctx.db.many<{ id: string }>(sql`
      INSERT INTO service_checks (name, check_type, target, interval_seconds, next_run_at)
      VALUES ('unassigned, not yet claimed', 'tcp', '127.0.0.1', 60, ${new Date(clock + 1000)})
      RETURNING id`);
    if (!running || !pinned || !pending) throw new Error("checks not created");

    // The old leader schedules: the unassigned check goes to its agent by default, in a job of
    // its own (a pin to the same agent is a different placement).
    await scheduleDue(ctx, { defaultAgentUid: "embedded-old" });
    const runningJob = await jobOf(running.id);
    expect(runningJob).toMatchObject({ target_agent_uid: "embedded-old", default_placement: true });
    expect(await jobOf(pinned.id)).toMatchObject({
      target_agent_uid: "embedded-old",
      default_placement: false,
    });
    expect((await jobOf(pinned.id))?.id).not.toBe(runningJob?.id);
    // The old leader's agent takes both jobs and starts the unassigned one.
    const claimed = await claimJobs(ctx, { gatewayId: "embedded-old", agentUids: ["embedded-old"], max: 10 });
    expect(claimed.map((j) => j.id)).toContain(runningJob?.id);
    await startJob(ctx, runningJob?.id as string, "embedded-old");
    clock += 2000;
    await scheduleDue(ctx, { defaultAgentUid: "embedded-old" });
    expect(await jobOf(pending.id)).toMatchObject({ status: "pending", target_agent_uid: "embedded-old" });

    // The old leader is killed; its agent falls silent. The new leader's sweep moves the
    // unassigned checks' jobs to its own agent instead of ending them.
    clock += 120_000;
    await registerAgent(ctx, "embedded-new", {}); // still heartbeating
    expect((await markSilent(ctx, 60)).agents).toEqual(["embedded-old"]);
    expect(await endJobsOfGoneAgents(ctx, 60, { defaultAgentUid: "embedded-new" })).toEqual({
      retried: 2,
      ended: 1,
      alerted: 1,
    });
    expect(await jobOf(running.id)).toMatchObject({
      status: "pending",
      retry_count: 1,
      target_agent_uid: "embedded-new",
    });
    expect(await jobOf(pending.id)).toMatchObject({
      status: "pending",
      retry_count: 0,
      target_agent_uid: "embedded-new",
    });
    const state = (id: string) =>
      ctx.db.one<{ last_result: string | null; inflight: boolean }>(
        sql`SELECT last_result, inflight_job_id IS NOT NULL AS inflight FROM service_checks WHERE id = ${id}`,
      );
    // Still held by their (moved) jobs, never shown unknown; the pinned check is, with its alert.
    expect(await state(running.id)).toEqual({ last_result: null, inflight: true });
    expect(await state(pending.id)).toEqual({ last_result: null, inflight: true });
    expect((await state(pinned.id))?.last_result).toBe("unknown");
    const alerts = await ctx.db.many<{ service_check_id: string }>(
      sql`SELECT service_check_id FROM alerts WHERE incident_key LIKE 'service_check:%:unplaceable'`,
    );
    expect(alerts.map((a) => a.service_check_id)).toEqual([pinned.id]);

    // The new leader's agent claims both (after the retry's backoff); a second sweep changes nothing.
    expect(await endJobsOfGoneAgents(ctx, 60, { defaultAgentUid: "embedded-new" })).toEqual({
      retried: 0,
      ended: 0,
      alerted: 0,
    });
    clock += 10_000;
    const taken = await claimJobs(ctx, { gatewayId: "embedded-new", agentUids: ["embedded-new"], max: 10 });
    expect(taken.flatMap((j) => j.checks.map((c) => c.id)).sort()).toEqual([running.id, pending.id].sort());
  });
});
