/**
 * Core, gateway and agents as separate processes (`node bin/netmon.mjs serve|gateway|agent`)
 * watching checks against real loopback servers: HTTP, TCP, DNS (dns-packet UDP), gRPC health,
 * Debian snmpd, ICMP. Each check passes or fails for the right reason; a SIGKILLed agent is
 * marked disconnected and its running job times out and is retried by another agent; a core
 * restart loses no completed result.
 */
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { createApiToken, issueControlPlaneToken, TOKEN_SCOPES } from "../../src/access/tokens.ts";
import { insertUser } from "../../src/access/users.ts";
import { loadConfig } from "../../src/config/config.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { loadOrCreateSecretKey } from "../../src/kernel/secret-key.ts";
import {
  closedTcpPort,
  SNMP_COMMUNITY,
  startDnsTarget,
  startGrpcTarget,
  startHttpTarget,
  startSnmpd,
  startTcpTarget,
  type Target,
} from "../../src/monitoring/testing/targets.ts";
import { createTestDatabase } from "../helpers/database.ts";

const J = "application/vnd.api+json";
const ROOT = path.resolve(import.meta.dirname, "../..");
const BIN = path.join(ROOT, "bin/netmon.mjs");

interface Proc {
  child: ChildProcess;
  out: string[];
  line(prefix: string, ms?: number): Promise<string>;
}

function run(args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, NETMON_LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out: string[] = [];
  const onData = (d: Buffer) => out.push(...d.toString().split("\n").filter(Boolean));
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  return {
    child,
    out,
    async line(prefix, ms = 60_000) {
      const end = Date.now() + ms;
      for (;;) {
        const hit = out.find((l) => l.startsWith(prefix));
        if (hit) return hit.slice(prefix.length);
        if (child.exitCode !== null)
          throw new Error(`${args[0]} exited ${child.exitCode}: ${out.join("\n")}`);
        if (Date.now() > end) throw new Error(`no '${prefix}' from ${args[0]}: ${out.join("\n")}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}

async function stopProc(p: Proc | undefined, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
  const exited = new Promise((r) => p.child.once("exit", r));
  p.child.kill(signal);
  await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
  if (p.child.exitCode === null && p.child.signalCode === null) {
    // Still draining on a loaded machine: kill it and wait until it is really gone, so the
    // next process on the same data directory does not find it alive.
    p.child.kill("SIGKILL");
    await exited;
  }
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function waitFor<T>(
  fn: () => Promise<T | undefined | null | false>,
  what: string,
  ms = 45_000,
): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end)
      throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ""}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

let dataDir: string;
let coreEnv: Record<string, string>;
let coreUrl: string;
let core: Proc | undefined;
let gateway: Proc | undefined;
let agentA: Proc | undefined;
let agentB: Proc | undefined;
let adminToken: string;
let gatewayToken: string;
let agentATok: string;
let agentBTok: string;
let httpT: Awaited<ReturnType<typeof startHttpTarget>>;
let grpcT: Awaited<ReturnType<typeof startGrpcTarget>>;
let tcpT: Target;
let dnsT: Target;
let snmpT: Target;

async function api(method: string, p: string, body?: unknown) {
  const res = await fetch(`${coreUrl}/api/v2${p}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, accept: J, ...(body ? { "content-type": J } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, doc: text ? JSON.parse(text) : null };
}

async function startCore(): Promise<void> {
  core = run(["serve"], coreEnv);
  await waitFor(async () => (await fetch(`${coreUrl}/health`)).ok, "the core", 60_000);
}

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-proc-"));
  // Credentials are issued on the database before the core starts (PGlite allows one process).
  const { db, url } = await createTestDatabase({ dataDir: path.join(dataDir, "pg") });
  const port = await freePort();
  coreUrl = `http://127.0.0.1:${port}`;
  coreEnv = {
    PORT: String(port),
    HOST: "127.0.0.1",
    NETMON_DATA_DIR: dataDir,
    NETMON_EMBEDDED_AGENT: "false",
    NETMON_HEARTBEAT_TIMEOUT: "4s",
    NETMON_OTLP_GRPC_PORT: "0",
    NETMON_SYSLOG_PORT: "0",
    NETMON_SNMP_TRAP_PORT: "0",
    NETMON_RATE_LIMIT_CONTROL: "100000/60s",
    // The test polls the API every 300 ms; the default per-IP user budget (120/60s) would answer 429.
    NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s",
    ...(url ? { DATABASE_URL: url } : {}),
  };
  const config = loadConfig(coreEnv);
  const ctx = {
    config,
    db,
    log: createLogger("warn"),
    secretKey: loadOrCreateSecretKey(config.secretKeyFile),
    now: () => new Date(),
  };
  try {
    const admin = await insertUser(ctx, {
      email: "mon-admin@example.test",
      password: "pw-monitoring-e2e-1",
      role: "admin",
    });
    adminToken = (await createApiToken(ctx, admin.id, { name: "e2e", scopes: TOKEN_SCOPES })).token;
    gatewayToken = (await issueControlPlaneToken(ctx, { kind: "gateway", name: "gw-e2e" })).token;
    agentATok = (await issueControlPlaneToken(ctx, { kind: "agent", name: "agent-a" })).token;
    agentBTok = (await issueControlPlaneToken(ctx, { kind: "agent", name: "agent-b" })).token;
    void SYSTEM_ACTOR;
  } finally {
    await db.close();
  }
  [httpT, tcpT, dnsT, grpcT, snmpT] = await Promise.all([
    startHttpTarget(),
    startTcpTarget(),
    startDnsTarget(),
    startGrpcTarget(),
    startSnmpd(),
  ]);
  await startCore();
  gateway = run(
    [
      "gateway",
      "--core",
      coreUrl,
      "--token",
      gatewayToken,
      "--listen",
      "127.0.0.1:0",
      "--heartbeat-seconds",
      "1",
    ],
    {},
  );
  const gatewayUrl = await gateway.line("NETMON_GATEWAY_URL=");
  agentA = run(["agent", "--gateway", gatewayUrl, "--token", agentATok, "--heartbeat-seconds", "1"], {});
  expect(await agentA.line("NETMON_AGENT_UID=")).toBe("agent-a");
  (globalThis as { gatewayUrl?: string }).gatewayUrl = gatewayUrl;
}, 180_000);

afterAll(async () => {
  await Promise.all([stopProc(agentA), stopProc(agentB)]);
  await stopProc(gateway);
  await stopProc(core);
  await Promise.all([httpT?.stop(), tcpT?.stop(), dnsT?.stop(), grpcT?.stop(), snmpT?.stop()]);
  fs.rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

async function createCheck(attributes: Record<string, unknown>): Promise<string> {
  const r = await api("POST", "/service-checks", {
    data: { type: "service-check", attributes: { interval_seconds: 2, timeout_seconds: 2, ...attributes } },
  });
  expect(r.status, JSON.stringify(r.doc)).toBe(201);
  return r.doc.data.id as string;
}

async function resultOf(id: string): Promise<Record<string, unknown>> {
  return waitFor(async () => {
    const r = await api("GET", `/service-checks/${id}`);
    return r.doc?.data?.attributes?.last_result ? r.doc.data.attributes : null;
  }, `a result for check ${id}`);
}

describe("core, gateway and agent as separate processes", () => {
  it("registers the gateway and the agent through their lifecycles", async () => {
    const gw = await waitFor(async () => {
      const r = await api("GET", "/gateways/gw-e2e");
      return r.status === 200 ? r.doc.data.attributes : null;
    }, "the gateway");
    // Registered through POST /api/v2/gateways by its own credential.
    expect(gw).toMatchObject({ status: "healthy", is_healthy: true, created_by: "gateway:gw-e2e" });
    const ag = await waitFor(async () => {
      const r = await api("GET", "/agents?filter[uid][eq]=agent-a");
      return r.doc.data[0]?.attributes.status === "connected" ? r.doc.data[0].attributes : null;
    }, "agent-a connected");
    expect(ag.gateway_id).toBe("gw-e2e");
  });

  it("runs every check type against real loopback servers, passing and failing for the right reasons", async () => {
    const http = `http://127.0.0.1:${httpT.port}`;
    const cases: { attrs: Record<string, unknown>; result: string; error?: RegExp }[] = [
      {
        attrs: { name: "http ok", check_type: "http", target: `${http}/ok`, config: { body_match: "hello" } },
        result: "success",
      },
      {
        attrs: { name: "http 500", check_type: "http", target: `${http}/fail` },
        result: "critical",
        error: /unexpected status 500/,
      },
      {
        attrs: { name: "tcp ok", check_type: "tcp", target: "127.0.0.1", port: tcpT.port },
        result: "success",
      },
      {
        attrs: { name: "tcp closed", check_type: "tcp", target: "127.0.0.1", port: await closedTcpPort() },
        result: "critical",
        error: /ECONNREFUSED/,
      },
      {
        attrs: {
          name: "dns ok",
          check_type: "dns",
          target: "ok.netmon.test",
          config: { server: `127.0.0.1:${dnsT.port}`, expected: "10.1.2.3" },
        },
        result: "success",
      },
      {
        attrs: {
          name: "dns nx",
          check_type: "dns",
          target: "nope.netmon.test",
          config: { server: `127.0.0.1:${dnsT.port}` },
        },
        result: "critical",
        error: /ENOTFOUND/,
      },
      {
        attrs: { name: "grpc ok", check_type: "grpc", target: "127.0.0.1", port: grpcT.port },
        result: "success",
      },
      {
        attrs: {
          name: "grpc down",
          check_type: "grpc",
          target: "127.0.0.1",
          port: grpcT.port,
          config: { service: "netmon.Down" },
        },
        result: "critical",
        error: /NOT_SERVING/,
      },
      {
        attrs: {
          name: "snmp ok",
          check_type: "snmp",
          target: "127.0.0.1",
          port: snmpT.port,
          config: { community: SNMP_COMMUNITY },
        },
        result: "success",
      },
      {
        attrs: {
          name: "snmp bad community",
          check_type: "snmp",
          target: "127.0.0.1",
          port: snmpT.port,
          timeout_seconds: 1,
          config: { community: "wrong" },
        },
        result: "critical",
        error: /no SNMP response/,
      },
      {
        attrs: { name: "ping lo", check_type: "ping", target: "127.0.0.1", config: { count: 2 } },
        result: "success",
      },
      {
        attrs: {
          name: "ping nowhere",
          check_type: "ping",
          target: "198.51.100.7",
          timeout_seconds: 1,
          config: { count: 1 },
        },
        result: "critical",
        error: /100% packet loss/,
      },
    ];
    const ids = await Promise.all(cases.map((c) => createCheck(c.attrs)));
    const results = await Promise.all(ids.map((id) => resultOf(id)));
    results.forEach((r, i) => {
      const c = cases[i] as (typeof cases)[number];
      expect(r.last_result, `${c.attrs.name}: ${r.last_error}`).toBe(c.result);
      if (c.error) expect(r.last_error, String(c.attrs.name)).toMatch(c.error);
    });
    const failing = await api("GET", "/service-checks/failing");
    const failingIds = new Set(failing.doc.data.map((d: { id: string }) => d.id));
    cases.forEach((c, i) => {
      expect(failingIds.has(ids[i]), String(c.attrs.name)).toBe(c.result !== "success");
    });
    const jobs = await api("GET", "/poll-jobs?filter[status][eq]=completed&page[limit]=1");
    expect(jobs.doc.data[0].attributes.agent_id).toBe("agent-a");
    expect(jobs.doc.data[0].attributes.gateway_id).toBe("gw-e2e");
  });

  it("marks a killed agent disconnected; its running job times out and is retried by another agent", async () => {
    // A hanging endpoint keeps a job running for ~3 s.
    const slowId = await createCheck({
      name: "http slow",
      check_type: "http",
      target: `http://127.0.0.1:${httpT.port}/slow`,
      interval_seconds: 1,
      timeout_seconds: 3,
    });
    const running = await waitFor(async () => {
      const r = await api("GET", "/poll-jobs/running");
      return r.doc.data.find(
        (j: { attributes: { check_ids: string[]; agent_id: string } }) =>
          j.attributes.check_ids.includes(slowId) && j.attributes.agent_id === "agent-a",
      );
    }, "a running job on agent-a");
    await stopProc(agentA, "SIGKILL");
    agentB = run(
      [
        "agent",
        "--gateway",
        (globalThis as { gatewayUrl?: string }).gatewayUrl as string,
        "--token",
        agentBTok,
        "--heartbeat-seconds",
        "1",
      ],
      {},
    );
    expect(await agentB.line("NETMON_AGENT_UID=")).toBe("agent-b");
    const disconnected = await waitFor(async () => {
      const r = await api("GET", "/agents?filter[uid][eq]=agent-a");
      return r.doc.data[0]?.attributes.status === "disconnected" ? r.doc.data[0].attributes : null;
    }, "agent-a disconnected");
    expect(disconnected.gateway_id).toBeNull();
    // Nothing fails silently: the dead agent is an alert, not only a state.
    const alert = await waitFor(async () => {
      const r = await api("GET", "/alerts/active");
      return r.doc.data.find(
        (a: { attributes: { source_type: string; source_id: string } }) =>
          a.attributes.source_type === "agent" && a.attributes.source_id === "agent-a",
      );
    }, "an alert for the silent agent-a");
    expect(alert.attributes).toMatchObject({
      severity: "critical",
      title: "Agent agent-a stopped heartbeating",
    });
    const retried = await waitFor(
      async () => {
        const r = await api("GET", `/poll-jobs/${running.id}`);
        const a = r.doc.data.attributes;
        return a.status === "completed" && a.retry_count >= 1 ? a : null;
      },
      "the job retried and completed elsewhere",
      60_000,
    );
    expect(retried.agent_id).toBe("agent-b");
    expect(retried.results[0].check_id).toBe(slowId);

    // A check pinned to the dead agent cannot move: it shows unknown with the reason (never a
    // stale success), its job ends, and an alert says it cannot run.
    const pinnedId = await createCheck({
      name: "tcp pinned to the dead agent",
      check_type: "tcp",
      target: "127.0.0.1",
      port: tcpT.port,
      agent_uid: "agent-a",
    });
    const unknown = await waitFor(async () => {
      const r = await api("GET", `/service-checks/${pinnedId}`);
      return r.doc.data.attributes.last_result === "unknown" ? r.doc.data.attributes : null;
    }, "the pinned check unknown");
    expect(unknown.last_error).toBe("not run: agent agent-a is disconnected");
    const unplaceable = await waitFor(async () => {
      const r = await api("GET", "/alerts/active");
      return r.doc.data.find(
        (a: { attributes: { service_check_id: string | null } }) =>
          a.attributes.service_check_id === pinnedId,
      );
    }, "an alert that the pinned check cannot run");
    expect(unplaceable.attributes).toMatchObject({
      severity: "warning",
      title: "tcp pinned to the dead agent: cannot run, agent agent-a is disconnected",
    });
    expect((await api("DELETE", `/service-checks/${pinnedId}`)).status).toBe(204);
  }, 120_000);

  it("loses none of 50 checks when an agent gets SIGTERM with many in flight: finished ones delivered, the rest handed back", async () => {
    const gatewayUrl = (globalThis as { gatewayUrl?: string }).gatewayUrl as string;
    // agent-a comes back with a short shutdown budget (grace 1 s: shorter than the 3 s checks).
    const stopping = run(
      ["agent", "--gateway", gatewayUrl, "--token", agentATok, "--heartbeat-seconds", "1"],
      {
        NETMON_SHUTDOWN_TIMEOUT: "4s",
      },
    );
    onTestFinished(() => stopProc(stopping, "SIGKILL"));
    expect(await stopping.line("NETMON_AGENT_UID=")).toBe("agent-a");
    await stopProc(agentB); // only agent-a takes the work for now
    const ids: string[] = [];
    for (let i = 0; i < 50; i++) {
      ids.push(
        await createCheck({
          name: `slow ${i}`,
          check_type: "http",
          target: `http://127.0.0.1:${httpT.port}/slow`,
          interval_seconds: 3600,
          timeout_seconds: 10,
        }),
      );
    }
    // Due now rather than somewhere in the first hour.
    for (const id of ids) {
      const run = await api("PATCH", `/service-checks/${id}/run`, { data: { type: "service-check", id } });
      expect(run.status).toBe(200);
    }
    const inFlight = await waitFor(async () => {
      const r = await api("GET", "/poll-jobs/running");
      const mine = r.doc.data.filter(
        (j: { attributes: { agent_id: string; check_ids: string[] } }) =>
          j.attributes.agent_id === "agent-a" && j.attributes.check_ids.some((c) => ids.includes(c)),
      );
      const checks = mine.reduce(
        (n: number, j: { attributes: { check_ids: string[] } }) => n + j.attributes.check_ids.length,
        0,
      );
      return checks >= 20 ? mine : null;
    }, "checks running on agent-a");
    expect(inFlight.length).toBeGreaterThan(0);
    await stopProc(stopping, "SIGTERM");
    expect(stopping.child.exitCode).toBe(0);
    expect(stopping.out.join("\n")).toMatch(/handed unfinished jobs back for retry/);

    // Another agent takes the handed-back work; every check gets its result.
    agentB = run(["agent", "--gateway", gatewayUrl, "--token", agentBTok, "--heartbeat-seconds", "1"], {});
    expect(await agentB.line("NETMON_AGENT_UID=")).toBe("agent-b");
    await waitFor(
      async () => {
        const r = await api("GET", "/service-checks?page[limit]=200");
        const done = r.doc.data.filter(
          (c: { id: string; attributes: { last_result: string | null } }) =>
            ids.includes(c.id) && c.attributes.last_result === "success",
        );
        return done.length === 50;
      },
      "all 50 checks with a result",
      90_000,
    );
    for (const id of ids) expect((await api("DELETE", `/service-checks/${id}`)).status).toBe(204);
  }, 180_000);

  it("loses no completed result across a core restart, and work resumes", async () => {
    const before = await api("GET", "/poll-jobs?filter[status][eq]=completed&page[limit]=1000");
    expect(before.status, JSON.stringify(before.doc)).toBe(200);
    const completed = new Map<string, unknown>(
      before.doc.data.map((d: { id: string; attributes: { results: unknown } }) => [
        d.id,
        d.attributes.results,
      ]),
    );
    expect(completed.size).toBeGreaterThan(0);
    const checks = await api("GET", "/service-checks?page[limit]=100");
    expect(checks.status, JSON.stringify(checks.doc)).toBe(200);
    const lastBefore = new Map<string, string>(
      checks.doc.data.map((d: { id: string; attributes: { last_check_at: string } }) => [
        d.id,
        d.attributes.last_check_at,
      ]),
    );

    await stopProc(core);
    await startCore();

    const after = await waitFor(async () => {
      const r = await api("GET", "/poll-jobs?filter[status][eq]=completed&page[limit]=1000");
      return r.status === 200 ? r : null;
    }, "the restarted core to answer");
    const afterMap = new Map<string, unknown>(
      after.doc.data.map((d: { id: string; attributes: { results: unknown } }) => [
        d.id,
        d.attributes.results,
      ]),
    );
    for (const [id, results] of completed) expect(afterMap.get(id), id).toEqual(results);
    // The gateway and agent reconnect on their own and checks keep running.
    const [someId] = [...lastBefore.keys()];
    await waitFor(
      async () => {
        const r = await api("GET", `/service-checks/${someId}`);
        return (
          Date.parse(r.doc.data.attributes.last_check_at) >
          Date.parse(lastBefore.get(someId as string) as string)
        );
      },
      "a new result after the restart",
      60_000,
    );
  }, 120_000);

  it("drains the gateway on SIGTERM (drain/start → drain/finish → offline)", async () => {
    await stopProc(gateway);
    const r = await api("GET", "/gateways/gw-e2e");
    expect(r.status, JSON.stringify(r.doc)).toBe(200);
    expect(r.doc.data.attributes.status, (gateway as Proc).out.join("\n")).toBe("offline");
    const gw = r.doc.data.attributes;
    expect(gw.is_healthy).toBe(false);
  });
});
