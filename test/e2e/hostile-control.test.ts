import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueControlPlaneToken } from "../../src/access/tokens.ts";
import { type CoreLink, HttpError, httpCoreLink } from "../../src/monitoring/runtime/links.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * Issue 10 item 4: a stolen gateway credential acts only on its own gateway, its own agents and
 * the jobs it claimed.
 */
const J = "application/vnd.api+json";

describe("control-plane ownership", () => {
  let server: TestServer;
  let a: CoreLink;
  let b: CoreLink;

  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" } });
    a = httpCoreLink(
      server.url,
      (await issueControlPlaneToken(server.ctx, { kind: "gateway", name: "gw-a" })).token,
    );
    b = httpCoreLink(
      server.url,
      (await issueControlPlaneToken(server.ctx, { kind: "gateway", name: "gw-b" })).token,
    );
    await a.registerGateway("gw-a", { component_id: "gw-a" });
    await b.registerGateway("gw-b", { component_id: "gw-b" });
    await a.registerAgent("agent-a", { gateway_id: "gw-a" });
    await a.agentOp("agent-a", "establish_connection", { gateway_id: "gw-a" });
  });
  afterAll(async () => {
    await server?.stop();
  });

  const refused = async (p: Promise<unknown>, what = "") => {
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err, `${what}: the call must be refused`).toBeInstanceOf(HttpError);
    expect([403, 404], (err as Error).message).toContain((err as HttpError).status);
  };

  it("binds a job to the gateway that claimed it", async () => {
    const admin = await tokenFor(server, "admin");
    const created = await server.fetch("/api/v2/service-checks", {
      method: "POST",
      headers: { ...authHeaders(admin), "content-type": J },
      body: JSON.stringify({
        data: {
          type: "service-check",
          attributes: { name: "owned", check_type: "tcp", target: "127.0.0.1", port: 9, interval_seconds: 1 },
        },
      }),
    });
    expect(created.status).toBe(201);
    let jobs: Awaited<ReturnType<CoreLink["claim"]>> = [];
    const deadline = Date.now() + 20_000;
    while (jobs.length === 0 && Date.now() < deadline)
      jobs = await a.claim({ gatewayId: "gw-a", agentUids: ["agent-a"], max: 1, waitMs: 1000 });
    expect(jobs.length).toBe(1);
    const job = jobs[0]!;
    const fake = [{ check_id: job.checks[0]?.id as string, status: "success" as const, response_time_ms: 1 }];

    await refused(b.start(job.id, "agent-a"));
    await refused(b.complete(job.id, { agentId: "agent-a", gatewayId: "gw-b", results: fake }));
    await refused(b.fail(job.id, { message: "sabotage", code: "X" }));

    await a.start(job.id, "agent-a");
    await a.complete(job.id, { agentId: "agent-a", gatewayId: "gw-a", results: fake });
    const res = await server.fetch(`/api/v2/poll-jobs/${job.id}`, { headers: authHeaders(admin) });
    const doc = (await res.json()) as { data: { attributes: { status: string } } };
    expect(doc.data.attributes.status).toBe("completed");
  });

  it("refuses lifecycle operations on another gateway's agent and re-registering it", async () => {
    await refused(b.agentOp("agent-a", "degrade"), "degrade");
    await refused(b.agentOp("agent-a", "lose_connection"), "lose_connection");
    await refused(b.agentOp("agent-a", "heartbeat"), "heartbeat");
    await refused(b.registerAgent("agent-a", { gateway_id: "gw-b" }), "re-register");
    await refused(b.gatewayOp("gw-a", "heartbeat"), "gateway heartbeat");
  });
});
