import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** Issue 10 item 6: secrets a check carries are write-only. */
const J = "application/vnd.api+json";

describe("check secrets are write-only", () => {
  let server: TestServer;
  let operator: Record<string, string>;
  let viewer: Record<string, string>;

  beforeAll(async () => {
    server = await startTestServer();
    operator = authHeaders(await tokenFor(server, "operator"));
    viewer = authHeaders(await tokenFor(server, "viewer"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function v2(headers: Record<string, string>, method: string, path: string, body?: unknown) {
    const res = await server.fetch(`/api/v2${path}`, {
      method,
      headers: { ...headers, ...(body ? { "content-type": J } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, text: await res.text() };
  }

  it("never serialises communities, SNMPv3 keys or credential headers, and keeps them on update", async () => {
    const created = await v2(operator, "POST", "/service-checks", {
      data: {
        type: "service-check",
        attributes: {
          name: "secretive",
          check_type: "snmp",
          target: "127.0.0.1",
          config: {
            community: "s3cr3t-community",
            user: { name: "u", auth_key: "auth-k3y-value", priv_key: "priv-k3y-value" },
          },
        },
      },
    });
    expect(created.status).toBe(201);
    const id = JSON.parse(created.text).data.id as string;
    const web = await v2(operator, "POST", "/service-checks", {
      data: {
        type: "service-check",
        attributes: {
          name: "secretive-web",
          check_type: "http",
          target: "http://127.0.0.1:9/",
          config: { headers: { Authorization: "Bearer super-token", Accept: "text/plain" } },
        },
      },
    });
    expect(web.status).toBe(201);
    const webId = JSON.parse(web.text).data.id as string;
    for (const text of [
      created.text,
      web.text,
      (await v2(viewer, "GET", `/service-checks/${id}`)).text,
      (await v2(viewer, "GET", `/service-checks/${webId}`)).text,
    ]) {
      for (const secret of ["s3cr3t-community", "auth-k3y-value", "priv-k3y-value", "super-token"])
        expect(text).not.toContain(secret);
    }
    const shown = JSON.parse((await v2(viewer, "GET", `/service-checks/${id}`)).text).data.attributes.config;
    expect(shown.community).toEqual({ set: true });
    expect(shown.user.name).toBe("u");
    const webShown = JSON.parse((await v2(viewer, "GET", `/service-checks/${webId}`)).text).data.attributes
      .config;
    expect(webShown.headers.Accept).toBe("text/plain");
    expect(webShown.headers.Authorization).toEqual({ set: true });
    const list = await v2(viewer, "GET", "/service-checks");
    expect(list.text).not.toContain("s3cr3t-community");

    // Send back what GET showed, changing one plain member: the secrets are kept.
    const updated = await v2(operator, "PATCH", `/service-checks/${id}`, {
      data: { type: "service-check", id, attributes: { config: { ...shown, discover_interfaces: true } } },
    });
    expect(updated.status).toBe(200);
    const webUpdated = await v2(operator, "PATCH", `/service-checks/${webId}`, {
      data: { type: "service-check", id: webId, attributes: { config: { ...webShown, max_redirects: 2 } } },
    });
    expect(webUpdated.status).toBe(200);
    const stored = await server.db.one<{ config: Record<string, Record<string, unknown>> }>(
      sql`SELECT config FROM service_checks WHERE id = ${id}`,
    );
    expect(stored?.config.community).toBe("s3cr3t-community");
    expect(stored?.config.user?.auth_key).toBe("auth-k3y-value");
    expect(stored?.config.discover_interfaces).toBe(true);
    const webStored = await server.db.one<{ config: Record<string, Record<string, unknown>> }>(
      sql`SELECT config FROM service_checks WHERE id = ${webId}`,
    );
    expect(webStored?.config.headers?.Authorization).toBe("Bearer super-token");
  });
});
