/**
 * API tokens that carry less than their owner (issue 17, item 6): a permission list fixed at
 * creation, intersected with the owner's permissions on every request; the role they act with
 * is capped to what the list still grants in full.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

const post = (headers: Record<string, string>, body: unknown) =>
  server.fetch("/api/v1/api-credentials", {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

async function me(token: string) {
  const r = await server.fetch("/api/v1/me", { headers: authHeaders(token) });
  expect(r.status).toBe(200);
  return (await r.json()) as { role: string; permissions: string[] };
}

describe("tokens limited to a permission list", () => {
  it("a read-only token of an admin reads devices and nothing administrative", async () => {
    const admin = authHeaders(await tokenFor(server, "admin"));
    const r = await post(admin, {
      name: "inventory script",
      permissions: ["devices.view", "devices.export"],
    });
    expect(r.status).toBe(201);
    const created = (await r.json()) as {
      token: string;
      permissions: string[];
      effective_permissions: string[];
    };
    expect(created.permissions).toEqual(["devices.export", "devices.view"]);
    expect(created.effective_permissions).toEqual(["devices.export", "devices.view"]);

    const limited = authHeaders(created.token);
    expect(await me(created.token)).toMatchObject({
      role: "viewer",
      permissions: ["devices.export", "devices.view"],
    });
    expect((await server.fetch("/api/devices?limit=1", { headers: limited })).status).toBe(200);
    expect((await server.fetch("/api/admin/users", { headers: limited })).status).toBe(403);
    expect((await server.fetch("/api/v2/alerts", { headers: limited })).status).toBe(403);

    // A token made with it carries no more than it does.
    const child = await post(limited, { name: "child" });
    expect(child.status).toBe(201);
    const c = (await child.json()) as { token: string };
    expect((await me(c.token)).permissions).toEqual(["devices.export", "devices.view"]);
    expect(
      (await post(limited, { name: "wider", permissions: ["devices.view", "settings.rbac.manage"] })).status,
    ).toBe(403);

    const list = (await (await server.fetch("/api/v1/api-credentials", { headers: admin })).json()) as {
      name: string;
      permissions: string[] | null;
      effective_permissions: string[];
    }[];
    const entry = list.find((t) => t.name === "inventory script");
    expect(entry?.effective_permissions).toEqual(["devices.export", "devices.view"]);
    const unrestricted = list.find((t) => t.permissions === null);
    expect(unrestricted?.effective_permissions).toContain("settings.rbac.manage");
  });

  it("a token never carries what its owner lacks, and unknown keys are refused", async () => {
    const viewer = authHeaders(await tokenFor(server, "viewer"));
    expect((await post(viewer, { permissions: ["settings.auth.manage"] })).status).toBe(403);
    expect((await post(viewer, { permissions: ["devices.fly"] })).status).toBe(400);
    expect((await post(viewer, { permissions: "devices.view" })).status).toBe(400);
  });

  it("is the intersection at each request: an owner who loses a permission takes it from the token", async () => {
    const admin = authHeaders(await tokenFor(server, "admin"));
    const op = await createUser(server, { role: "operator" });
    const opToken = authHeaders(await tokenFor(server, { id: op.id }));
    const r = await post(opToken, { permissions: ["devices.view", "devices.create"] });
    const { token } = (await r.json()) as { token: string };
    expect((await me(token)).permissions).toEqual(["devices.create", "devices.view"]);
    const demote = await server.fetch(`/api/admin/users/${op.id}`, {
      method: "PATCH",
      headers: { ...admin, "content-type": "application/json" },
      body: JSON.stringify({ role: "viewer" }),
    });
    expect(demote.status).toBe(200);
    expect((await me(token)).permissions).toEqual(["devices.view"]);
  });

  it("a list that still holds a role's defaults keeps that role", async () => {
    const op = await createUser(server, { role: "operator" });
    const opToken = authHeaders(await tokenFor(server, { id: op.id }));
    const plain = (await (await post(opToken, {})).json()) as { token: string };
    const full = (await me(plain.token)).permissions;
    const { token } = (await (await post(opToken, { permissions: full })).json()) as { token: string };
    expect((await me(token)).role).toBe("operator");
  });
});
