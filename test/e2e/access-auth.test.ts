import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccessFeature } from "../../src/access/feature.ts";
import { issueControlPlaneToken } from "../../src/access/tokens.ts";
import type { Feature } from "../../src/kernel/feature.ts";
import { authHeaders, createRoleProfile, createUser, tokenFor } from "../helpers/auth.ts";
import { createTestDatabase } from "../helpers/database.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});

async function signIn(
  server: TestServer,
  email: string,
  password: string,
  headers: Record<string, string> = {},
) {
  return server.fetch("/users/log-in", json({ email, password }, headers));
}

/** The `name=value` pairs of a response's set-cookie headers. */
function cookiesOf(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  for (const c of res.headers.getSetCookie()) {
    const [pair] = c.split(";");
    const eq = (pair as string).indexOf("=");
    out[(pair as string).slice(0, eq)] = (pair as string).slice(eq + 1);
  }
  return out;
}

describe("bootstrap admin", () => {
  it("creates the admin from SERVICE_ADMIN_PASSWORD", async () => {
    const server = await startTestServer({ env: { SERVICE_ADMIN_PASSWORD: "boot-secret-1" } });
    try {
      const res = await signIn(server, "admin@localhost", "boot-secret-1");
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        user: { role: string; display_name: string; last_auth_method: string };
      };
      expect(body.user.role).toBe("admin");
      expect(body.user.display_name).toBe("admin");
      expect(body.user.last_auth_method).toBe("password");
    } finally {
      await server.stop();
    }
  }, 120_000);

  it("reads the password from SERVICE_ADMIN_PASSWORD_FILE (trimmed) and honours SERVICE_ADMIN_EMAIL", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-admin-"));
    const file = path.join(dir, "pw");
    fs.writeFileSync(file, "file-secret-22\n");
    const server = await startTestServer({
      env: { SERVICE_ADMIN_PASSWORD_FILE: file, SERVICE_ADMIN_EMAIL: "root@example.test" },
    });
    try {
      expect((await signIn(server, "root@example.test", "file-secret-22")).status).toBe(200);
      expect((await signIn(server, "admin@localhost", "file-secret-22")).status).toBe(401);
    } finally {
      await server.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it("without a password logs one warning saying how to create an admin", async () => {
    const server = await startTestServer();
    try {
      const warnings = server.logs.filter((l) => l.includes("SERVICE_ADMIN_PASSWORD"));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain("netmon users create");
      expect(JSON.parse(warnings[0] as string).level).toBe(40);
    } finally {
      await server.stop();
    }
  }, 120_000);

  it("re-applies the mounted secret on restart only with SERVICE_ADMIN_PASSWORD_FORCE_SYNC", async () => {
    const { db } = await createTestDatabase();
    try {
      const first = await startTestServer({ db, env: { SERVICE_ADMIN_PASSWORD: "original-pw" } });
      await first.stop();
      // Restart with a new secret but no force-sync: the old password stays.
      const second = await startTestServer({ db, env: { SERVICE_ADMIN_PASSWORD: "rotated-pw" } });
      expect((await signIn(second, "admin@localhost", "original-pw")).status).toBe(200);
      expect((await signIn(second, "admin@localhost", "rotated-pw")).status).toBe(401);
      await second.stop();
      // With force-sync the mounted secret wins.
      const third = await startTestServer({
        db,
        env: { SERVICE_ADMIN_PASSWORD: "rotated-pw", SERVICE_ADMIN_PASSWORD_FORCE_SYNC: "true" },
      });
      expect((await signIn(third, "admin@localhost", "rotated-pw")).status).toBe(200);
      expect((await signIn(third, "admin@localhost", "original-pw")).status).toBe(401);
      expect(third.logs.some((l) => l.includes("FORCE_SYNC"))).toBe(true);
      await third.stop();
    } finally {
      await db.close();
    }
  }, 120_000);
});

describe("sign-in, sessions, CSRF", () => {
  let server: TestServer;
  beforeAll(async () => {
    // Trust loopback as a proxy so each test can present its own client IP (sign-in budget is per IP).
    server = await startTestServer({ env: { NETMON_TRUSTED_PROXIES: "127.0.0.1" } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  let ipSeq = 10;
  const ip = () => ({ "x-forwarded-for": `198.51.100.${ipSeq++}` });

  it("GET /users/log-in serves an HTML sign-in page", async () => {
    const res = await server.fetch("/users/log-in");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain('action="/users/log-in"');
    expect(html).toContain('name="password"');
  });

  it("JSON sign-in sets an HttpOnly SameSite=Lax session cookie and records the login", async () => {
    const user = await createUser(server, { role: "viewer" });
    const res = await signIn(server, user.email, user.password, ip());
    expect(res.status).toBe(200);
    const setCookies = res.headers.getSetCookie();
    const session = setCookies.find((c) => c.startsWith("netmon_session="));
    expect(session).toMatch(/HttpOnly/i);
    expect(session).toMatch(/SameSite=Lax/i);
    expect(session).not.toMatch(/Secure/i); // plain http in tests
    const body = (await res.json()) as {
      user: { last_login_at: string | null; last_auth_method: string };
      csrf_token: string;
    };
    expect(body.user.last_login_at).not.toBeNull();
    expect(body.user.last_auth_method).toBe("password");

    const cookie = `netmon_session=${cookiesOf(res).netmon_session}`;
    const me = await server.fetch("/api/v1/me", { headers: { cookie } });
    expect(me.status).toBe(200);
    const meBody = (await me.json()) as { user: { email: string }; auth_method: string; csrf_token: string };
    expect(meBody.user.email).toBe(user.email);
    expect(meBody.auth_method).toBe("session");
    expect(meBody.csrf_token).toBe(body.csrf_token);
  });

  it("marks the cookie Secure behind HTTPS (X-Forwarded-Proto from a trusted proxy)", async () => {
    const user = await createUser(server, { role: "viewer" });
    const res = await signIn(server, user.email, user.password, { ...ip(), "x-forwarded-proto": "https" });
    expect(res.status).toBe(200);
    expect(res.headers.getSetCookie().find((c) => c.startsWith("netmon_session="))).toMatch(/Secure/);
  });

  it("form sign-in redirects (303) to a same-site return_to; wrong password re-renders 401", async () => {
    const user = await createUser(server, { role: "viewer" });
    const ok = await server.fetch("/users/log-in", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...ip() },
      body: new URLSearchParams({
        email: user.email,
        password: user.password,
        return_to: "//evil.example/x",
      }),
      redirect: "manual",
    });
    expect(ok.status).toBe(303);
    expect(ok.headers.get("location")).toBe("/");
    const bad = await server.fetch("/users/log-in", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...ip() },
      body: new URLSearchParams({ email: user.email, password: "wrong-password" }),
    });
    expect(bad.status).toBe(401);
    expect(await bad.text()).toContain("Invalid email or password");
  });

  it("wrong password and unknown email answer the same 401", async () => {
    const user = await createUser(server, { role: "viewer" });
    const a = await signIn(server, user.email, "not-the-password", ip());
    const b = await signIn(server, "nobody@example.test", "not-the-password", ip());
    expect(a.status).toBe(401);
    expect(b.status).toBe(401);
    expect(await a.json()).toEqual(await b.json());
  });

  it("a disabled user cannot sign in", async () => {
    const user = await createUser(server, { role: "viewer" });
    const admin = await tokenFor(server, "admin");
    await server.fetch(`/api/admin/users/${user.id}/deactivate`, {
      method: "POST",
      headers: authHeaders(admin),
    });
    expect((await signIn(server, user.email, user.password, ip())).status).toBe(401);
  });

  it("cookie-authenticated mutations need the CSRF token; bearer ones do not", async () => {
    const user = await createUser(server, { role: "viewer" });
    const res = await signIn(server, user.email, user.password, ip());
    const { csrf_token } = (await res.json()) as { csrf_token: string };
    const cookie = `netmon_session=${cookiesOf(res).netmon_session}`;
    const create = (headers: Record<string, string>) =>
      server.fetch("/api/v1/api-credentials", json({ name: "from browser" }, { cookie, ...headers }));

    const missing = await create({});
    expect(missing.status).toBe(403);
    expect(((await missing.json()) as { error: string }).error).toBe("csrf_invalid");
    expect((await create({ "x-csrf-token": "forged" })).status).toBe(403);
    const crossSite = await create({ "x-csrf-token": csrf_token, origin: "https://evil.example" });
    expect(crossSite.status).toBe(403);
    expect((await create({ "x-csrf-token": csrf_token })).status).toBe(201);
    // Safe methods need no token.
    expect((await server.fetch("/api/v1/api-credentials", { headers: { cookie } })).status).toBe(200);
    // Bearer-authenticated mutations skip CSRF.
    const token = await tokenFor(server, { id: user.id });
    expect(
      (await server.fetch("/api/v1/api-credentials", json({ name: "cli" }, authHeaders(token)))).status,
    ).toBe(201);
  });

  it("sign-out revokes the server-side session", async () => {
    const user = await createUser(server, { role: "viewer" });
    const res = await signIn(server, user.email, user.password, ip());
    const { csrf_token } = (await res.json()) as { csrf_token: string };
    const cookie = `netmon_session=${cookiesOf(res).netmon_session}`;
    // Sign-out is itself CSRF-protected.
    expect((await server.fetch("/users/log-out", { method: "POST", headers: { cookie } })).status).toBe(403);
    const out = await server.fetch("/users/log-out", {
      method: "POST",
      headers: { cookie, "x-csrf-token": csrf_token },
    });
    expect(out.status).toBe(200);
    expect(out.headers.getSetCookie().some((c) => c.startsWith("netmon_session=;"))).toBe(true);
    // The old cookie no longer works even if the browser kept it.
    expect((await server.fetch("/api/v1/me", { headers: { cookie } })).status).toBe(401);
  });

  it("a session expires after the idle timeout and after the absolute lifetime", async () => {
    const user = await createUser(server, { role: "viewer" });
    const res = await signIn(server, user.email, user.password, ip());
    const cookie = `netmon_session=${cookiesOf(res).netmon_session}`;
    const at = async (offsetMs: number) => {
      const realNow = server.ctx.now;
      server.ctx.now = () => new Date(Date.now() + offsetMs);
      try {
        return (await server.fetch("/api/v1/me", { headers: { cookie } })).status;
      } finally {
        server.ctx.now = realNow;
      }
    };
    // Used 50 minutes later: still valid (idle timeout 1 h) and the activity is recorded.
    expect(await at(50 * 60_000)).toBe(200);
    // 1 h 40 min after sign-in, but only 50 min after the last use: still valid.
    expect(await at(100 * 60_000)).toBe(200);
    // More than an hour idle: expired.
    expect(await at(100 * 60_000 + 61 * 60_000)).toBe(401);
    // Past the absolute lifetime (30 days): expired even when it was active a minute ago.
    await server.db.query("UPDATE sessions SET last_seen_at = $1 WHERE user_id = $2", [
      new Date(Date.now() + 31 * 86400_000 - 60_000),
      user.id,
    ]);
    expect(await at(31 * 86400_000)).toBe(401);
  });

  it("throttles sign-in per IP (10 per 60 s), even with the right password", async () => {
    const user = await createUser(server, { role: "viewer" });
    const from = ip();
    for (let i = 0; i < 10; i++) {
      expect((await signIn(server, `someone${i}@example.test`, "bad-password", from)).status).toBe(401);
    }
    const blocked = await signIn(server, user.email, user.password, from);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(((await blocked.json()) as { error: string }).error).toBe("rate_limited");
    // Another IP is unaffected.
    expect((await signIn(server, user.email, user.password, ip())).status).toBe(200);
  });

  it("throttles failed sign-ins per account without revealing whether the email exists", async () => {
    const user = await createUser(server, { role: "viewer" });
    for (let i = 0; i < 5; i++) {
      expect((await signIn(server, user.email, "bad-password", ip())).status).toBe(401);
      expect((await signIn(server, "ghost@example.test", "bad-password", ip())).status).toBe(401);
    }
    const real = await signIn(server, user.email, user.password, ip());
    const ghost = await signIn(server, "ghost@example.test", "whatever-pw", ip());
    expect(real.status).toBe(429);
    expect(ghost.status).toBe(429);
    const a = (await real.json()) as Record<string, unknown>;
    const b = (await ghost.json()) as Record<string, unknown>;
    expect(Object.keys(a).sort()).toEqual(Object.keys(b).sort());
    expect(a.error).toBe(b.error);
    // Another account is not throttled.
    const other = await createUser(server, { role: "viewer" });
    expect((await signIn(server, other.email, other.password, ip())).status).toBe(200);
  });
});

describe("API tokens, API keys, profiles", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("creates a token once, lists it without the secret, and a revoked token gets 401 at once", async () => {
    const user = await createUser(server, { role: "operator" });
    const bootstrap = await tokenFor(server, { id: user.id });
    const created = await server.fetch(
      "/api/v1/api-credentials",
      json({ name: "ci", scopes: ["read", "mcp"], expires_in: 3600 }, authHeaders(bootstrap)),
    );
    expect(created.status).toBe(201);
    const c = (await created.json()) as { id: string; token: string; scopes: string[]; expires_at: string };
    expect(c.scopes).toEqual(["read", "mcp"]);
    expect(c.token.split(".")).toHaveLength(3);
    const payload = JSON.parse(
      Buffer.from(c.token.split(".")[1] as string, "base64url").toString(),
    ) as Record<string, unknown>;
    expect(payload.sub).toBe(`user:${user.id}`);
    expect(typeof payload.jti).toBe("string");
    expect(payload.scope).toBe("read mcp");
    expect((payload.exp as number) - (payload.iat as number)).toBe(3600);

    expect((await server.fetch("/api/v1/me", { headers: authHeaders(c.token) })).status).toBe(200);
    const list = (await (
      await server.fetch("/api/v1/api-credentials", { headers: authHeaders(c.token) })
    ).json()) as Record<string, unknown>[];
    const mine = list.find((t) => t.id === c.id);
    expect(mine?.name).toBe("ci");
    expect(JSON.stringify(list)).not.toContain(c.token);
    expect(mine).not.toHaveProperty("token");

    const del = await server.fetch(`/api/v1/api-credentials/${c.id}`, {
      method: "DELETE",
      headers: authHeaders(bootstrap),
    });
    expect(del.status).toBe(200);
    const after = await server.fetch("/api/v1/me", { headers: authHeaders(c.token) });
    expect(after.status).toBe(401);
    expect(((await after.json()) as { error: string }).error).toBe("authentication_required");
  });

  it("a user cannot revoke someone else's token", async () => {
    const a = await createUser(server, { role: "viewer" });
    const tokenA = await tokenFor(server, { id: a.id });
    const created = (await (
      await server.fetch("/api/v1/api-credentials", json({ name: "a" }, authHeaders(tokenA)))
    ).json()) as { id: string };
    const tokenB = await tokenFor(server, "viewer");
    expect(
      (
        await server.fetch(`/api/v1/api-credentials/${created.id}`, {
          method: "DELETE",
          headers: authHeaders(tokenB),
        })
      ).status,
    ).toBe(404);
  });

  it("rejects malformed, forged and expired tokens with 401", async () => {
    const token = await tokenFor(server, "viewer");
    const [h, p] = token.split(".");
    for (const bad of ["garbage", `${h}.${p}.AAAA`, token.slice(0, -2)]) {
      expect((await server.fetch("/api/v1/me", { headers: authHeaders(bad) })).status).toBe(401);
    }
    const short = await tokenFor(server, "viewer", { expiresIn: 1 });
    const realNow = server.ctx.now;
    server.ctx.now = () => new Date(Date.now() + 3600_000);
    try {
      expect((await server.fetch("/api/v1/me", { headers: authHeaders(short) })).status).toBe(401);
    } finally {
      server.ctx.now = realNow;
    }
  });

  it("a disabled user's token gets 401; reactivation restores it", async () => {
    const user = await createUser(server, { role: "viewer" });
    const token = await tokenFor(server, { id: user.id });
    const admin = await tokenFor(server, "admin");
    expect((await server.fetch("/api/v1/me", { headers: authHeaders(token) })).status).toBe(200);
    const off = await server.fetch(`/api/admin/users/${user.id}/deactivate`, {
      method: "POST",
      headers: authHeaders(admin),
    });
    expect(off.status).toBe(200);
    expect(((await off.json()) as { status: string }).status).toBe("disabled");
    expect((await server.fetch("/api/v1/me", { headers: authHeaders(token) })).status).toBe(401);
    await server.fetch(`/api/admin/users/${user.id}/reactivate`, {
      method: "POST",
      headers: authHeaders(admin),
    });
    expect((await server.fetch("/api/v1/me", { headers: authHeaders(token) })).status).toBe(200);
  });

  it("a role-profile change applies on the next request with the same token", async () => {
    const profile = await createRoleProfile(server, { baseRole: "viewer" });
    const user = await createUser(server, { role: "viewer", roleProfileId: profile.id });
    const token = await tokenFor(server, { id: user.id });
    const perms = async () =>
      (
        (await (await server.fetch("/api/v1/me", { headers: authHeaders(token) })).json()) as {
          permissions: string[];
        }
      ).permissions;
    expect(await perms()).toContain("devices.view");
    expect(await perms()).not.toContain("devices.create");
    const admin = await tokenFor(server, "admin");
    const patch = await server.fetch(`/api/admin/role-profiles/${profile.id}`, {
      method: "PATCH",
      headers: { ...authHeaders(admin), "content-type": "application/json" },
      body: JSON.stringify({ grant: ["devices.create"], revoke: ["devices.view"] }),
    });
    expect(patch.status).toBe(200);
    const now = await perms();
    expect(now).toContain("devices.create");
    expect(now).not.toContain("devices.view");
    // A role change applies the same way.
    await server.fetch(`/api/admin/users/${user.id}`, {
      method: "PATCH",
      headers: { ...authHeaders(admin), "content-type": "application/json" },
      body: JSON.stringify({ role: "admin", role_profile_id: null }),
    });
    const me = (await (await server.fetch("/api/v1/me", { headers: authHeaders(token) })).json()) as {
      role: string;
    };
    expect(me.role).toBe("admin");
    expect((await server.fetch("/api/admin/users", { headers: authHeaders(token) })).status).toBe(200);
  });

  it("API keys: created by admins (shown once, stored hashed), authenticate as their owner, revocable", async () => {
    const admin = await createUser(server, { role: "admin" });
    const adminToken = await tokenFor(server, { id: admin.id });
    const res = await server.fetch(
      "/api/admin/api-keys",
      json({ name: "onboarding" }, authHeaders(adminToken)),
    );
    expect(res.status).toBe(201);
    const k = (await res.json()) as { id: string; key: string; prefix: string };
    expect(k.key.startsWith(k.prefix)).toBe(true);
    const stored = await server.db.many("SELECT * FROM api_keys");
    expect(JSON.stringify(stored)).not.toContain(k.key);

    const me = await server.fetch("/api/v1/me", { headers: { "x-api-key": k.key } });
    expect(me.status).toBe(200);
    const body = (await me.json()) as { user: { id: string }; auth_method: string };
    expect(body.user.id).toBe(admin.id);
    expect(body.auth_method).toBe("api_key");

    const viewerToken = await tokenFor(server, "viewer");
    expect(
      (await server.fetch("/api/admin/api-keys", json({ name: "x" }, authHeaders(viewerToken)))).status,
    ).toBe(403);

    await server.fetch(`/api/admin/api-keys/${k.id}`, { method: "DELETE", headers: authHeaders(adminToken) });
    expect((await server.fetch("/api/v1/me", { headers: { "x-api-key": k.key } })).status).toBe(401);
    expect((await server.fetch("/api/v1/me", { headers: { "x-api-key": "nmk_unknown" } })).status).toBe(401);
  });
});

describe("control-plane credentials", () => {
  let server: TestServer;
  const probe: Feature = {
    name: "control-probe",
    routes(app) {
      app.get(
        "/api/v1/control-probe",
        { config: { access: { controlPlane: true }, rateLimit: "control" } },
        async (request) => ({ kind: request.actor?.kind, id: request.actor?.id }),
      );
      app.get(
        "/api/v1/control-or-permission",
        {
          config: {
            access: { controlPlane: true, permission: "infrastructure.manage" },
            rateLimit: "api_default",
          },
        },
        async (request) => ({ kind: request.actor?.kind }),
      );
    },
  };
  beforeAll(async () => {
    server = await startTestServer({
      features: [createAccessFeature(), probe],
      env: { NETMON_RATE_LIMIT_CONTROL: "3/60s" },
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("a gateway token is accepted on control-plane routes only, budgeted per credential", async () => {
    const gw = await issueControlPlaneToken(server.ctx, { kind: "gateway", name: "gw-1" });
    const res = await server.fetch("/api/v1/control-probe", { headers: authHeaders(gw.token) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ kind: "gateway", id: "gateway:gw-1" });
    expect(res.headers.get("x-ratelimit-limit")).toBe("3");
    await server.fetch("/api/v1/control-probe", { headers: authHeaders(gw.token) });
    await server.fetch("/api/v1/control-probe", { headers: authHeaders(gw.token) });
    expect((await server.fetch("/api/v1/control-probe", { headers: authHeaders(gw.token) })).status).toBe(
      429,
    );
    // Another credential has its own budget.
    const agent = await issueControlPlaneToken(server.ctx, { kind: "agent", name: "agent-1" });
    expect((await server.fetch("/api/v1/control-probe", { headers: authHeaders(agent.token) })).status).toBe(
      200,
    );
  });

  it("user routes refuse control-plane credentials; admins may call control-plane routes, others not", async () => {
    const gw = await issueControlPlaneToken(server.ctx, { kind: "gateway", name: "gw-2" });
    expect((await server.fetch("/api/v1/me", { headers: authHeaders(gw.token) })).status).toBe(403);
    expect(
      (await server.fetch("/api/v1/control-probe", { headers: authHeaders(await tokenFor(server, "admin")) }))
        .status,
    ).toBe(200);
    expect(
      (
        await server.fetch("/api/v1/control-probe", {
          headers: authHeaders(await tokenFor(server, "operator")),
        })
      ).status,
    ).toBe(403);
    expect((await server.fetch("/api/v1/control-probe")).status).toBe(401);
  });

  it("{controlPlane, permission}: a control-plane credential OR a user holding the permission", async () => {
    const agent = await issueControlPlaneToken(server.ctx, { kind: "agent", name: "agent-shared" });
    const byAgent = await server.fetch("/api/v1/control-or-permission", {
      headers: authHeaders(agent.token),
    });
    expect(byAgent.status).toBe(200);
    // The credential draws from its own control budget, not the per-IP api_default one.
    expect(byAgent.headers.get("x-ratelimit-limit")).toBe("3");
    const operator = await tokenFor(server, "operator");
    const byOperator = await server.fetch("/api/v1/control-or-permission", {
      headers: authHeaders(operator),
    });
    expect(byOperator.status).toBe(200);
    expect(byOperator.headers.get("x-ratelimit-limit")).toBe("600");
    const viewer = await tokenFor(server, "viewer");
    const byViewer = await server.fetch("/api/v1/control-or-permission", { headers: authHeaders(viewer) });
    expect(byViewer.status).toBe(403);
    expect(byViewer.headers.get("x-access-denied")).toBe("rule");
    expect((await server.fetch("/api/v1/control-or-permission")).status).toBe(401);
  });

  it("a revoked control-plane credential gets 401", async () => {
    const admin = await tokenFor(server, "admin");
    const created = await server.fetch(
      "/api/admin/control-credentials",
      json({ kind: "agent", name: "a-9" }, authHeaders(admin)),
    );
    expect(created.status).toBe(201);
    const c = (await created.json()) as { id: string; token: string };
    expect((await server.fetch("/api/v1/control-probe", { headers: authHeaders(c.token) })).status).toBe(200);
    await server.fetch(`/api/admin/control-credentials/${c.id}`, {
      method: "DELETE",
      headers: authHeaders(admin),
    });
    expect((await server.fetch("/api/v1/control-probe", { headers: authHeaders(c.token) })).status).toBe(401);
  });
});
