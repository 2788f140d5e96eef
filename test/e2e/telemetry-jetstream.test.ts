import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimSequence, MAX_ATTEMPTS } from "../../src/telemetry/jetstream.ts";
import { encodeUnit, storeUnit } from "../../src/telemetry/units.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * The JetStream telemetry buffer (NATS_URL set) against the machine's NATS server: receivers
 * answer after JetStream acknowledged the unit, the writer stores it, a redelivered unit is
 * not stored twice, a unit that cannot be stored ends in the dead-letter stream with an error
 * log (never silently), and without a reachable NATS the receivers answer 503, not 200.
 * Each test run uses its own stream, deleted afterwards.
 */
const NATS_URL = process.env.NETMON_TEST_NATS_URL ?? "nats://127.0.0.1:4222";
const STREAM = `NETMON_T_${process.pid}_${Date.now()}`;

let server: TestServer;
let token: string;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  nc = await connect({ servers: NATS_URL });
  jsm = await jetstreamManager(nc);
  server = await startTestServer({ env: { NATS_URL, NETMON_JETSTREAM_STREAM: STREAM } });
  token = await tokenFor(server, "operator");
  // The buffer connects in the background after start.
  await waitFor(
    async () => (await jsm.consumers.info(STREAM, "netmon-writer").catch(() => null)) !== null,
    "the stream",
  );
});

afterAll(async () => {
  await server?.stop();
  await jsm?.streams.delete(STREAM).catch(() => undefined);
  await jsm?.streams.delete(`${STREAM}_DLQ`).catch(() => undefined);
  await nc?.close();
});

function otlpLogs(bodies: string[]) {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [{ key: "service.name", value: { stringValue: "js-test" } }] },
        scopeLogs: [
          {
            logRecords: bodies.map((b) => ({
              timeUnixNano: String(BigInt(Date.now()) * 1_000_000n),
              severityText: "WARN",
              severityNumber: 13,
              body: { stringValue: b },
            })),
          },
        ],
      },
    ],
  });
}

async function count(sqlText: string, params: unknown[]): Promise<number> {
  const r = await server.db.one<{ n: number }>(sqlText, params);
  return r?.n ?? 0;
}

describe("JetStream telemetry buffer", () => {
  it("answers after JetStream acknowledged the unit, and the writer stores it", async () => {
    const bodies = ["js-a", "js-b", "js-c"];
    const res = await server.fetch("/v1/logs", {
      method: "POST",
      headers: { ...authHeaders(token), "content-type": "application/json" },
      body: otlpLogs(bodies),
    });
    expect(res.status).toBe(200);
    await waitFor(
      async () =>
        (await count("SELECT count(*)::int AS n FROM logs WHERE body = ANY($1)", [bodies])) === bodies.length,
      "the buffered logs to be stored",
    );
    const claims = await count(
      "SELECT count(*)::int AS n FROM telemetry_stream_claims WHERE stream_key LIKE $1",
      [`${STREAM}@%`],
    );
    expect(claims).toBeGreaterThanOrEqual(1);
    await waitFor(async () => {
      const info = await jsm.consumers.info(STREAM, "netmon-writer");
      return info.num_pending + info.num_ack_pending === 0;
    }, "the unit to be acked");
  });

  it("stores a redelivered unit once: the stream sequence is claimed with the rows", async () => {
    const unit = {
      kind: "logs" as const,
      rows: [{ timestamp: new Date(), body: "claimed-once", service_name: "js-test" }],
    };
    const claim = claimSequence(`${STREAM}@test`, 42);
    const first = await storeUnit(server.ctx, unit, claim);
    const second = await storeUnit(server.ctx, unit, claim);
    expect(first.stored).toBe(true);
    expect(second.stored).toBe(false);
    expect(await count("SELECT count(*)::int AS n FROM logs WHERE body = 'claimed-once'", [])).toBe(1);
  });

  it("moves an undecodable unit to the dead-letter stream and says so in an error log", async () => {
    const js = jetstream(nc);
    await js.publish(`${STREAM}.logs`, new TextEncoder().encode("not json"));
    await waitFor(
      async () => (await jsm.streams.info(`${STREAM}_DLQ`)).state.messages === 1,
      "the dead letter",
    );
    await waitFor(
      async () =>
        (await count(
          "SELECT count(*)::int AS n FROM logs WHERE severity_text = 'ERROR' AND attributes->>'event_type' = 'ingest.dead_lettered' AND attributes->>'reason' LIKE 'undecodable%'",
          [],
        )) === 1,
      "the dead-letter error log",
    );
  });

  it(`retries a unit that fails to store ${MAX_ATTEMPTS} times, then dead-letters it`, async () => {
    const js = jetstream(nc);
    // A unit naming a column logs does not have: every attempt fails the same way.
    const bad = encodeUnit({
      kind: "logs",
      rows: [{ timestamp: new Date(), body: "poison", no_such_column: 1 } as never],
    });
    await js.publish(`${STREAM}.logs`, bad);
    await waitFor(
      async () =>
        (await count(
          "SELECT count(*)::int AS n FROM logs WHERE attributes->>'event_type' = 'ingest.dead_lettered' AND attributes->>'reason' LIKE '%no_such_column%'",
          [],
        )) === 1,
      "the poison unit to be dead-lettered",
      60_000,
    );
    expect((await jsm.streams.info(`${STREAM}_DLQ`)).state.messages).toBe(2);
    expect(await count("SELECT count(*)::int AS n FROM logs WHERE body = 'poison'", [])).toBe(0);
    // The self-metrics say so too.
    const admin = await tokenFor(server, "admin");
    const metrics = await (await server.fetch("/metrics", { headers: authHeaders(admin) })).text();
    expect(metrics).toMatch(/^netmon_jetstream_connected 1$/m);
    expect(metrics).toMatch(/^netmon_jetstream_writer_units\{outcome="dead_lettered"\} 2$/m);
    expect(metrics).toMatch(/^netmon_jetstream_writer_units\{outcome="stored"\} [1-9]/m);
  }, 90_000);
});

describe("JetStream configured but unreachable", () => {
  it("answers 503 with Retry-After instead of bypassing the buffer", async () => {
    const s = await startTestServer({
      env: { NATS_URL: "nats://127.0.0.1:1", NETMON_JETSTREAM_STREAM: `${STREAM}_X` },
    });
    try {
      const t = await tokenFor(s, "operator");
      const res = await s.fetch("/v1/logs", {
        method: "POST",
        headers: { ...authHeaders(t), "content-type": "application/json" },
        body: otlpLogs(["never-stored"]),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBeTruthy();
      expect(await s.db.one("SELECT 1 AS x FROM logs WHERE body = 'never-stored'")).toBeFalsy();
      await waitFor(
        async () => s.logs.some((l) => l.includes("JetStream buffer unavailable")),
        "the error log line",
      );
    } finally {
      await s.stop();
    }
  });
});
