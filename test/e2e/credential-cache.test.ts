import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { createApiKey } from "../../src/access/api-keys.ts";
import { credentialCache } from "../../src/access/credential-cache.ts";
import { createSession, SESSION_COOKIE } from "../../src/access/sessions.ts";
import { createApiToken } from "../../src/access/tokens.ts";
import { authHeaders, createRoleProfile, createUser, tokenFor } from "../helpers/auth.ts";
import { createPgDatabase, testBackend } from "../helpers/database.ts";
import { type Replica, startReplica, stopReplicas } from "../helpers/replica.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Issue 14: the credential cache serves a known credential without a lookup, and every change
 * to a credential, its user or the user's role profile takes effect at the next request — on
 * this replica, and on another one (NOTIFY) within a bounded wait.
 */
const me = (server: { fetch: TestServer["fetch"] }, headers: Record<string, string>) =>
  server.fetch("/api/v1/me", { headers });

describe("credential cache (one server)", () => {
  let server: TestServer;
  let admin: string;

  beforeAll(async () => {
    server = await startTestServer();
    admin = await tokenFor(server, "admin");
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("serves a repeated bearer token from the cache, with the same answer", async () => {
    const user = await createUser(server, { role: "operator" });
    const token = await tokenFor(server, { id: user.id });
    const cache = credentialCache(server.ctx);
    const first = await me(server, authHeaders(token));
    expect(first.status).toBe(200);
    const hits = cache.stats.hits;
    const second = await me(server, authHeaders(token));
    expect(second.status).toBe(200);
    expect(cache.stats.hits).toBeGreaterThan(hits);
    expect(await second.text()).toBe(await first.text());
  });

  it("refuses a token revoked over the API at the next request", async () => {
    const user = await createUser(server, { role: "operator" });
    const { token, record } = await createApiToken(server.ctx, user.id, { name: "t" });
    expect((await me(server, authHeaders(token))).status).toBe(200);
    expect((await me(server, authHeaders(token))).status).toBe(200);
    const del = await server.fetch(`/api/v1/api-credentials/${record.id}`, {
      method: "DELETE",
      headers: authHeaders(token),
    });
    expect(del.status).toBe(200);
    expect((await me(server, authHeaders(token))).status).toBe(401);
  });

  it("refuses a token revoked by any writer (straight SQL) at the next request", async () => {
    const user = await createUser(server, { role: "operator" });
    const { token, record } = await createApiToken(server.ctx, user.id, { name: "t" });
    expect((await me(server, authHeaders(token))).status).toBe(200);
    await server.db.query("UPDATE api_tokens SET revoked_at = now() WHERE id = $1", [record.id]);
    // PGlite: the NOTIFY is handled before the UPDATE returns; PostgreSQL: within its delivery.
    if (testBackend() === "pglite") expect((await me(server, authHeaders(token))).status).toBe(401);
    await waitFor(async () => (await me(server, authHeaders(token))).status === 401, "revocation", 5000, 50);
    expect((await me(server, authHeaders(token))).status).toBe(401);
  });

  it("a deactivated user's token, API key and session all stop at once", async () => {
    const user = await createUser(server, { role: "operator" });
    const token = await tokenFor(server, { id: user.id });
    const { key } = await createApiKey(server.ctx, SYSTEM_ACTOR, { name: "k", user_id: user.id });
    const session = await createSession(server.ctx, user.id);
    const creds: Record<string, string>[] = [
      authHeaders(token),
      { "x-api-key": key },
      { cookie: `${SESSION_COOKIE}=${session.token}` },
    ];
    for (const h of creds) {
      expect((await me(server, h)).status).toBe(200);
      expect((await me(server, h)).status).toBe(200);
    }
    const res = await server.fetch(`/api/admin/users/${user.id}/deactivate`, {
      method: "POST",
      headers: authHeaders(admin),
    });
    expect(res.status).toBe(200);
    for (const h of creds) expect((await me(server, h)).status).toBe(401);
  });

  it("a role change and a role-profile change apply at the next request", async () => {
    const profile = await createRoleProfile(server, { baseRole: "viewer" });
    const user = await createUser(server, { role: "viewer", roleProfileId: profile.id });
    const token = await tokenFor(server, { id: user.id });
    const before = (await (await me(server, authHeaders(token))).json()) as { permissions: string[] };
    expect(before.permissions).not.toContain("devices.create");
    await me(server, authHeaders(token));

    const patch = await server.fetch(`/api/admin/role-profiles/${profile.id}`, {
      method: "PATCH",
      headers: { ...authHeaders(admin), "content-type": "application/json" },
      body: JSON.stringify({ grant: ["devices.create"] }),
    });
    expect(patch.status).toBe(200);
    const granted = await waitFor(
      async () => {
        const body = (await (await me(server, authHeaders(token))).json()) as { permissions: string[] };
        return body.permissions.includes("devices.create") ? body : null;
      },
      "the profile change",
      5000,
      50,
    );
    expect(granted.permissions).toContain("devices.create");

    const demote = await server.fetch(`/api/admin/users/${user.id}`, {
      method: "PATCH",
      headers: { ...authHeaders(admin), "content-type": "application/json" },
      body: JSON.stringify({ role: "operator", role_profile_id: null }),
    });
    expect(demote.status).toBe(200);
    const changed = await waitFor(
      async () => {
        const body = (await (await me(server, authHeaders(token))).json()) as {
          role: string;
          user: { role: string };
        };
        return body.role === "operator" ? body : null;
      },
      "the role change",
      5000,
      50,
    );
    expect(changed.user.role).toBe("operator");
  });

  it("this replica's own changes apply at the next request without waiting for the NOTIFY", async () => {
    // On PostgreSQL the NOTIFY reaches this process's listener after the writing request has
    // answered; a change made here must not depend on it. Drop the notifications to make that
    // race certain instead of occasional.
    const cache = credentialCache(server.ctx) as unknown as { onNotify: (p: string) => void };
    const onNotify = cache.onNotify;
    cache.onNotify = () => {};
    try {
      const user = await createUser(server, { role: "operator" });
      const token = await tokenFor(server, { id: user.id });
      const session = await createSession(server.ctx, user.id);
      const cookie = { cookie: `${SESSION_COOKIE}=${session.token}` };
      const perms = async () =>
        ((await (await me(server, authHeaders(token))).json()) as { permissions: string[] }).permissions;
      expect(await perms()).toContain("devices.create");
      expect(await perms()).toContain("devices.create");
      expect((await me(server, cookie)).status).toBe(200);

      const demote = await server.fetch(`/api/admin/users/${user.id}`, {
        method: "PATCH",
        headers: { ...authHeaders(admin), "content-type": "application/json" },
        body: JSON.stringify({ role: "viewer" }),
      });
      expect(demote.status).toBe(200);
      expect(await perms()).not.toContain("devices.create");

      const off = await server.fetch(`/api/admin/users/${user.id}/deactivate`, {
        method: "POST",
        headers: authHeaders(admin),
      });
      expect(off.status).toBe(200);
      expect((await me(server, authHeaders(token))).status).toBe(401);
      expect((await me(server, cookie)).status).toBe(401);
    } finally {
      cache.onNotify = onNotify;
    }
  });

  it("refuses a cached token once it expires", async () => {
    const user = await createUser(server, { role: "viewer" });
    const token = await tokenFor(server, { id: user.id }, { expiresIn: 120 });
    expect((await me(server, authHeaders(token))).status).toBe(200);
    const hits = credentialCache(server.ctx).stats.hits;
    expect((await me(server, authHeaders(token))).status).toBe(200);
    expect(credentialCache(server.ctx).stats.hits).toBeGreaterThan(hits);
    const realNow = server.ctx.now;
    try {
      server.ctx.now = () => new Date(Date.now() + 121_000);
      const res = await me(server, authHeaders(token));
      expect(res.status).toBe(401);
    } finally {
      server.ctx.now = realNow;
    }
  });

  it("signing out ends the session at the next request", async () => {
    const user = await createUser(server, { role: "viewer" });
    const session = await createSession(server.ctx, user.id);
    const cookie = { cookie: `${SESSION_COOKIE}=${session.token}` };
    const meBody = (await (await me(server, cookie)).json()) as { csrf_token: string };
    expect((await me(server, cookie)).status).toBe(200);
    const out = await server.fetch("/users/log-out", {
      method: "DELETE",
      headers: { ...cookie, "x-csrf-token": meBody.csrf_token },
    });
    expect(out.status).toBeLessThan(400);
    expect((await me(server, cookie)).status).toBe(401);
  });
});

describe("credential cache and the failed-authentication budget", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_AUTH_FAILURES: "3/60s" } });
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("an IP out of failed authentications gets 429 even with a cached valid token", async () => {
    const token = await tokenFor(server, "viewer");
    expect((await me(server, authHeaders(token))).status).toBe(200);
    const ok = await me(server, authHeaders(token)); // served from the cache
    expect(ok.status).toBe(200);
    const limit = Number(ok.headers.get("x-ratelimit-limit"));
    expect(Number(ok.headers.get("x-ratelimit-remaining"))).toBe(limit - 2);
    for (let i = 0; i < 3; i++) {
      expect((await me(server, authHeaders(`not-a-token-${i}`))).status).toBe(401);
    }
    const refused = await me(server, authHeaders(token));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    // Refused before its budget: the route's budget was not drawn from.
    const realNow = server.ctx.now;
    try {
      server.ctx.now = () => new Date(Date.now() + 61_000);
      const again = await me(server, authHeaders(token));
      expect(again.status).toBe(200);
    } finally {
      server.ctx.now = realNow;
    }
  });
});

describe.runIf(testBackend() === "postgres")("credential cache across replicas (PostgreSQL)", () => {
  let url: string;
  let a: TestServer;
  let b: Replica;
  let admin: string;

  beforeAll(async () => {
    url = await createPgDatabase();
    a = await startTestServer({ env: { DATABASE_URL: url } });
    // One instance secret for both, as replicas have (tokens are signed with it).
    b = await startReplica({ DATABASE_URL: url, NETMON_SECRET_KEY_FILE: path.join(a.dataDir, "secret.key") });
    admin = await tokenFor(a, "admin");
  }, 180_000);
  afterAll(async () => {
    await a?.stop();
    stopReplicas();
  });

  const onB = (headers: Record<string, string>) => fetch(new URL("/api/v1/me", b.url), { headers });

  it("a token revoked on replica A is refused by replica B", async () => {
    const user = await createUser(a, { role: "operator" });
    const { token, record } = await createApiToken(a.ctx, user.id, { name: "t" });
    expect((await onB(authHeaders(token))).status).toBe(200);
    expect((await onB(authHeaders(token))).status).toBe(200);
    const del = await a.fetch(`/api/v1/api-credentials/${record.id}`, {
      method: "DELETE",
      headers: authHeaders(token),
    });
    expect(del.status).toBe(200);
    expect((await me(a, authHeaders(token))).status).toBe(401);
    await waitFor(async () => (await onB(authHeaders(token))).status === 401, "B refusing", 5000, 50);
    expect((await onB(authHeaders(token))).status).toBe(401);
  });

  it("a user deactivated on replica A is refused by replica B", async () => {
    const user = await createUser(a, { role: "operator" });
    const token = await tokenFor(a, { id: user.id });
    const { key } = await createApiKey(a.ctx, SYSTEM_ACTOR, { name: "k", user_id: user.id });
    const creds: Record<string, string>[] = [authHeaders(token), { "x-api-key": key }];
    for (const h of creds) {
      expect((await onB(h)).status).toBe(200);
      expect((await onB(h)).status).toBe(200);
    }
    const res = await a.fetch(`/api/admin/users/${user.id}/deactivate`, {
      method: "POST",
      headers: authHeaders(admin),
    });
    expect(res.status).toBe(200);
    for (const h of creds) {
      await waitFor(async () => (await onB(h)).status === 401, "B refusing", 5000, 50);
    }
  });

  it("a role change on replica A applies on replica B", async () => {
    const user = await createUser(a, { role: "viewer" });
    const token = await tokenFor(a, { id: user.id });
    const before = (await (await onB(authHeaders(token))).json()) as { role: string };
    expect(before.role).toBe("viewer");
    const res = await a.fetch(`/api/admin/users/${user.id}`, {
      method: "PATCH",
      headers: { ...authHeaders(admin), "content-type": "application/json" },
      body: JSON.stringify({ role: "operator" }),
    });
    expect(res.status).toBe(200);
    const after = await waitFor(
      async () => {
        const body = (await (await onB(authHeaders(token))).json()) as {
          role: string;
          user: { role: string };
        };
        return body.role === "operator" ? body : null;
      },
      "B seeing the new role",
      5000,
      50,
    );
    expect(after.user.role).toBe("operator");
  });

  it("while its invalidation listener is down a replica serves nothing from the cache", async () => {
    const user = await createUser(a, { role: "operator" });
    const { token, record } = await createApiToken(a.ctx, user.id, { name: "t" });
    const cache = credentialCache(a.ctx);
    expect((await me(a, authHeaders(token))).status).toBe(200);
    expect((await me(a, authHeaders(token))).status).toBe(200);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      // No NOTIFY from here on: a stale entry could only be dropped by the listener logic.
      await admin.query("ALTER TABLE api_tokens DISABLE TRIGGER netmon_credentials_changed");
      const listeners = async () =>
        (
          await admin.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'
               AND pid <> pg_backend_pid()`,
          )
        ).rows.map((r) => r.pid);
      const before = await listeners();
      expect(before).toHaveLength(2); // A's listener and B's
      await admin.query("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid", [before]);
      // Down (or already back, which starts empty): either way nothing stale may be served.
      await waitFor(
        async () => !cache.active || cache.size === 0,
        "the listener loss to be noticed",
        10_000,
        5,
      );
      await admin.query("UPDATE api_tokens SET revoked_at = now() WHERE id = $1", [record.id]);
      expect((await me(a, authHeaders(token))).status).toBe(401);
      // And once it listens again, it caches again (starting empty).
      await waitFor(async () => cache.active, "the listener to come back", 10_000, 50);
      const other = await tokenFor(a, { id: user.id });
      expect((await me(a, authHeaders(other))).status).toBe(200);
      const hits = cache.stats.hits;
      expect((await me(a, authHeaders(other))).status).toBe(200);
      expect(cache.stats.hits).toBeGreaterThan(hits);
    } finally {
      await admin.query("ALTER TABLE api_tokens ENABLE TRIGGER netmon_credentials_changed").catch(() => {});
      await admin.end();
    }
  });
});
