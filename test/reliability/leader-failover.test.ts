import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { createPgDatabase, testBackend } from "../helpers/database.ts";
import { schedulerHolder, startReplica, stopReplicas } from "../helpers/replica.ts";

/**
 * Issue 19: leader failover, measured. Two real `netmon serve` processes share one PostgreSQL
 * database; the one holding the scheduler's advisory lock is killed with SIGKILL, and we
 * measure how long until the other holds the lock and schedules a due check, while the
 * survivor keeps answering. Bound: 10 s (the requirement). PostgreSQL only: an
 * embedded database belongs to one process, so there is no second replica to fail over to.
 */
const BOUND_MS = 10_000;

const KEY_FILE = path.join(os.tmpdir(), `netmon-failover-${process.pid}.key`);
afterAll(() => {
  stopReplicas();
  fs.rmSync(KEY_FILE, { force: true });
});

/** A replica on `databaseUrl`; one key file for both replicas, as in production. */
const replica = (databaseUrl: string) =>
  startReplica(
    { DATABASE_URL: databaseUrl, NETMON_SECRET_KEY_FILE: KEY_FILE, NETMON_LOG_FORMAT: "json" },
    "netmon-failover-",
  );

async function until<T>(
  fn: () => Promise<T | null | undefined | false>,
  ms: number,
  what: string,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe.skipIf(testBackend() !== "postgres")("leader failover (two replicas on PostgreSQL)", () => {
  it(`a SIGKILLed leader's scheduler is taken over within ${BOUND_MS / 1000} s, the survivor answering throughout`, async () => {
    const url = await createPgDatabase(true);
    const db = await PostgresDb.open({ connectionString: url, poolSize: 2, applicationName: "netmon-test" });
    try {
      const a = await replica(url);
      const leaderPid = await until(() => schedulerHolder(db), 60_000, "a leader");
      const b = await replica(url);
      // B starts as a follower: the lock stays with A's session.
      await new Promise((r) => setTimeout(r, 1500));
      expect(await schedulerHolder(db)).toBe(leaderPid);

      // Probe the survivor every 50 ms from the kill until the takeover is done.
      const probes: number[] = [];
      let probing = true;
      const prober = (async () => {
        while (probing) {
          probes.push(
            await fetch(`${b.url}/health`, { signal: AbortSignal.timeout(10_000) }).then(
              (r) => r.status,
              () => 0,
            ),
          );
          await new Promise((r) => setTimeout(r, 50));
        }
      })();

      const killedAt = performance.now();
      a.child.kill("SIGKILL");
      const newPid = await until(
        async () => {
          const pid = await schedulerHolder(db);
          return pid !== null && pid !== leaderPid ? pid : null;
        },
        BOUND_MS * 3,
        "the survivor to take the scheduler lock",
      );
      const lockMs = performance.now() - killedAt;

      // The new leader schedules: a check due now gets a poll job.
      const check = await db.one<{ id: string }>(
        `INSERT INTO service_checks (name, check_type, target, interval_seconds, next_run_at)
         VALUES ('failover', 'tcp', '192.0.2.1', 60, now() - interval '1 second') RETURNING id`,
      );
      await until(
        () => db.one(`SELECT id FROM poll_jobs WHERE $1::uuid = ANY(check_ids)`, [check?.id]),
        BOUND_MS,
        "a poll job from the new leader",
      );
      const scheduledMs = performance.now() - killedAt;
      probing = false;
      await prober;

      const report = {
        backend_pid_before: leaderPid,
        backend_pid_after: newPid,
        lock_taken_over_ms: Math.round(lockMs),
        due_check_scheduled_ms: Math.round(scheduledMs),
        survivor_health_probes: probes.length,
        survivor_non_200: probes.filter((s) => s !== 200).length,
        survivor_unanswered: probes.filter((s) => s === 0).length,
      };
      fs.mkdirSync(".tmp", { recursive: true });
      fs.writeFileSync(".tmp/leader-failover.json", `${JSON.stringify(report, null, 2)}\n`);
      console.log(`leader failover: ${JSON.stringify(report)}`);
      expect(lockMs).toBeLessThan(BOUND_MS);
      expect(scheduledMs).toBeLessThan(BOUND_MS);
      // The survivor always answers. (A 503 is possible on a starved machine: /health gives the
      // database 2 s to answer a ping; the report keeps the count.)
      expect(report.survivor_unanswered).toBe(0);
      b.child.kill("SIGTERM");
      await new Promise((r) => b.child.once("exit", r));
    } finally {
      await db.close();
    }
  }, 180_000);
});
