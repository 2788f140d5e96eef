import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHECK_CONFIG_SCHEMAS } from "../../src/monitoring/checks/config-schemas.ts";
import { CHECK_TYPES } from "../../src/monitoring/checks/types.ts";
import { registerGateway } from "../../src/monitoring/fleet.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * Issue 13 (validate everything): a check's config is checked against its type's published
 * schema. A typo used to give a green check with the default silently applied.
 */
const J = "application/vnd.api+json";

describe("service check config validation", () => {
  let server: TestServer;
  let operator: Record<string, string>;

  beforeAll(async () => {
    server = await startTestServer();
    operator = authHeaders(await tokenFor(server, "operator"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function send(method: string, path: string, attributes: Record<string, unknown>, id?: string) {
    const res = await server.fetch(`/api/v2${path}`, {
      method,
      headers: { ...operator, "content-type": J },
      body: JSON.stringify({ data: { type: "service-check", ...(id ? { id } : {}), attributes } }),
    });
    return {
      status: res.status,
      body: (await res.json()) as {
        data?: { id: string };
        errors?: {
          code: string;
          detail: string;
          source?: { pointer?: string };
          meta?: { members?: string[] };
        }[];
      },
    };
  }

  it("refuses unknown members, naming each one and the options", async () => {
    const r = await send("POST", "/service-checks", {
      name: "typo",
      check_type: "http",
      target: "http://127.0.0.1:9/",
      config: { expect_status: 200, methdo: "GET" },
    });
    expect(r.status).toBe(400);
    const e = r.body.errors?.[0];
    expect(e?.code).toBe("invalid_config");
    expect(e?.detail).toContain("config.expect_status is not an option of http checks");
    expect(e?.detail).toContain("config.methdo");
    expect(e?.detail).toContain("expected_status");
    expect(e?.meta?.members?.sort()).toEqual(["config.expect_status", "config.methdo"]);
    expect(e?.source?.pointer).toMatch(/^\/data\/attributes\/config\//);
  });

  it("refuses mistyped members and out-of-range values", async () => {
    const count = await send("POST", "/service-checks", {
      name: "ping-typed",
      check_type: "ping",
      target: "127.0.0.1",
      config: { count: "three" },
    });
    expect(count.status).toBe(400);
    expect(count.body.errors?.[0]?.detail).toContain("config.count must be integer");
    const version = await send("POST", "/service-checks", {
      name: "snmp-v4",
      check_type: "snmp",
      target: "127.0.0.1",
      config: { version: "4", user: { level: "authPriv" } },
    });
    expect(version.status).toBe(400);
    expect(version.body.errors?.[0]?.detail).toContain("config.version");
    expect(version.body.errors?.[0]?.detail).toContain("config.user");
  });

  it("accepts every documented option, and checks config on update too", async () => {
    const ok = await send("POST", "/service-checks", {
      name: "http-ok",
      check_type: "http",
      target: "http://127.0.0.1:9/",
      config: { method: "HEAD", expected_status: "2xx", follow_redirects: false, headers: { "x-a": "b" } },
    });
    expect(ok.status).toBe(201);
    const id = ok.body.data?.id as string;
    const bad = await send(
      "PATCH",
      `/service-checks/${id}`,
      { config: { expected_status: [200], body_contain: "x" } },
      id,
    );
    expect(bad.status).toBe(400);
    expect(bad.body.errors?.[0]?.detail).toContain("config.body_contain is not an option");
    const good = await send(
      "PATCH",
      `/service-checks/${id}`,
      { config: { expected_status: [200, 204] } },
      id,
    );
    expect(good.status).toBe(200);
  });

  it("keeps check names unique per device, ignoring case", async () => {
    const added = await server.fetch("/api/v1/device-updates", {
      method: "POST",
      headers: { ...operator, "content-type": "application/json" },
      body: JSON.stringify({
        updates: [
          { ip: "192.0.2.71", hostname: "name-a", source: "manual" },
          { ip: "192.0.2.72", hostname: "name-b", source: "manual" },
        ],
      }),
    });
    expect(added.status).toBe(200);
    const [a, b] = ((await added.json()) as { data: { results: { uid: string }[] } }).data.results.map(
      (r) => r.uid,
    );
    const ping = (name: string, device_uid?: string) =>
      send("POST", "/service-checks", {
        name,
        check_type: "ping",
        target: "127.0.0.1",
        ...(device_uid ? { device_uid } : {}),
      });
    expect((await ping("Reachability", a)).status).toBe(201);
    const again = await ping("reachability", a);
    expect(again.status).toBe(409);
    expect(again.body.errors?.[0]?.code).toBe("name_taken");
    expect(again.body.errors?.[0]?.detail).toContain(String(a));
    // The same name on another device, and once without a device, is fine.
    expect((await ping("Reachability", b)).status).toBe(201);
    const loose = await ping("Reachability");
    expect(loose.status).toBe(201);
    expect((await ping("REACHABILITY")).status).toBe(409);
    // Renaming onto a taken name is refused too.
    const other = await ping("Other");
    expect(other.status).toBe(201);
    const id = other.body.data?.id as string;
    const renamed = await send("PATCH", `/service-checks/${id}`, { name: "reachability" }, id);
    expect(renamed.status).toBe(409);
  });

  it("places a check on a registered gateway only", async () => {
    const ghost = await send("POST", "/service-checks", {
      name: "behind nowhere",
      check_type: "ping",
      target: "127.0.0.1",
      gateway_id: "no-such-gateway",
    });
    expect(ghost.status).toBe(422);
    expect(ghost.body.errors?.[0]?.source?.pointer).toBe("/data/attributes/gateway_id");
    await registerGateway(server.ctx, "gw-placement", {});
    const placed = await send("POST", "/service-checks", {
      name: "behind a site",
      check_type: "ping",
      target: "127.0.0.1",
      gateway_id: "gw-placement",
    });
    expect(placed.status, JSON.stringify(placed.body)).toBe(201);
    const moved = await send(
      "PATCH",
      `/service-checks/${placed.body.data?.id}`,
      { gateway_id: "nowhere" },
      placed.body.data?.id,
    );
    expect(moved.status).toBe(422);
  });

  it("validates label pools: agent labels set by an admin, and a check's agent_labels selector", async () => {
    const admin = authHeaders(await tokenFor(server, "admin"));
    const { registerAgent } = await import("../../src/monitoring/fleet.ts");
    await registerAgent(server.ctx, "agent-labelled", {});
    const patch = (labels: unknown) =>
      server.fetch("/api/v2/agents/agent-labelled", {
        method: "PATCH",
        headers: { ...admin, "content-type": J },
        body: JSON.stringify({ data: { type: "agent", id: "agent-labelled", attributes: { labels } } }),
      });
    const bad = await patch({ "Site!": "dc1" });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { errors: { detail: string }[] }).errors[0]?.detail).toMatch(/Site!/);
    expect((await patch({ site: 7 })).status).toBe(422);
    const viewerPatch = await server.fetch("/api/v2/agents/agent-labelled", {
      method: "PATCH",
      headers: { ...authHeaders(await tokenFor(server, "viewer")), "content-type": J },
      body: JSON.stringify({ data: { type: "agent", id: "agent-labelled", attributes: { labels: {} } } }),
    });
    expect(viewerPatch.status).toBe(403);
    const ok = await patch({ site: "dc1", role: "edge" });
    expect(ok.status).toBe(200);
    expect(
      ((await ok.json()) as { data: { attributes: { labels: unknown } } }).data.attributes.labels,
    ).toEqual({
      site: "dc1",
      role: "edge",
    });

    const empty = await send("POST", "/service-checks", {
      name: "empty pool",
      check_type: "ping",
      target: "127.0.0.1",
      agent_labels: {},
    });
    expect(empty.status).toBe(422);
    expect(empty.body.errors?.[0]?.source?.pointer).toBe("/data/attributes/agent_labels");
    const proto = await send("POST", "/service-checks", {
      name: "hostile pool",
      check_type: "ping",
      target: "127.0.0.1",
      agent_labels: JSON.parse('{"__proto__": {"polluted": "yes"}}'),
    });
    // The input guard refuses the key before any resource code sees it.
    expect(proto.status).toBe(400);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const pooled = await send("POST", "/service-checks", {
      name: "in dc1",
      check_type: "ping",
      target: "127.0.0.1",
      agent_labels: { site: "dc1" },
    });
    expect(pooled.status, JSON.stringify(pooled.body)).toBe(201);
    const cleared = await send(
      "PATCH",
      `/service-checks/${pooled.body.data?.id}`,
      { agent_labels: null },
      pooled.body.data?.id,
    );
    expect(cleared.status).toBe(200);
  });

  it("publishes each check type's config schema in the OpenAPI document", async () => {
    const res = await server.fetch("/api/v2/open_api", { headers: operator });
    const doc = (await res.json()) as { components: { schemas: Record<string, unknown> } };
    for (const t of CHECK_TYPES) {
      expect(doc.components.schemas[`service-check-config-${t}`]).toEqual(CHECK_CONFIG_SCHEMAS[t]);
      expect((CHECK_CONFIG_SCHEMAS[t] as { additionalProperties: boolean }).additionalProperties).toBe(false);
    }
  });
});
