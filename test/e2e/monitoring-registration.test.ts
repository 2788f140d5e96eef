/**
 * The lifecycle calls of a `netmon gateway` process, through the HTTP core link it uses, on a
 * real server: registration, heartbeats, drain and re-registration go through
 * `/api/v2/gateways` and `/api/v2/agents` with control-plane credentials scoped to
 * themselves, and draw from the `control` budget rather than the per-IP user budget.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueControlPlaneToken } from "../../src/access/tokens.ts";
import { type CoreLink, HttpError, httpCoreLink } from "../../src/monitoring/runtime/links.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

const J = "application/vnd.api+json";

describe("gateway and agent lifecycle through /api/v2", () => {
  let server: TestServer;
  let admin: string;
  let gwToken: string;
  let link: CoreLink;

  beforeAll(async () => {
    // A tiny per-IP user budget: the control-plane calls below must not draw from it.
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_API_DEFAULT: "40/60s" } });
    admin = await tokenFor(server, "admin");
    gwToken = (await issueControlPlaneToken(server.ctx, { kind: "gateway", name: "gw-1" })).token;
    link = httpCoreLink(server.url, gwToken);
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function v2(method: string, path: string, token = admin, data?: unknown) {
    const res = await server.fetch(`/api/v2${path}`, {
      method,
      headers: { ...authHeaders(token), accept: J, ...(data ? { "content-type": J } : {}) },
      body: data ? JSON.stringify({ data }) : undefined,
    });
    const text = await res.text();
    return {
      status: res.status,
      headers: res.headers,
      doc: text ? (JSON.parse(text) as { data: { attributes: Record<string, unknown> } }) : null,
    };
  }
  const gateway = async (id: string) => (await v2("GET", `/gateways/${id}`)).doc?.data.attributes ?? {};
  const agent = async (uid: string) =>
    (await v2("GET", `/agents/${uid}?uid=${uid}`)).doc?.data.attributes ?? {};
  const rejects = async (p: Promise<unknown>, status: number) => {
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(HttpError);
    expect((err as HttpError).status).toBe(status);
  };

  it("registers, heartbeats, drains and re-registers a gateway", async () => {
    await link.registerGateway("gw-1", { component_id: "gw-1", metadata: { pid: 42 } });
    expect(await gateway("gw-1")).toMatchObject({
      status: "healthy",
      is_healthy: true,
      created_by: "gateway:gw-1",
      registration_source: "auto",
      metadata: { pid: 42 },
    });

    const before = String((await gateway("gw-1")).last_seen);
    await new Promise((r) => setTimeout(r, 20));
    await link.gatewayOp("gw-1", "heartbeat", { agent_count: 3, checker_count: 3, is_healthy: true });
    const hb = await gateway("gw-1");
    expect(hb).toMatchObject({ agent_count: 3, checker_count: 3 });
    expect(Date.parse(String(hb.last_seen))).toBeGreaterThan(Date.parse(before));

    await link.gatewayOp("gw-1", "start_draining");
    expect(await gateway("gw-1")).toMatchObject({ status: "draining" });
    await link.gatewayOp("gw-1", "finish_draining");
    expect(await gateway("gw-1")).toMatchObject({ status: "offline", is_healthy: false });
    // A heartbeat delivered after the drain must not mark the offline gateway healthy.
    await link.gatewayOp("gw-1", "heartbeat", { is_healthy: true });
    expect(await gateway("gw-1")).toMatchObject({ status: "offline", is_healthy: false });
    // An illegal transition is a 400 naming the operation and the state, as for users.
    await rejects(link.gatewayOp("gw-1", "finish_draining"), 400);

    // The restarted process registers again: 200, back to healthy through recover → restore.
    const again = await server.fetch("/api/v2/gateways", {
      method: "POST",
      headers: { ...authHeaders(gwToken), accept: J, "content-type": J },
      body: JSON.stringify({ data: { type: "gateway", id: "gw-1", attributes: { metadata: { pid: 43 } } } }),
    });
    expect(again.status).toBe(200);
    expect(await gateway("gw-1")).toMatchObject({
      status: "healthy",
      is_healthy: true,
      metadata: { pid: 43 },
    });
    await link.registerGateway("gw-1", {});
    expect(await gateway("gw-1")).toMatchObject({ status: "healthy" });
  });

  it("keeps a gateway credential to its own gateway; users keep the usual 409", async () => {
    await rejects(link.registerGateway("gw-other", {}), 403);
    expect((await v2("GET", "/gateways/gw-other")).status).toBe(404);
    await rejects(link.gatewayOp("gw-manual", "heartbeat"), 404);

    const created = await v2("POST", "/gateways", admin, {
      type: "gateway",
      id: "gw-manual",
      attributes: {},
    });
    expect(created.status).toBe(201);
    await rejects(link.gatewayOp("gw-manual", "heartbeat"), 403);
    await rejects(link.gatewayOp("gw-manual", "start_draining"), 403);
    // created_by is server-set: the admin who registered it (issue 10).
    const manual = await gateway("gw-manual");
    expect(manual).toMatchObject({ status: "healthy" });
    expect(String(manual.created_by)).toMatch(/^user:/);
    const dup = await v2("POST", "/gateways", admin, { type: "gateway", id: "gw-manual", attributes: {} });
    expect(dup.status).toBe(409);
    const viewer = await tokenFor(server, "viewer");
    const denied = await v2("POST", "/gateways", viewer, { type: "gateway", id: "gw-v", attributes: {} });
    expect(denied.status).toBe(403);
  });

  it("walks an agent through register, connect, degrade, recover, disconnect and re-register", async () => {
    await link.registerGateway("gw-1", {});
    await link.registerAgent("ag-1", { gateway_id: "gw-1", capabilities: ["icmp", "tcp"], host: "h1" });
    expect(await agent("ag-1")).toMatchObject({
      status: "connecting",
      gateway_id: "gw-1",
      capabilities: ["icmp", "tcp"],
      vendor_name: "netmon",
    });
    await link.agentOp("ag-1", "establish_connection", { gateway_id: "gw-1" });
    expect(await agent("ag-1")).toMatchObject({ status: "connected", is_healthy: true });
    await link.agentOp("ag-1", "degrade");
    expect(await agent("ag-1")).toMatchObject({ status: "degraded", is_healthy: false });
    // An unhealthy heartbeat keeps it degraded; a healthy one connects it again.
    await link.agentOp("ag-1", "heartbeat", { is_healthy: false });
    expect(await agent("ag-1")).toMatchObject({ status: "degraded" });
    await link.agentOp("ag-1", "heartbeat", { is_healthy: true });
    expect(await agent("ag-1")).toMatchObject({ status: "connected", is_healthy: true });
    await link.agentOp("ag-1", "lose_connection");
    expect(await agent("ag-1")).toMatchObject({ status: "disconnected", gateway_id: null });
    await rejects(link.agentOp("ag-1", "degrade"), 400);

    await link.registerAgent("ag-1", { gateway_id: "gw-1", capabilities: ["icmp"] });
    expect(await agent("ag-1")).toMatchObject({
      status: "connecting",
      gateway_id: "gw-1",
      capabilities: ["icmp"],
    });
    await link.agentOp("ag-1", "establish_connection", { gateway_id: "gw-1" });
    // Registering a connected agent again (a restart without a clean disconnect) reconnects it.
    await link.registerAgent("ag-1", { gateway_id: "gw-1" });
    expect(await agent("ag-1")).toMatchObject({ status: "connecting" });
  });

  it("scopes agent registration to the gateway's own id and agent credentials to themselves", async () => {
    await rejects(link.registerAgent("ag-x", { gateway_id: "gw-other" }), 403);
    expect((await v2("GET", "/agents/ag-x?uid=ag-x")).status).toBe(404);
    await link.registerAgent("ag-2", { gateway_id: "gw-1" });
    await rejects(link.agentOp("ag-2", "establish_connection", { gateway_id: "gw-other" }), 403);

    const agTok = (await issueControlPlaneToken(server.ctx, { kind: "agent", name: "ag-3" })).token;
    const asAgent = httpCoreLink(server.url, agTok);
    await rejects(asAgent.registerAgent("ag-2", { gateway_id: "gw-1" }), 403);
    await rejects(asAgent.registerGateway("gw-1", {}), 403);
    await asAgent.registerAgent("ag-3", { gateway_id: "gw-1" });
    expect(await agent("ag-3")).toMatchObject({ status: "connecting" });
    // A user re-registering an existing agent gets the usual conflict.
    const dup = await v2("POST", "/agents", admin, { type: "agent", attributes: { uid: "ag-3" } });
    expect(dup.status).toBe(409);
  });

  it("charges control-plane calls to the control budget, not the per-IP user budget", async () => {
    for (let i = 0; i < 60; i++) await link.gatewayOp("gw-1", "heartbeat", { is_healthy: true });
    const res = await server.fetch("/api/v2/gateways/gw-1", {
      headers: { ...authHeaders(admin), accept: J },
    });
    expect(res.status).toBe(200);
    // The user budget (40/60s) has room left after 60 gateway heartbeats from the same IP.
    expect(Number(res.headers.get("x-ratelimit-remaining"))).toBeGreaterThan(0);
  });

  it("no longer serves the old control-plane lifecycle routes", async () => {
    for (const p of [
      "/api/control/v1/gateways",
      "/api/control/v1/agents",
      "/api/control/v1/gateways/gw-1/heartbeat",
    ]) {
      const res = await server.fetch(p, {
        method: "POST",
        headers: { ...authHeaders(gwToken), "content-type": "application/json" },
        body: "{}",
      });
      expect(res.status).toBe(404);
    }
  });
});
