import http from "node:http";
import { afterAll, describe, expect, it } from "vitest";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { authHeaders } from "../helpers/auth.ts";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";
import { testBackend } from "../helpers/database.ts";
import { schedulerHolder, startReplica, stopReplicas } from "../helpers/replica.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Issue 19: kill -9 of a replica mid-poll. Two `netmon serve` replicas, each with its embedded
 * gateway and agent, share one PostgreSQL database.
 *
 * What the code does (decision 0600, src/monitoring/scheduler.ts, gone-agents.ts): the
 * scheduler runs on the leader only, and checks without placement run on the *leader's*
 * embedded agent (NETMON_UNASSIGNED_CHECKS=embedded, the default): their jobs carry the
 * leader's agent as `target_agent_uid`, so only that agent claims them. A is started first
 * and leads, so A's agent holds every run; B's agent idles. HTTP checks hit a loopback target
 * that holds `/hold` requests open, so A dies with runs in flight (jobs `running`, agent A).
 *
 * After the kill, B takes the scheduler lock and schedules the checks A was not holding on
 * its own agent. A's held jobs: the leader's liveness sweep marks A's silent agent
 * disconnected after NETMON_HEARTBEAT_TIMEOUT (20 s here) and fails the jobs it had started
 * (AGENT_UNAVAILABLE); the checks were not pinned to A, so each job is retried on the new
 * leader's agent (or, if the reaper timed the job out first, the pending retry is moved
 * there) and completes with B's results. Result recording is exactly-once per job: a job
 * completes once (poll-job-state.ts), results for a job that failed or timed out are refused,
 * and each result of a completed job is one service_status row. The *probe* is at-least-once:
 * the target saw A's request and sees B's again.
 */
const HEARTBEAT_TIMEOUT_S = 20;
const HELD = 4;
const FAST = 2;
const INTERVAL_S = 5;
const CHECK_TIMEOUT_S = 30;

let ws: CliWorkspace | undefined;
afterAll(() => {
  stopReplicas();
  ws?.cleanup();
});

/** A replica with its own embedded agent, noticing a silent agent after HEARTBEAT_TIMEOUT_S. */
const replica = (env: Record<string, string>) =>
  startReplica(
    { ...env, NETMON_EMBEDDED_AGENT: "true", NETMON_HEARTBEAT_TIMEOUT: `${HEARTBEAT_TIMEOUT_S}s` },
    "netmon-poll-kill-",
  );

describe.skipIf(testBackend() !== "postgres")("kill -9 mid-poll (two replicas on PostgreSQL)", () => {
  it("the survivor re-runs the dead replica's in-flight jobs and keeps every check running; each result recorded once", async () => {
    ws = await cliWorkspace("netmon-poll-kill");
    expect((await ws.netmon("users", "create", "--email", "p@example.test", "--role", "admin")).code).toBe(0);
    const tok = await ws.netmon("tokens", "create", "--user", "p@example.test");
    expect(tok.code, tok.stderr).toBe(0);
    const token = tok.stdout.trim();

    // The target holds /hold requests open until the kill, then answers everything at once.
    let holding = true;
    const held: http.ServerResponse[] = [];
    const target = http.createServer((req, res) => {
      req.resume();
      if (holding && req.url?.startsWith("/hold")) {
        held.push(res);
        return;
      }
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
    await new Promise<void>((r) => target.listen(0, "127.0.0.1", r));
    const base = `http://127.0.0.1:${(target.address() as { port: number }).port}`;

    const db = await PostgresDb.open({ connectionString: ws.dbUrl as string, poolSize: 2 });
    try {
      const env = { ...ws.env };
      // A first, alone: it takes the scheduler lock, so unassigned checks run on its agent.
      const a = await replica(env);
      const leaderPid = await waitFor(() => schedulerHolder(db), "replica A to lead", 60_000);
      const agentUids = async () =>
        (await db.many<{ uid: string }>("SELECT uid FROM agents ORDER BY created_time, uid")).map(
          (r) => r.uid,
        );
      const [aUid] = await waitFor(
        async () => ((await agentUids()).length === 1 ? agentUids() : null),
        "A's embedded agent",
        60_000,
      );
      const b = await replica(env);
      const bUid = await waitFor(
        async () => (await agentUids()).find((u) => u !== aUid),
        "B's embedded agent",
        60_000,
      );
      expect(await schedulerHolder(db)).toBe(leaderPid);

      const J = "application/vnd.api+json";
      const createCheck = async (name: string, url: string) => {
        const res = await fetch(`${b.url}/api/v2/service-checks`, {
          method: "POST",
          headers: { ...authHeaders(token), accept: J, "content-type": J },
          body: JSON.stringify({
            data: {
              type: "service-check",
              attributes: {
                name,
                check_type: "http",
                target: url,
                interval_seconds: INTERVAL_S,
                timeout_seconds: CHECK_TIMEOUT_S,
              },
            },
          }),
        });
        const doc = (await res.json()) as { data: { id: string } };
        expect(res.status, JSON.stringify(doc)).toBe(201);
        return doc.data.id;
      };
      const heldChecks: string[] = [];
      for (let i = 0; i < HELD; i++) heldChecks.push(await createCheck(`held ${i}`, `${base}/hold/${i}`));
      const fastChecks: string[] = [];
      for (let i = 0; i < FAST; i++) fastChecks.push(await createCheck(`fast ${i}`, `${base}/ok/${i}`));
      const checks = [...heldChecks, ...fastChecks];

      // A's agent is running every held check (its requests are waiting at the target), and
      // has already recorded results for the fast ones.
      const running = async () =>
        db.many<{ id: string; check_ids: string[] }>(
          `SELECT id, check_ids::text[] AS check_ids FROM poll_jobs
           WHERE status = 'running' AND agent_id = $1 AND check_ids && $2::uuid[]`,
          [aUid, heldChecks],
        );
      await waitFor(
        async () => {
          const jobs = await running();
          const inFlight = new Set(jobs.flatMap((j) => j.check_ids));
          return held.length >= HELD && heldChecks.every((c) => inFlight.has(c));
        },
        "A's agent to have every held check in flight",
        60_000,
      );
      await waitFor(
        async () => {
          const r = await db.one<{ n: number }>(
            `SELECT count(DISTINCT service_check_id)::int AS n FROM service_status
             WHERE agent_id = $1 AND status = 'success' AND service_check_id = ANY($2::uuid[])`,
            [aUid, fastChecks],
          );
          return r?.n === FAST;
        },
        "A's results for the fast checks",
        60_000,
      );
      const heldJobs = (await running()).map((j) => j.id);
      expect(heldJobs.length).toBeGreaterThan(0);
      // B's agent took nothing: unassigned checks follow the leader's embedded agent.
      const bJobs = await db.one<{ n: number }>(
        "SELECT count(*)::int AS n FROM poll_jobs WHERE agent_id = $1",
        [bUid],
      );
      expect(bJobs?.n).toBe(0);

      const killedAt = Date.now();
      a.child.kill("SIGKILL");
      await new Promise((r) => a.child.once("exit", r));
      // What A had recorded (committed) before it died; nothing of it may go missing.
      const recordedByA = await db.one<{ n: number }>(
        "SELECT count(*)::int AS n FROM service_status WHERE agent_id = $1",
        [aUid],
      );
      holding = false;
      for (const r of held) r.destroy();

      // B leads now.
      await waitFor(
        async () => {
          const pid = await schedulerHolder(db);
          return pid !== null && pid !== leaderPid;
        },
        "B to take the scheduler lock",
        30_000,
      );

      // Every job A held ends, re-run and completed by B's agent.
      await waitFor(
        async () => {
          const r = await db.one<{ n: number }>(
            "SELECT count(*)::int AS n FROM poll_jobs WHERE id = ANY($1::uuid[]) AND status = 'completed'",
            [heldJobs],
          );
          return r?.n === heldJobs.length;
        },
        "the jobs A held to be re-run by B",
        90_000,
        250,
      ).catch(async (err) => {
        const jobs = await db.many(
          `SELECT id, status, agent_id, target_agent_uid, retry_count, error_code, error_message
           FROM poll_jobs WHERE id = ANY($1::uuid[])`,
          [heldJobs],
        );
        throw new Error(`${(err as Error).message}: ${JSON.stringify(jobs)}`);
      });
      const reRun = await db.many<{
        id: string;
        agent_id: string;
        retry_count: number;
        check_ids: string[];
        results: { check_id: string; status: string }[];
      }>(
        `SELECT id, agent_id, retry_count, check_ids::text[] AS check_ids, results FROM poll_jobs
         WHERE id = ANY($1::uuid[])`,
        [heldJobs],
      );
      for (const j of reRun) {
        expect(j.agent_id, j.id).toBe(bUid);
        expect(j.retry_count, j.id).toBeGreaterThanOrEqual(1);
        expect(j.results.map((r) => r.check_id).sort(), j.id).toEqual([...j.check_ids].sort());
        for (const r of j.results) expect(r.status, `${j.id} ${r.check_id}`).toBe("success");
      }

      // B keeps running every check: at least two successes each, recorded by B's agent.
      await waitFor(
        async () => {
          const r = await db.one<{ n: number }>(
            `SELECT count(*)::int AS n FROM (
               SELECT service_check_id FROM service_status
               WHERE agent_id = $1 AND status = 'success' AND service_check_id = ANY($2::uuid[])
               GROUP BY service_check_id HAVING count(*) >= 2) ok`,
            [bUid, checks],
          );
          return r?.n === checks.length;
        },
        "B to record new successes for every check",
        90_000,
        250,
      );
      const recoveredMs = Date.now() - killedAt;

      // No check was left without its job or shown as unrunnable: nothing is held by A any more,
      // every check's last result is a success, and no "cannot run" alert was raised.
      const stuck = await db.one<{ n: number }>(
        `SELECT count(*)::int AS n FROM poll_jobs
         WHERE status IN ('pending', 'dispatching', 'running') AND (agent_id = $1 OR target_agent_uid = $1)`,
        [aUid],
      );
      expect(stuck?.n).toBe(0);
      const last = await db.many<{ id: string; last_result: string }>(
        "SELECT id, last_result FROM service_checks WHERE id = ANY($1::uuid[])",
        [checks],
      );
      for (const c of last) expect(c.last_result, c.id).toBe("success");
      const unplaceable = await db.one<{ n: number }>(
        "SELECT count(*)::int AS n FROM alerts WHERE incident_key LIKE 'service_check:%:unplaceable'",
      );
      expect(unplaceable?.n).toBe(0);

      // Nothing A recorded was lost.
      const stillByA = await db.one<{ n: number }>(
        "SELECT count(*)::int AS n FROM service_status WHERE agent_id = $1",
        [aUid],
      );
      expect(stillByA?.n).toBe(recordedByA?.n);

      // No run recorded twice: one statement (one snapshot) compares, per check, the
      // service_status rows with the results of completed jobs; a result is written with its
      // job's completion, in one transaction.
      const perCheck = await db.many<{ id: string; rows: number; results: number }>(
        `SELECT c.id,
           (SELECT count(*)::int FROM service_status s WHERE s.service_check_id = c.id) AS rows,
           (SELECT count(*)::int FROM poll_jobs j CROSS JOIN LATERAL jsonb_array_elements(j.results) r
             WHERE j.status = 'completed' AND c.id = ANY(j.check_ids) AND r->>'check_id' = c.id::text) AS results
         FROM service_checks c WHERE c.id = ANY($1::uuid[])`,
        [checks],
      );
      for (const c of perCheck) expect(c.rows, c.id).toBe(c.results);

      console.log(
        `poll kill: ${heldJobs.length} job(s) held by A re-run by B; every check succeeding on B ${recoveredMs} ms after the kill`,
      );
      b.child.kill("SIGTERM");
      await new Promise((r) => b.child.once("exit", r));
    } finally {
      await db.close();
      target.closeAllConnections();
      target.close();
    }
  }, 360_000);
});
