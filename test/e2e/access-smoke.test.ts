import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, createRoleProfile, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

describe("access fixture", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("tokenFor gives a bearer token that authenticates", async () => {
    const token = await tokenFor(server, "operator");
    const res = await server.fetch("/api/v1/me", { headers: authHeaders(token) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { role: string; permissions: string[] };
    expect(body.role).toBe("operator");
    expect(body.permissions).toContain("devices.create");
    expect(res.headers.get("x-ratelimit-limit")).toBe("600");
  });

  it("createUser with a profile applies the profile's permissions", async () => {
    const profile = await createRoleProfile(server, {
      baseRole: "viewer",
      grant: ["devices.create"],
      revoke: ["devices.view"],
    });
    const user = await createUser(server, { role: "viewer", roleProfileId: profile.id });
    const res = await server.fetch("/api/v1/me", { headers: authHeaders(await tokenFor(server, user)) });
    const body = (await res.json()) as { permissions: string[] };
    expect(body.permissions).toContain("devices.create");
    expect(body.permissions).not.toContain("devices.view");
  });

  it("anonymous /api answers 401 authentication_required without budget headers", async () => {
    const res = await server.fetch("/api/v1/me");
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: string }).error).toBe("authentication_required");
    expect(res.headers.get("x-ratelimit-remaining")).toBeNull();
  });
});
