import os from "node:os";
/**
 * The vertical slice in embedded mode: service checks created over /api/v2 run on the
 * built-in gateway + agent and their results land on the check, in service_status, in
 * timeseries_metrics and in poll jobs; failing checks show up in /service-checks/failing
 * and raise an alert; the poll-job collections answer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  closedTcpPort,
  startHttpTarget,
  startTcpTarget,
  type Target,
} from "../../src/monitoring/testing/targets.ts";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

const J = "application/vnd.api+json";
let server: TestServer;
let token: string;
let httpT: Awaited<ReturnType<typeof startHttpTarget>>;
let tcpT: Target;

async function api(method: string, path: string, body?: unknown) {
  const res = await server.fetch(`/api/v2${path}`, {
    method,
    headers: { ...authHeaders(token), accept: J, ...(body ? { "content-type": J } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, doc: text ? JSON.parse(text) : null };
}

async function createCheck(attributes: Record<string, unknown>): Promise<string> {
  const r = await api("POST", "/service-checks", { data: { type: "service-check", attributes } });
  expect(r.status, JSON.stringify(r.doc)).toBe(201);
  return r.doc.data.id;
}

async function waitFor<T>(
  fn: () => Promise<T | undefined | null | false>,
  what: string,
  ms = 20_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

beforeAll(async () => {
  [httpT, tcpT] = await Promise.all([startHttpTarget(), startTcpTarget()]);
  // The test polls the API; the default per-IP budget (120/60s) would answer 429.
  server = await startTestServer({
    env: { NETMON_EMBEDDED_AGENT: "true", NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" },
  });
  token = await tokenFor(server, "admin");
});
afterAll(async () => {
  await server?.stop();
  await Promise.all([httpT?.stop(), tcpT?.stop()]);
});

describe("embedded monitoring", () => {
  it("runs tcp and http checks created through the API and records their results", async () => {
    const tcpId = await createCheck({
      name: "tcp ok",
      check_type: "tcp",
      target: "127.0.0.1",
      port: tcpT.port,
      interval_seconds: 1,
    });
    const httpId = await createCheck({
      name: "http ok",
      check_type: "http",
      target: `http://127.0.0.1:${httpT.port}/ok`,
      interval_seconds: 1,
      config: { body_match: "hello" },
    });
    for (const id of [tcpId, httpId]) {
      const attrs = await waitFor(async () => {
        const r = await api("GET", `/service-checks/${id}`);
        return r.doc.data.attributes.last_result ? r.doc.data.attributes : null;
      }, `a result for ${id}`);
      expect(attrs.last_result).toBe("success");
      expect(attrs.consecutive_failures).toBe(0);
      expect(attrs.last_check_at).toBeTruthy();
      expect(typeof attrs.last_response_time_ms).toBe("number");
    }
    const status = await server.db.many<{ service_check_id: string; status: string; available: boolean }>(
      sql`SELECT service_check_id, status, available FROM service_status WHERE service_check_id = ANY(${[tcpId, httpId]}::uuid[])`,
    );
    expect(status.length).toBeGreaterThanOrEqual(2);
    expect(status.every((s) => s.status === "success" && s.available)).toBe(true);
    const series = await server.db.one<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM timeseries_metrics WHERE metric_name = 'response_time_ms' AND tags->>'service_check_id' = ${tcpId}`,
    );
    expect(series?.n).toBeGreaterThanOrEqual(1);
    expect(httpT.hits).toBeGreaterThanOrEqual(1);

    const jobs = await api("GET", "/poll-jobs?page[limit]=5");
    expect(jobs.status).toBe(200);
    const done = jobs.doc.data.find(
      (j: { attributes: { status: string } }) => j.attributes.status === "completed",
    );
    expect(done.attributes).toMatchObject({ status: "completed", failure_count: 0 });
    expect(done.attributes.duration_ms).toBeGreaterThanOrEqual(0);
    const bySchedule = await api("GET", `/poll-jobs/by-schedule/${done.attributes.schedule_id}`);
    expect(bySchedule.status).toBe(200);
    expect(bySchedule.doc.data.length).toBeGreaterThanOrEqual(1);
    expect((await api("GET", "/poll-jobs/pending")).status).toBe(200);
    expect((await api("GET", "/poll-jobs/running")).status).toBe(200);
    const agent = await api("GET", `/agents?filter[status][eq]=connected`);
    expect(agent.doc.data.length).toBeGreaterThanOrEqual(1);
  });

  it("reports host metrics (CPU, memory, disk, processes) from the agent into the sysmon tables", async () => {
    const counts = await waitFor(
      async () => {
        const r = await server.db.one<{ cpu: number; mem: number; disk: number; proc: number }>(sql`
        SELECT (SELECT count(*)::int FROM cpu_metrics) AS cpu, (SELECT count(*)::int FROM memory_metrics) AS mem,
               (SELECT count(*)::int FROM disk_metrics) AS disk, (SELECT count(*)::int FROM process_metrics) AS proc`);
        return r && r.cpu > 0 && r.mem > 0 ? r : null;
      },
      "host metrics",
      20_000,
    );
    expect(counts.disk).toBeGreaterThan(0);
    expect(counts.proc).toBeGreaterThan(0);
    const mem = await server.db.one<{ total_bytes: number; usage_percent: number; agent_id: string }>(
      sql`SELECT total_bytes, usage_percent, agent_id FROM memory_metrics LIMIT 1`,
    );
    expect(mem?.total_bytes).toBeGreaterThan(0);
    expect(mem?.usage_percent).toBeGreaterThan(0);
    expect(mem?.agent_id).toMatch(/^embedded-/);
    // The host is a device, linked from its agent, and every sample names it (issue 13).
    const host = await waitFor(
      () =>
        server.db.one<{ uid: string; hostname: string; device_id: string }>(sql`
          SELECT d.uid, d.hostname, m.device_id FROM agents a JOIN devices d ON d.uid = a.device_uid
            JOIN memory_metrics m ON m.agent_id = a.uid AND m.device_id IS NOT NULL
          WHERE a.uid = ${mem?.agent_id as string} LIMIT 1`),
      "the host device",
    );
    expect(host.hostname).toBe(os.hostname());
    expect(host.device_id).toBe(host.uid);
    const viaApi = await server.fetch(`/api/devices/${encodeURIComponent(host.uid)}`, {
      headers: authHeaders(token),
    });
    expect(((await viaApi.json()) as { data: { hostname: string } }).data.hostname).toBe(os.hostname());

    // A second agent on the same host keeps its own series and its own link.
    const other = await server.fetch("/api/v2/agents", {
      method: "POST",
      headers: { ...authHeaders(token), accept: J, "content-type": J },
      body: JSON.stringify({
        data: { type: "agent", attributes: { uid: "second-on-host", name: "second" } },
      }),
    });
    expect([200, 201]).toContain(other.status);
    const { recordHostMetrics } = await import("../../src/monitoring/host-metrics.ts");
    await recordHostMetrics(server.ctx, {
      agentId: "second-on-host",
      gatewayId: null,
      sample: {
        timestamp: new Date().toISOString(),
        host_id: os.hostname(),
        host_ip: "127.0.0.77",
        cpus: [],
        memory: { total_bytes: 100, used_bytes: 50, available_bytes: 50, usage_percent: 50 },
        disks: [],
        processes: [],
      },
    });
    const second = await server.db.one<{ agent_id: string; device_id: string | null }>(
      sql`SELECT agent_id, device_id FROM memory_metrics WHERE agent_id = 'second-on-host'`,
    );
    expect(second?.device_id).toBeTruthy();
    expect(second?.device_id).not.toBe(host.uid);
  });

  it("counts consecutive failures, lists failing checks and raises an alert", async () => {
    const id = await createCheck({
      name: "tcp closed",
      check_type: "tcp",
      target: "127.0.0.1",
      port: await closedTcpPort(),
      interval_seconds: 1,
      timeout_seconds: 1,
    });
    const attrs = await waitFor(async () => {
      const r = await api("GET", `/service-checks/${id}`);
      return r.doc.data.attributes.consecutive_failures >= 3 ? r.doc.data.attributes : null;
    }, "three failures");
    expect(attrs.last_result).toBe("critical");
    expect(attrs.last_error).toMatch(/ECONNREFUSED/);
    const failing = await api("GET", "/service-checks/failing");
    expect(failing.doc.data.map((d: { id: string }) => d.id)).toContain(id);
    const enabled = await api("GET", "/service-checks/enabled");
    expect(enabled.doc.data.map((d: { id: string }) => d.id)).toContain(id);
    const alert = await waitFor(
      () =>
        server.db.one<{ status: string; severity: string }>(
          sql`SELECT status, severity FROM alerts WHERE service_check_id = ${id}`,
        ),
      "an alert",
    );
    expect(alert).toMatchObject({ status: "pending", severity: "critical" });

    // Fix the target: the next success resets the counter and resolves the alert.
    const r = await api("PATCH", `/service-checks/${id}`, {
      data: { type: "service-check", id, attributes: { port: tcpT.port } },
    });
    expect(r.status).toBe(200);
    await waitFor(async () => {
      const g = await api("GET", `/service-checks/${id}`);
      return (
        g.doc.data.attributes.last_result === "success" && g.doc.data.attributes.consecutive_failures === 0
      );
    }, "recovery");
    const resolved = await waitFor(
      () =>
        server.db.one<{ status: string }>(
          sql`SELECT status FROM alerts WHERE service_check_id = ${id} AND status = 'resolved'`,
        ),
      "the alert to resolve",
    );
    expect(resolved.status).toBe("resolved");
  });

  it("refuses link-local targets and tcp checks without a port", async () => {
    const meta = await api("POST", "/service-checks", {
      data: {
        type: "service-check",
        attributes: { name: "metadata", check_type: "http", target: "http://169.254.169.254/latest" },
      },
    });
    expect(meta.status).toBe(422);
    expect(meta.doc.errors[0].detail).toMatch(/link-local/);
    const noPort = await api("POST", "/service-checks", {
      data: { type: "service-check", attributes: { name: "x", check_type: "tcp", target: "127.0.0.1" } },
    });
    expect(noPort.status).toBe(422);
    const badType = await api("POST", "/service-checks", {
      data: { type: "service-check", attributes: { name: "x", check_type: "smtp", target: "127.0.0.1" } },
    });
    expect(badType.status).toBe(400);
  });

  it("sweeps a CIDR (ICMP + TCP) and reports live hosts through device ingestion, into the sweep's group", async () => {
    const group = await api("POST", "/device-groups", {
      data: { type: "device-group", attributes: { name: "discovered on lo" } },
    });
    expect(group.status).toBe(201);
    const sweep = (groupRef: unknown) =>
      server.fetch("/api/monitoring/sweeps", {
        method: "POST",
        headers: { ...authHeaders(token), "content-type": "application/json" },
        body: JSON.stringify({
          name: "lo-sweep",
          cidrs: ["127.0.9.0/29"],
          ports: [tcpT.port],
          rate_per_second: 100,
          interval_seconds: 3600,
          group: groupRef,
        }),
      });
    const unknownGroup = await sweep("no such group");
    expect(unknownGroup.status).toBe(422);
    expect(JSON.stringify(await unknownGroup.json())).toMatch(/device group 'no such group' not found/);
    const res = await sweep("Discovered on LO");
    expect(res.status).toBe(201);
    const bad = await server.fetch("/api/monitoring/sweeps", {
      method: "POST",
      headers: { ...authHeaders(token), "content-type": "application/json" },
      body: JSON.stringify({ name: "huge", cidrs: ["10.0.0.0/8"] }),
    });
    expect(bad.status).toBe(422);
    const summary = await waitFor(
      async () => {
        const r = await server.fetch("/api/monitoring/sweeps", { headers: authHeaders(token) });
        const body = (await r.json()) as {
          sweeps: { name: string; last_summary: { hosts_alive?: number; ingested?: number } }[];
        };
        const s = body.sweeps.find((x) => x.name === "lo-sweep");
        return s?.last_summary.hosts_alive !== undefined ? s.last_summary : null;
      },
      "the sweep to finish",
      30_000,
    );
    // 127.0.9.1–6 all answer ICMP on loopback.
    expect(summary.hosts_alive).toBe(6);
    expect(summary.ingested).toBeGreaterThan(0);
    const devices = await server.db.many<{ ip: string; group_id: string | null }>(
      sql`SELECT ip, group_id FROM devices WHERE ip LIKE '127.0.9.%' ORDER BY ip`,
    );
    expect(new Set(devices.map((d) => d.group_id))).toEqual(new Set([group.doc.data.id]));
    expect(devices.map((d) => d.ip)).toEqual([
      "127.0.9.1",
      "127.0.9.2",
      "127.0.9.3",
      "127.0.9.4",
      "127.0.9.5",
      "127.0.9.6",
    ]);
  });

  it("degrades the agent while its checks cannot run, and restores it afterwards", async () => {
    // custom checks whose command is not allow-listed end in status "error" (the check cannot run).
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      ids.push(
        await createCheck({
          name: `cannot run ${i}`,
          check_type: "custom",
          target: "localhost",
          interval_seconds: 1,
          config: { command: "/bin/true" },
        }),
      );
    }
    const degraded = await waitFor(
      async () => {
        const r = await api("GET", "/agents?filter[status][eq]=degraded");
        return r.doc.data[0]?.attributes;
      },
      "the agent to degrade",
      40_000,
    );
    expect(degraded.is_healthy).toBe(false);
    const check = await api("GET", `/service-checks/${ids[0]}`);
    expect(check.doc.data.attributes.last_result).toBe("error");
    expect(check.doc.data.attributes.last_error).toMatch(/allow-list/);
    for (const id of ids) {
      await api("PATCH", `/service-checks/${id}`, {
        data: { type: "service-check", id, attributes: { enabled: false } },
      });
    }
    const restored = await waitFor(
      async () => {
        const r = await api("GET", "/agents?filter[status][eq]=connected");
        return r.doc.data[0]?.attributes;
      },
      "the agent to recover",
      40_000,
    );
    expect(restored.is_healthy).toBe(true);
  }, 100_000);
});
