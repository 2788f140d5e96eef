import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { credentialCache } from "../../src/access/credential-cache.ts";
import { createApiToken, revokeAllForUser, TOKEN_SCOPES } from "../../src/access/tokens.ts";
import { authHeaders, createRoleProfile, createUser, tokenFor } from "../helpers/auth.ts";
import { createPgDatabase, testBackend } from "../helpers/database.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

// Credential lookups are cached for a few seconds (src/access/credential-cache.ts); these
// tests pin what must hold anyway. Revocation, disabling and profile changes on the same
// server are covered in access-auth.test.ts.
describe(`cached credentials (${testBackend()})`, () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  const me = (token: string) => server.fetch("/api/v1/me", { headers: authHeaders(token) });

  it("a repeated token is served from the cache, and still records its use once a minute", async () => {
    const user = await createUser(server, { role: "viewer" });
    const { token, record } = await createApiToken(server.ctx, user.id, { name: "t", scopes: TOKEN_SCOPES });
    const lastUsed = async () =>
      (
        await server.db.one<{ last_used_at: Date | null }>(
          "SELECT last_used_at FROM api_tokens WHERE id = $1",
          [record.id],
        )
      )?.last_used_at ?? null;
    expect((await me(token)).status).toBe(200);
    const first = await lastUsed();
    expect(first).not.toBeNull();
    expect(credentialCache(server.db).size).toBeGreaterThan(0);
    expect((await me(token)).status).toBe(200);
    expect(await lastUsed()).toEqual(first);
    // Two minutes later (same cached entry: the TTL runs on the real clock) the use is recorded.
    const realNow = server.ctx.now;
    server.ctx.now = () => new Date(Date.now() + 120_000);
    try {
      expect((await me(token)).status).toBe(200);
    } finally {
      server.ctx.now = realNow;
    }
    expect((await lastUsed())?.getTime()).toBeGreaterThan((first as Date).getTime() + 60_000);
  });

  it("a cached token past its expiry is refused", async () => {
    const token = await tokenFor(server, "viewer", { expiresIn: 3600 });
    expect((await me(token)).status).toBe(200);
    const realNow = server.ctx.now;
    server.ctx.now = () => new Date(Date.now() + 2 * 3600_000);
    try {
      const res = await me(token);
      expect(res.status).toBe(401);
    } finally {
      server.ctx.now = realNow;
    }
    expect((await me(token)).status).toBe(200);
  });

  it("a user-wide revocation refuses the user's tokens on the next request", async () => {
    const user = await createUser(server, { role: "viewer" });
    const token = await tokenFor(server, { id: user.id });
    expect((await me(token)).status).toBe(200);
    await revokeAllForUser(server.ctx, user.id);
    expect((await me(token)).status).toBe(401);
  });

  it("deleting a user's profile assignment and the profile applies on the next request", async () => {
    const profile = await createRoleProfile(server, { baseRole: "viewer", grant: ["devices.create"] });
    const user = await createUser(server, { role: "viewer", roleProfileId: profile.id });
    const token = await tokenFor(server, { id: user.id });
    const admin = await tokenFor(server, "admin");
    const perms = async () => ((await (await me(token)).json()) as { permissions: string[] }).permissions;
    expect(await perms()).toContain("devices.create");
    const patch = await server.fetch(`/api/admin/users/${user.id}`, {
      method: "PATCH",
      headers: { ...authHeaders(admin), "content-type": "application/json" },
      body: JSON.stringify({ role_profile_id: null }),
    });
    expect(patch.status).toBe(200);
    expect(await perms()).not.toContain("devices.create");
    const del = await server.fetch(`/api/admin/role-profiles/${profile.id}`, {
      method: "DELETE",
      headers: authHeaders(admin),
    });
    expect(del.status).toBeLessThan(300);
    expect((await me(token)).status).toBe(200);
  });
});

describe.runIf(testBackend() === "postgres")("cached credentials on two servers sharing PostgreSQL", () => {
  let a: TestServer;
  let b: TestServer;
  let keyDir: string;
  beforeAll(async () => {
    const url = await createPgDatabase();
    // Replicas share the instance secret (tokens signed by one verify on the other).
    keyDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-key-"));
    const env = {
      DATABASE_URL: url,
      NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s",
      NETMON_SECRET_KEY_FILE: path.join(keyDir, "secret.key"),
    };
    a = await startTestServer({ env });
    b = await startTestServer({ env });
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    if (keyDir) fs.rmSync(keyDir, { recursive: true, force: true });
  });

  /**
   * Poll `server` until `token` gets `status` (bounded, no fixed sleep). The caller also checks
   * that the server's cache was dropped by a change notification since before the change —
   * the TTL running out (at most 5 s later) would end the poll too, without one.
   */
  async function pollUntil(server: TestServer, token: string, status: number): Promise<boolean> {
    for (let i = 0; i < 200; i++) {
      const res = await server.fetch("/api/v1/me", { headers: authHeaders(token) });
      if (res.status === status) return true;
      await new Promise((r) => setTimeout(r, 25));
    }
    return false;
  }

  it("a token revoked on server A is refused by server B, told by NOTIFY", async () => {
    const user = await createUser(a, { role: "viewer" });
    const token = await tokenFor(a, { id: user.id });
    const created = (await (
      await a.fetch("/api/v1/api-credentials", { headers: authHeaders(token) })
    ).json()) as { id: string }[];
    // Warm both caches.
    for (const s of [a, b, a, b]) {
      expect((await s.fetch("/api/v1/me", { headers: authHeaders(token) })).status).toBe(200);
    }
    expect(credentialCache(b.db).enabled).toBe(true);
    const before = credentialCache(b.db).changes;
    const revoke = await a.fetch(`/api/v1/api-credentials/${created[0]?.id}`, {
      method: "DELETE",
      headers: authHeaders(token),
    });
    expect(revoke.status).toBeLessThan(300);
    // Server A: the very next request.
    expect((await a.fetch("/api/v1/me", { headers: authHeaders(token) })).status).toBe(401);
    expect(await pollUntil(b, token, 401)).toBe(true);
    expect(credentialCache(b.db).changes).toBeGreaterThan(before);
  });

  it("a user disabled on server A is refused by server B; re-enabled, accepted again", async () => {
    const user = await createUser(a, { role: "viewer" });
    const token = await tokenFor(a, { id: user.id });
    const admin = await tokenFor(a, "admin");
    expect((await b.fetch("/api/v1/me", { headers: authHeaders(token) })).status).toBe(200);
    expect((await b.fetch("/api/v1/me", { headers: authHeaders(token) })).status).toBe(200);
    const cache = credentialCache(b.db);
    let before = cache.changes;
    const off = await a.fetch(`/api/admin/users/${user.id}/deactivate`, {
      method: "POST",
      headers: authHeaders(admin),
    });
    expect(off.status).toBe(200);
    expect(await pollUntil(b, token, 401)).toBe(true);
    expect(cache.changes).toBeGreaterThan(before);
    before = cache.changes;
    await a.fetch(`/api/admin/users/${user.id}/reactivate`, { method: "POST", headers: authHeaders(admin) });
    expect(await pollUntil(b, token, 200)).toBe(true);
    expect(cache.changes).toBeGreaterThan(before);
  });
});
