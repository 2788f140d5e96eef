/**
 * Gateways and agents over /api/v2: register, reads, special collections and every state
 * operation from every state (allowed → new state; disallowed → 400 naming the operation
 * and the current state, nothing changes). Also the retired sysmon routes (410).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueControlPlaneToken } from "../../src/access/tokens.ts";
import { RETIRED_ROUTES } from "../../src/jsonapi/feature.ts";
import { canTransition } from "../../src/jsonapi/state-machine.ts";
import {
  AGENT_STATES,
  agentMachine,
  GATEWAY_STATES,
  gatewayMachine,
} from "../../src/monitoring/infrastructure/machines.ts";
import { sql } from "../../src/storage/sql.ts";
import { tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { Client, des, expectError, ids } from "./jsonapi-helpers.ts";

const GATEWAY_OPS: Record<string, string> = {
  activate: "activate",
  deactivate: "deactivate",
  degrade: "degrade",
  "drain/start": "start_draining",
  "drain/finish": "finish_draining",
  "maintenance/start": "start_maintenance",
  "maintenance/end": "end_maintenance",
  offline: "go_offline",
  recover: "recover",
  restore: "restore_health",
  heartbeat: "heartbeat",
};

const AGENT_OPS: Record<string, string> = {
  connect: "establish_connection",
  degrade: "degrade",
  disconnect: "lose_connection",
  heartbeat: "heartbeat",
};

describe("gateways and agents", () => {
  let server: TestServer;
  let admin: Client;
  let operator: Client;

  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" } });
    admin = new Client(server, await tokenFor(server, "admin"));
    operator = new Client(server, await tokenFor(server, "operator"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  const gatewayRow = async (id: string) =>
    (await server.db.one(sql`SELECT * FROM gateways WHERE gateway_id = ${id}`)) as Record<string, unknown>;

  it("register starts a gateway healthy with first_registered/first_seen/last_seen set", async () => {
    const r = await operator.req("POST", "/gateways", {
      data: {
        type: "gateway",
        id: "gw-reg",
        attributes: { component_id: "edge-1", registration_source: "manual", metadata: { zone: "a" } },
      },
    });
    expect(r.status, JSON.stringify(r.doc)).toBe(201);
    const g = des(r.doc).data as Record<string, unknown>;
    expect(g.status).toBe("healthy");
    expect(g.is_healthy).toBe(true);
    expect(g.first_registered).toBeTruthy();
    expect(g.last_seen).toBeTruthy();
    expect(g.metadata).toEqual({ zone: "a" });
    expect((await admin.get("/gateways/gw-reg")).status).toBe(200);
    expectError(await admin.get("/gateways/nope"), 404);
    expectError(await admin.req("POST", "/gateways", { data: { type: "gateway", attributes: {} } }), 400);
  });

  it("every gateway operation from every state: allowed moves, disallowed is a 400 and changes nothing", async () => {
    let n = 0;
    for (const [op, transition] of Object.entries(GATEWAY_OPS)) {
      for (const state of GATEWAY_STATES) {
        const id = `gw-${n++}`;
        const reg = await admin.req("POST", "/gateways", { data: { type: "gateway", id, attributes: {} } });
        expect(reg.status).toBe(201);
        await server.db.query(
          // A few seconds in the past: older than the request's timestamps, yet well within the
          // heartbeat timeout (a 2020 last_seen let the leader's reaper take the gateway offline
          // between this UPDATE and the request, a load-dependent flake).
          sql`UPDATE gateways SET status = ${state}, last_seen = now() - interval '5 seconds', updated_at = now() - interval '5 seconds' WHERE gateway_id = ${id}`,
        );
        const before = await gatewayRow(id);
        const body =
          op === "heartbeat"
            ? { data: { type: "gateway", attributes: { agent_count: 3, is_healthy: false } } }
            : undefined;
        const r = await admin.req("PATCH", `/gateways/${id}/${op}`, body);
        const after = await gatewayRow(id);
        if (canTransition(gatewayMachine, transition, state)) {
          expect(r.status, `${op} from ${state}: ${JSON.stringify(r.doc)}`).toBe(200);
          const to = gatewayMachine.transitions[transition]?.to ?? state;
          expect(after.status, `${op} from ${state}`).toBe(to);
          expect((r.doc.data as { attributes: { status: string } }).attributes.status).toBe(to);
          expect((after.updated_at as Date).getTime()).toBeGreaterThan((before.updated_at as Date).getTime());
          if (op === "heartbeat") {
            expect((after.last_seen as Date).getTime()).toBeGreaterThan((before.last_seen as Date).getTime());
            expect(after.agent_count).toBe(3);
            expect(after.is_healthy).toBe(false);
          }
          if (["activate", "restore"].includes(op)) expect(after.is_healthy).toBe(true);
          if (["deactivate", "degrade", "offline", "drain/finish"].includes(op))
            expect(after.is_healthy).toBe(false);
        } else {
          const e = expectError(r, 400);
          expect(e.code).toBe("invalid_transition");
          expect(e.detail).toContain(op);
          expect(e.detail).toContain(state);
          expect(e.meta?.operation).toBe(op);
          expect(e.meta?.current_state).toBe(state);
          expect(after).toEqual(before);
        }
      }
    }
  }, 180_000);

  it("degrade/offline accept a reason; heartbeat rejects unknown attributes", async () => {
    await admin.req("POST", "/gateways", { data: { type: "gateway", id: "gw-reason", attributes: {} } });
    const r = await admin.req("PATCH", "/gateways/gw-reason/degrade", {
      data: { type: "gateway", attributes: { reason: "packet loss" } },
    });
    expect(r.status).toBe(200);
    expect((await gatewayRow("gw-reason")).status_reason).toBe("packet loss");
    const bad = await admin.req("PATCH", "/gateways/gw-reason/heartbeat", {
      data: { type: "gateway", attributes: { status: "healthy" } },
    });
    expect(expectError(bad, 400).source?.pointer).toBe("/data/attributes/status");
    expectError(await admin.req("PATCH", "/gateways/nope/activate"), 404);
  });

  it("/gateways/active lists healthy gateways with is_healthy", async () => {
    await admin.req("POST", "/gateways", { data: { type: "gateway", id: "gw-act-1", attributes: {} } });
    await admin.req("POST", "/gateways", { data: { type: "gateway", id: "gw-act-2", attributes: {} } });
    await server.db.query(sql`UPDATE gateways SET is_healthy = false WHERE gateway_id = 'gw-act-2'`);
    const active = ids(await admin.get("/gateways/active", { page: { limit: 1000 } }));
    expect(active).toContain("gw-act-1");
    expect(active).not.toContain("gw-act-2");
    const rows = await server.db.many(
      sql`SELECT gateway_id FROM gateways WHERE status = 'healthy' AND is_healthy ORDER BY seq`,
    );
    expect(active).toEqual(rows.map((r) => r.gateway_id));
  });

  const agentRow = async (uid: string) =>
    (await server.db.one(sql`SELECT * FROM agents WHERE uid = ${uid}`)) as Record<string, unknown>;

  it("register starts an agent connecting; detail read needs the uid query", async () => {
    const r = await operator.create("agent", "/agents", {
      uid: "ag-reg",
      name: "edge agent",
      host: "10.0.0.5",
      port: 50051,
      gateway_id: "gw-reg",
    });
    expect(r.status, JSON.stringify(r.doc)).toBe(201);
    const a = des(r.doc).data as Record<string, unknown>;
    expect(a.status).toBe("connecting");
    expect(a.is_healthy).toBe(true);
    expect(a.created_time).toBeTruthy();
    expect(a.type_name).toBe("Unknown");
    expectError(await admin.get("/agents/ag-reg"), 400, "uid");
    expect((await admin.get("/agents/ag-reg", "uid=ag-reg")).status).toBe(200);
    expectError(await admin.get("/agents/ag-reg", "uid=other"), 404);
  });

  it("update changes only updatable attributes", async () => {
    const r = await admin.req("PATCH", "/agents/ag-reg", {
      data: {
        type: "agent",
        id: "ag-reg",
        attributes: { name: "renamed", capabilities: ["icmp", "tcp"], plugin_engine_max_concurrent: 4 },
      },
    });
    expect(r.status, JSON.stringify(r.doc)).toBe(200);
    const row = await agentRow("ag-reg");
    expect(row.name).toBe("renamed");
    expect(row.capabilities).toEqual(["icmp", "tcp"]);
    expect(row.plugin_engine_max_concurrent).toBe(4);
    const bad = await admin.req("PATCH", "/agents/ag-reg", {
      data: { type: "agent", attributes: { status: "connected" } },
    });
    expect(expectError(bad, 400).source?.pointer).toBe("/data/attributes/status");
  });

  it("every agent operation from every state", async () => {
    let n = 0;
    for (const [op, transition] of Object.entries(AGENT_OPS)) {
      for (const state of AGENT_STATES) {
        const uid = `ag-${n++}`;
        expect((await admin.create("agent", "/agents", { uid, gateway_id: "gw-x" })).status).toBe(201);
        await server.db.query(
          sql`UPDATE agents SET status = ${state}, last_seen_time = now() - interval '5 seconds', modified_time = now() - interval '5 seconds' WHERE uid = ${uid}`,
        );
        const before = await agentRow(uid);
        const body =
          op === "heartbeat"
            ? {
                data: {
                  type: "agent",
                  attributes: { is_healthy: false, capabilities: ["snmp"], config_source: "remote" },
                },
              }
            : op === "connect"
              ? { data: { type: "agent", attributes: { gateway_id: "gw-y" } } }
              : undefined;
        const r = await admin.req("PATCH", `/agents/${uid}/${op}`, body);
        const after = await agentRow(uid);
        if (canTransition(agentMachine, transition, state)) {
          expect(r.status, `${op} from ${state}: ${JSON.stringify(r.doc)}`).toBe(200);
          expect(after.status).toBe(agentMachine.transitions[transition]?.to ?? state);
          expect((after.modified_time as Date).getTime()).toBeGreaterThan(
            (before.modified_time as Date).getTime(),
          );
          if (op === "connect") {
            expect(after.is_healthy).toBe(true);
            expect(after.gateway_id).toBe("gw-y");
            expect((after.last_seen_time as Date).getTime()).toBeGreaterThan(
              (before.last_seen_time as Date).getTime(),
            );
          }
          if (op === "degrade") expect(after.is_healthy).toBe(false);
          if (op === "disconnect") expect(after.gateway_id).toBeNull();
          if (op === "heartbeat") {
            expect((after.last_seen_time as Date).getTime()).toBeGreaterThan(
              (before.last_seen_time as Date).getTime(),
            );
            expect(after.is_healthy).toBe(false);
            expect(after.capabilities).toEqual(["snmp"]);
            expect(after.config_source).toBe("remote");
          }
        } else {
          const e = expectError(r, 400);
          expect(e.detail).toContain(op);
          expect(e.detail).toContain(state);
          expect(after).toEqual(before);
        }
      }
    }
  }, 180_000);

  it("/agents/by-gateway/:gateway_id lists that gateway's agents and takes no page", async () => {
    for (const uid of ["bg-1", "bg-2"]) await admin.create("agent", "/agents", { uid, gateway_id: "gw-bg" });
    await admin.create("agent", "/agents", { uid: "bg-3", gateway_id: "gw-other" });
    expect(ids(await admin.get("/agents/by-gateway/gw-bg"))).toEqual(["bg-1", "bg-2"]);
    expectError(await admin.get("/agents/by-gateway/gw-bg", "page[limit]=1"), 400, "page");
    const r = await admin.get(
      "/agents/by-gateway/gw-bg",
      "filter[name][is_nil]=true&sort=-uid&fields[agent]=uid",
    );
    expect(ids(r)).toEqual(["bg-2", "bg-1"]);
  });

  it("a concurrent pair of transitions: exactly one wins", async () => {
    await admin.req("POST", "/gateways", { data: { type: "gateway", id: "gw-race", attributes: {} } });
    const [a, b] = await Promise.all([
      admin.req("PATCH", "/gateways/gw-race/drain/start"),
      admin.req("PATCH", "/gateways/gw-race/maintenance/start"),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 400]);
    const st = (await gatewayRow("gw-race")).status;
    expect(["draining", "maintenance"]).toContain(st);
  });

  it("control-plane credentials run lifecycle operations on themselves only", async () => {
    await admin.req("POST", "/gateways", { data: { type: "gateway", id: "gw-cp", attributes: {} } });
    await admin.req("POST", "/gateways", { data: { type: "gateway", id: "gw-cp-other", attributes: {} } });
    const gw = new Client(
      server,
      (await issueControlPlaneToken(server.ctx, { kind: "gateway", name: "gw-cp" })).token,
    );
    expect((await gw.req("PATCH", "/gateways/gw-cp/heartbeat")).status).toBe(200);
    expectError(await gw.req("PATCH", "/gateways/gw-cp-other/heartbeat"), 403);
    expectError(await gw.req("PATCH", "/gateways/gw-cp/deactivate"), 403);
    const ag = new Client(
      server,
      (await issueControlPlaneToken(server.ctx, { kind: "agent", name: "ag-cp" })).token,
    );
    expect((await ag.create("agent", "/agents", { uid: "ag-cp" })).status).toBe(201);
    expectError(await ag.create("agent", "/agents", { uid: "ag-cp-other" }), 403);
    expect((await ag.req("PATCH", "/agents/ag-cp/connect")).status).toBe(200);
    // ag-cp connected itself, attached to no gateway: a gateway credential may not drive it
    // (issue 10: a gateway acts only on agents attached to it).
    expectError(await gw.req("PATCH", "/agents/ag-cp/heartbeat"), 403);
    expectError(await ag.req("PATCH", "/agents/bg-1/heartbeat"), 403);
  });

  it("retired sysmon routes answer 410 pointing to POST /api/query and the SRQL entity", async () => {
    for (const [route, entity] of Object.entries(RETIRED_ROUTES)) {
      const r = await admin.get(`/${route}`);
      const e = expectError(r, 410);
      expect(e.detail).toContain("POST /api/query");
      expect(e.detail).toContain(entity);
      expect(e.meta?.srql_entity).toBe(entity);
    }
    expect(Object.keys(RETIRED_ROUTES).sort()).toEqual(
      [
        "cpu_cluster_metrics",
        "cpu_metrics",
        "cpu_metrics_hourly",
        "disk_metrics",
        "disk_metrics_hourly",
        "memory_metrics",
        "memory_metrics_hourly",
        "process_metrics",
        "process_metrics_hourly",
      ].sort(),
    );
  });
});
