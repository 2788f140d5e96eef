import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { SCHEDULER_LOCK_KEY } from "../../src/monitoring/scheduler.ts";
import type { PostgresDb } from "../../src/storage/postgres/client.ts";

/**
 * `netmon serve` replicas for the reliability tests: real processes from bin/netmon.mjs (run
 * `npm run build:server` first), each with its own data directory (so its own instance id and
 * embedded gateway/agent), ephemeral ports and no bootstrap admin. `env` overrides the
 * defaults, except the data directory and the log level (info).
 * Call `stopReplicas()` in afterAll: it SIGKILLs what still runs and removes the directories.
 */
export interface Replica {
  child: ChildProcess;
  url: string;
  dataDir: string;
}

const BIN = path.resolve("bin/netmon.mjs");
const children: ChildProcess[] = [];
const dirs: string[] = [];

export function startReplica(env: Record<string, string>, prefix = "netmon-replica-"): Promise<Replica> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(dataDir);
  const child = spawn(process.execPath, [BIN, "serve"], {
    env: {
      ...process.env,
      PORT: "0",
      HOST: "127.0.0.1",
      NETMON_EMBEDDED_AGENT: "false",
      NETMON_INITIAL_ADMIN: "false",
      NETMON_OTLP_GRPC_PORT: "0",
      NETMON_SYSLOG_PORT: "0",
      NETMON_SNMP_TRAP_PORT: "0",
      ...env,
      // Always its own, even when `env` is a CLI workspace's (which names the workspace's and
      // silences logs): the start is recognised by the "listening" line logged at info.
      NETMON_DATA_DIR: dataDir,
      NETMON_LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`replica did not start: ${out}`)), 120_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /netmon listening on (http:\/\/[\d.:]+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({ child, url: m[1] as string, dataDir });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => reject(new Error(`replica exited ${code}: ${out}`)));
  });
}

export function stopReplicas(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  children.length = 0;
  dirs.length = 0;
}

/**
 * The backend pid holding the scheduler's advisory lock in this test's database, or null
 * (pg_locks is cluster-wide: other tests' servers hold the same key in their databases).
 */
export async function schedulerHolder(db: PostgresDb): Promise<number | null> {
  const r = await db.one<{ pid: number }>(
    `SELECT pid FROM pg_locks
     WHERE locktype = 'advisory' AND granted AND objsubid = 1
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND ((classid::int8 << 32) | objid::int8) = $1::int8`,
    [SCHEDULER_LOCK_KEY.toString()],
  );
  return r ? Number(r.pid) : null;
}
