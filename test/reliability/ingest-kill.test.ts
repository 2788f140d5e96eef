import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import path from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { loadConfig } from "../../src/config/config.ts";
import { openDatabase } from "../../src/storage/open.ts";
import { authHeaders } from "../helpers/auth.ts";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";
import { testBackend } from "../helpers/database.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Issues 15 and 19: "acknowledged means stored", proven with kill -9. Senders post OTLP/HTTP
 * log batches to a real `netmon serve` process; after a few hundred acknowledged records the
 * process is killed with SIGKILL mid-ingest (requests in flight). The server is started again
 * on the same database and every record whose request was answered 200 must be there —
 * written straight to the database (no NATS_URL) or buffered through JetStream (NATS_URL),
 * where units published but not yet stored are written by the restarted server's writer.
 */
const BIN = path.resolve("bin/netmon.mjs");
const NATS_URL = process.env.NETMON_TEST_NATS_URL ?? "nats://127.0.0.1:4222";
const SENDERS = 4;
const BATCH = 20;
const KILL_AFTER_RECORDS = 400;

let ws: CliWorkspace;
let token: string;

beforeAll(async () => {
  ws = await cliWorkspace("netmon-kill");
  const user = await ws.netmon("users", "create", "--email", "ingest@example.test", "--role", "operator");
  expect(user.code, user.stderr).toBe(0);
  const tok = await ws.netmon("tokens", "create", "--user", "ingest@example.test");
  expect(tok.code, tok.stderr).toBe(0);
  token = tok.stdout.trim();
}, 180_000);

afterAll(() => {
  ws?.cleanup();
});

interface Served {
  child: ChildProcessWithoutNullStreams;
  url: string;
  /** Everything the process printed so far (for a failure's message). */
  output(): string;
}

function serve(env: Record<string, string>): Promise<Served> {
  const child = spawn(process.execPath, [BIN, "serve"], {
    env: {
      ...process.env,
      ...ws.env,
      PORT: "0",
      HOST: "127.0.0.1",
      NETMON_LOG_LEVEL: "info",
      NETMON_EMBEDDED_AGENT: "false",
      NETMON_INITIAL_ADMIN: "false",
      ...env,
    },
  });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  let out = "";
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 90_000);
    const onData = (d: Buffer) => {
      out += d;
      const m = /netmon listening on (http:\/\/[\d.:]+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({ child, url: m[1] as string, output: () => out });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (d) => {
      out += d;
    });
    child.on("exit", (code, signal) => {
      clearTimeout(t);
      reject(new Error(`server exited (${code ?? signal}) before listening: ${out}`));
    });
  });
}

function logsRequest(bodies: string[]): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [{ key: "service.name", value: { stringValue: "kill-test" } }] },
        scopeLogs: [
          {
            logRecords: bodies.map((b) => ({
              timeUnixNano: String(BigInt(Date.now()) * 1_000_000n),
              severityNumber: 9,
              severityText: "INFO",
              body: { stringValue: b },
            })),
          },
        ],
      },
    ],
  });
}

/**
 * Post batches from SENDERS loops until each one fails (the process is gone); returns the
 * bodies of every record whose request was answered 200, and calls `onProgress` after each.
 */
async function ingestUntilDead(
  url: string,
  run: string,
  onProgress: (acked: number) => void,
  /** Stop sending once this is true (for a server that is meant to survive). */
  enough: () => boolean = () => false,
) {
  const acked: string[] = [];
  await Promise.all(
    Array.from({ length: SENDERS }, async (_, s) => {
      for (let i = 0; !enough(); i++) {
        const bodies = Array.from({ length: BATCH }, (_, j) => `${run}-${s}-${i}-${j}`);
        let res: Response;
        try {
          res = await fetch(`${url}/v1/logs`, {
            method: "POST",
            headers: { ...authHeaders(token), "content-type": "application/json" },
            body: logsRequest(bodies),
          });
        } catch {
          return; // connection refused/reset: the server is gone
        }
        if (res.status === 200) {
          acked.push(...bodies);
          onProgress(acked.length);
        } else if (res.status === 429 || res.status === 503) {
          await res.arrayBuffer();
          await new Promise((r) => setTimeout(r, 200));
        } else {
          throw new Error(`unexpected ${res.status}: ${await res.text()}`);
        }
      }
    }),
  );
  return acked;
}

async function storedBodies(run: string): Promise<Set<string>> {
  const db = await openDatabase(loadConfig(ws.env));
  try {
    const rows = await db.many<{ body: string }>(
      "SELECT body FROM logs WHERE service_name = 'kill-test' AND body LIKE $1",
      [`${run}-%`],
    );
    return new Set(rows.map((r) => r.body));
  } finally {
    await db.close();
  }
}

async function killMidIngest(env: Record<string, string>, run: string) {
  const first = await serve(env);
  const exited = new Promise((r) => first.child.on("exit", r));
  const acked = await ingestUntilDead(first.url, run, (n) => {
    if (n >= KILL_AFTER_RECORDS && first.child.exitCode === null && first.child.signalCode === null) {
      first.child.kill("SIGKILL");
    }
  });
  await exited;
  expect(first.child.signalCode).toBe("SIGKILL");
  expect(acked.length).toBeGreaterThanOrEqual(KILL_AFTER_RECORDS);
  return acked;
}

async function stop(child: ChildProcessWithoutNullStreams): Promise<void> {
  const exited = new Promise((r) => child.on("exit", r));
  child.kill("SIGTERM");
  await exited;
}

describe("kill -9 mid-ingest loses nothing acknowledged", () => {
  it("written straight to the database", async () => {
    const run = `direct${Date.now()}`;
    const acked = await killMidIngest({}, run);
    // Start and stop once more: the database recovers from the crash (WAL replay) on open.
    const again = await serve({});
    await stop(again.child);
    const stored = await storedBodies(run);
    const missing = acked.filter((b) => !stored.has(b));
    expect(missing, `${missing.length} of ${acked.length} acknowledged records lost`).toEqual([]);
  }, 240_000);

  it.skipIf(testBackend() !== "postgres")(
    "two replicas on PostgreSQL: one killed mid-request, the other keeps answering; nothing either acknowledged is lost",
    async () => {
      const run = `replicas${Date.now()}`;
      const [a, b] = await Promise.all([serve({}), serve({})]);
      const exited = new Promise((r) => a.child.on("exit", r));
      let ackedByBAtKill: number | null = null;
      let ackedByB = 0;
      const [fromA, fromB] = await Promise.all([
        ingestUntilDead(a.url, `${run}-a`, (n) => {
          if (n >= KILL_AFTER_RECORDS && a.child.exitCode === null && a.child.signalCode === null) {
            a.child.kill("SIGKILL");
            ackedByBAtKill = ackedByB;
          }
        }),
        // The survivor is sent to throughout, and until it has acknowledged as much again
        // after the kill as A had before it.
        ingestUntilDead(
          b.url,
          `${run}-b`,
          (n) => {
            ackedByB = n;
          },
          () => ackedByBAtKill !== null && ackedByB >= ackedByBAtKill + KILL_AFTER_RECORDS,
        ),
      ]);
      await exited;
      expect(a.child.signalCode).toBe("SIGKILL");
      // B never stopped answering (its senders only end on `enough`, or on a lost connection).
      expect(b.child.exitCode).toBeNull();
      expect(fromB.length).toBeGreaterThanOrEqual((ackedByBAtKill ?? 0) + KILL_AFTER_RECORDS);
      await stop(b.child);
      const stored = await storedBodies(run);
      const acked = [...fromA, ...fromB];
      const missing = acked.filter((x) => !stored.has(x));
      expect(missing, `${missing.length} of ${acked.length} acknowledged records lost`).toEqual([]);
    },
    240_000,
  );

  it("buffered through JetStream", async () => {
    const stream = `NETMON_KILL_${process.pid}_${Date.now()}`;
    const nc = await connect({ servers: NATS_URL });
    const jsm = await jetstreamManager(nc);
    onTestFinished(async () => {
      await jsm.streams.delete(stream).catch(() => undefined);
      await jsm.streams.delete(`${stream}_DLQ`).catch(() => undefined);
      await nc.close();
    });
    const env = { NATS_URL, NETMON_JETSTREAM_STREAM: stream };
    const run = `js${Date.now()}`;
    const acked = await killMidIngest(env, run);
    // The restarted server's writer stores what was queued (units in flight at the kill come
    // back after the consumer's ack wait).
    const again = await serve(env);
    let last: unknown = null;
    await waitFor(
      async () => {
        const info = await jsm.consumers.info(stream, "netmon-writer");
        last = {
          num_pending: info.num_pending,
          ack_pending: info.num_ack_pending,
          delivered: info.delivered,
        };
        return info.num_pending + info.num_ack_pending === 0;
      },
      "the JetStream backlog to drain",
      120_000,
    ).catch((err: Error) => {
      // Say where it stuck: the consumer's state and what the restarted server logged.
      const tail = again.output().split("\n").slice(-40).join("\n");
      throw new Error(`${err.message}; consumer ${JSON.stringify(last)}; server output:\n${tail}`);
    });
    await stop(again.child);
    const stored = await storedBodies(run);
    const missing = acked.filter((b) => !stored.has(b));
    expect(missing, `${missing.length} of ${acked.length} acknowledged records lost`).toEqual([]);
    // Redelivered units are claimed by stream sequence: nothing stored twice.
    const db = await openDatabase(loadConfig(ws.env));
    try {
      const dup = await db.one<{ n: number }>(
        "SELECT count(*)::int AS n FROM (SELECT body FROM logs WHERE body LIKE $1 GROUP BY body HAVING count(*) > 1) d",
        [`${run}-%`],
      );
      expect(dup?.n).toBe(0);
    } finally {
      await db.close();
    }
  }, 300_000);
});
