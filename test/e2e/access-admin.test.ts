import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

describe("admin API /api/admin", () => {
  let server: TestServer;
  let admin: Record<string, string>;
  const send = (method: string, path: string, body?: unknown, headers = admin) =>
    server.fetch(path, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  beforeAll(async () => {
    server = await startTestServer();
    admin = authHeaders(await tokenFor(server, "admin"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("creates, reads, updates, lists and filters users", async () => {
    const created = await send("POST", "/api/admin/users", {
      email: "Alice@Example.test",
      display_name: "Alice",
      role: "operator",
      password: "alice-password",
    });
    expect(created.status).toBe(201);
    const u = (await created.json()) as Record<string, unknown>;
    expect(Object.keys(u).sort()).toEqual(
      [
        "authenticated_at",
        "confirmed_at",
        "display_name",
        "email",
        "has_external_id",
        "has_password",
        "id",
        "inserted_at",
        "last_auth_method",
        "last_login_at",
        "local_login_enabled",
        "role",
        "role_profile_id",
        "status",
        "updated_at",
      ].sort(),
    );
    expect(u).toMatchObject({
      role: "operator",
      status: "active",
      has_password: true,
      has_external_id: false,
    });
    expect(JSON.stringify(u)).not.toContain("alice-password");

    expect((await send("POST", "/api/admin/users", { email: "alice@example.test" })).status).toBe(409);
    const badRole = await send("POST", "/api/admin/users", { email: "b@example.test", role: "boss" });
    expect(badRole.status).toBe(400);
    expect(((await badRole.json()) as { message: string }).message).toBe(
      "role must be one of: viewer, operator, admin",
    );
    expect((await send("POST", "/api/admin/users", { display_name: "no email" })).status).toBe(400);

    const read = await send("GET", `/api/admin/users/${u.id}`);
    expect(((await read.json()) as { email: string }).email).toBe("Alice@Example.test");
    expect((await send("GET", "/api/admin/users/00000000-0000-4000-8000-000000000000")).status).toBe(404);
    expect((await send("GET", "/api/admin/users/not-a-uuid")).status).toBe(404);

    const patched = await send("PATCH", `/api/admin/users/${u.id}`, {
      display_name: "Alice B",
      role: "viewer",
    });
    expect(await patched.json()).toMatchObject({ display_name: "Alice B", role: "viewer" });

    await send("POST", `/api/admin/users/${u.id}/deactivate`);
    const list = (await (await send("GET", "/api/admin/users")).json()) as { id: string; status: string }[];
    expect(Array.isArray(list)).toBe(true);
    expect(list.length).toBeGreaterThanOrEqual(2);
    const disabled = (await (await send("GET", "/api/admin/users?status=inactive")).json()) as {
      id: string;
    }[];
    expect(disabled.map((x) => x.id)).toEqual([u.id]);
    const viewers = (await (await send("GET", "/api/admin/users?role=viewer")).json()) as { role: string }[];
    expect(viewers.every((x) => x.role === "viewer")).toBe(true);
    expect((await (await send("GET", "/api/admin/users?limit=1")).json()) as unknown[]).toHaveLength(1);
    // Invalid filter values are ignored.
    expect(((await (await send("GET", "/api/admin/users?role=boss")).json()) as unknown[]).length).toBe(
      list.length,
    );
  });

  it("deactivate and reactivate repeat harmlessly, move only the status and 404 an unknown user", async () => {
    const created = await send("POST", "/api/admin/users", { email: "repeat@example.test", role: "viewer" });
    const u = (await created.json()) as { id: string; status: string; role: string };
    const step = async (action: string) => {
      const res = await send("POST", `/api/admin/users/${u.id}/${action}`);
      return { status: res.status, body: (await res.json()) as { status: string; role: string } };
    };
    for (const [action, expected] of [
      ["deactivate", "disabled"],
      ["deactivate", "disabled"],
      ["reactivate", "active"],
      ["reactivate", "active"],
    ] as const) {
      const r = await step(action);
      expect({ action, http: r.status, status: r.body.status, role: r.body.role }).toEqual({
        action,
        http: 200,
        status: expected,
        role: "viewer",
      });
    }
    for (const action of ["deactivate", "reactivate"]) {
      const missing = await send("POST", `/api/admin/users/00000000-0000-4000-8000-000000000000/${action}`);
      expect(missing.status).toBe(404);
    }
  });

  it("manages role profiles relative to a base role", async () => {
    const catalog = (await (await send("GET", "/api/admin/role-profiles/catalog")).json()) as {
      key: string;
      default_roles: string[];
    }[];
    const keys = catalog.map((c) => c.key);
    for (const k of [
      "devices.view",
      "devices.ingest",
      "alerts.acknowledge",
      "identity.resolve",
      "cli.dashboard.publish",
    ]) {
      expect(keys).toContain(k);
    }
    expect(catalog.find((c) => c.key === "cli.dashboard.publish")?.default_roles).toEqual(["admin"]);

    const system = (await (await send("GET", "/api/admin/role-profiles")).json()) as {
      system_name: string;
      id: string;
    }[];
    expect(
      system
        .map((s) => s.system_name)
        .filter(Boolean)
        .sort(),
    ).toEqual(["admin", "operator", "viewer"]);

    const created = await send("POST", "/api/admin/role-profiles", {
      name: "Helpdesk",
      base_role: "viewer",
      grant: ["alerts.acknowledge"],
      revoke: ["devices.export"],
    });
    expect(created.status).toBe(201);
    const p = (await created.json()) as { id: string; permissions: string[] };
    expect(p.permissions).toContain("alerts.acknowledge");
    expect(p.permissions).not.toContain("devices.export");
    expect((await send("POST", "/api/admin/role-profiles", { name: "helpdesk" })).status).toBe(409);
    const unknown = await send("POST", "/api/admin/role-profiles", { name: "x", grant: ["nope.key"] });
    expect(unknown.status).toBe(400);

    const patched = await send("PATCH", `/api/admin/role-profiles/${p.id}`, {
      permissions: ["devices.view"],
    });
    expect(((await patched.json()) as { permissions: string[] }).permissions).toEqual(["devices.view"]);

    const user = await createUser(server, { role: "viewer", roleProfileId: p.id });
    const inUse = await send("DELETE", `/api/admin/role-profiles/${p.id}`);
    expect(inUse.status).toBe(409);
    await send("PATCH", `/api/admin/users/${user.id}`, { role_profile_id: null });
    expect((await send("DELETE", `/api/admin/role-profiles/${p.id}`)).status).toBe(204);
    expect((await send("GET", `/api/admin/role-profiles/${p.id}`)).status).toBe(404);

    const builtIn = system.find((s) => s.system_name === "viewer") as { id: string };
    expect((await send("DELETE", `/api/admin/role-profiles/${builtIn.id}`)).status).toBe(403);
  });

  it("serves the admin OpenAPI document to admins and publishes an unauthenticated copy", async () => {
    const a = await send("GET", "/api/admin/openapi");
    expect(a.status).toBe(200);
    const doc = (await a.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe("3.0.0");
    expect(Object.keys(doc.paths)).toContain("/api/admin/users/{id}/deactivate");
    const published = await server.fetch("/api/docs/v1/admin/openapi.json");
    expect(published.status).toBe(200);
    expect(await published.json()).toEqual(doc);
    expect((await server.fetch("/api/admin/openapi")).status).toBe(401);
  });

  it("non-admins get 403 in the route's error shape; anonymous gets 401", async () => {
    const operator = authHeaders(await tokenFor(server, "operator"));
    const res = await send("GET", "/api/admin/users", undefined, operator);
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: string }).error).toBe("forbidden");
    const anon = await server.fetch("/api/admin/users");
    expect(anon.status).toBe(401);
    expect(((await anon.json()) as { error: string; message: string }).error).toBe("authentication_required");
  });

  it("answers /api/v2 401 and 403 as JSON:API error documents", async () => {
    const anon = await server.fetch("/api/v2/gateways");
    expect(anon.status).toBe(401);
    expect(anon.headers.get("content-type")).toMatch(/^application\/vnd\.api\+json/);
    const body = (await anon.json()) as { errors: { status: string; code: string }[] };
    expect(body.errors[0]).toMatchObject({ status: "401", code: "authentication_required" });
    const viewer = authHeaders(await tokenFor(server, "viewer"));
    const forbidden = await server.fetch("/api/v2/gateways", {
      method: "POST",
      headers: { ...viewer, "content-type": "application/vnd.api+json" },
      body: "{}",
    });
    expect(forbidden.status).toBe(403);
    expect(((await forbidden.json()) as { errors: { status: string }[] }).errors[0]?.status).toBe("403");
  });
});
