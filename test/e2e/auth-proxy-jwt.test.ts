/**
 * Gateway-proxy JWT sign-in (spec 5, issue 17) against a real JWKS server on loopback with key
 * rotation, tokens signed by real keys (RS256 and, through a static PEM, ES256), and forged,
 * expired, wrong-issuer, wrong-audience and unsigned tokens. Also the authentication settings
 * API, the local sign-in escape hatch and SERVICE_AUTH_FORCE_LOCAL_LOGIN.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  exportJWK,
  exportSPKI,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  SignJWT,
  UnsecuredJWT,
} from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

type Key = Awaited<ReturnType<typeof generateKeyPair>>;
const ISSUER = "https://gateway.example.test";
const AUDIENCE = "netmon";

let server: TestServer;
let admin: { authorization: string };
let jwksServer: http.Server;
let jwksUrl = "";
let published: JWK[] = [];
let jwksFetches = 0;
let key1: Key;
let key2: Key;

async function publicJwk(k: Key, kid: string): Promise<JWK> {
  return { ...(await exportJWK(k.publicKey)), kid, alg: "RS256", use: "sig" };
}

function sign(
  k: Key,
  kid: string,
  claims: JWTPayload,
  opts: { iss?: string; aud?: string; exp?: string | number } = {},
) {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "RS256", kid })
    .setIssuedAt()
    .setIssuer(opts.iss ?? ISSUER)
    .setAudience(opts.aud ?? AUDIENCE)
    .setExpirationTime(opts.exp ?? "5m")
    .sign(k.privateKey);
}

const person = (sub: string, email: string, name = "Pat Example") => ({ sub, profile: { email }, name });

const me = (token: string, extra: Record<string, string> = {}) =>
  server.fetch("/api/v1/me", { headers: { authorization: `Bearer ${token}`, ...extra } });

const putSettings = (body: unknown, headers = admin) =>
  server.fetch("/api/admin/auth-settings", {
    method: "PUT",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  key1 = await generateKeyPair("RS256", { extractable: true });
  key2 = await generateKeyPair("RS256", { extractable: true });
  published = [await publicJwk(key1, "k1")];
  jwksServer = http.createServer((_req, res) => {
    jwksFetches++;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ keys: published }));
  });
  await new Promise<void>((r) => jwksServer.listen(0, "127.0.0.1", r));
  jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/.well-known/jwks.json`;
  server = await startTestServer();
  admin = authHeaders(await tokenFor(server, "admin"));
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => jwksServer.close(() => r()));
});

describe("authentication settings API", () => {
  it("starts in password mode; only holders of settings.auth.manage read or change it", async () => {
    const r = await server.fetch("/api/admin/auth-settings", { headers: admin });
    expect(r.status).toBe(200);
    const s = (await r.json()) as Record<string, unknown>;
    expect(s.mode).toBe("password");
    expect(s.claim_mappings).toEqual({ email: "email", name: "name", sub: "sub" });
    const viewer = authHeaders(await tokenFor(server, "viewer"));
    expect((await server.fetch("/api/admin/auth-settings", { headers: viewer })).status).toBe(403);
    expect((await putSettings({ mode: "proxy_jwt" }, viewer)).status).toBe(403);
    expect((await server.fetch("/api/admin/auth-settings")).status).toBe(401);
  });

  it("refuses a mode whose settings do not validate, naming the member, and changes nothing", async () => {
    const cases: [unknown, string][] = [
      [{ mode: "proxy_jwt" }, "/proxy_jwt"],
      [{ mode: "proxy_jwt", proxy_jwt: { jwks_url: "http://127.0.0.1:1/jwks" } }, "/proxy_jwt/jwks_url"],
      [{ mode: "proxy_jwt", proxy_jwt: { jwks_url: "ftp://example.test/jwks" } }, "/proxy_jwt/jwks_url"],
      [{ mode: "proxy_jwt", proxy_jwt: { public_key_pem: "not a key" } }, "/proxy_jwt/public_key_pem"],
      [{ proxy_jwt: { header: "bad header" } }, "/proxy_jwt/header"],
      [{ claim_mappings: { email: "a..b" } }, "/claim_mappings/email"],
      [{ claim_mappings: { __proto__x: "x" } }, "/claim_mappings/__proto__x"],
      [{ mode: "sso" }, "/mode"],
      [{ mode: "saml" }, "/mode"],
    ];
    for (const [body, pointer] of cases) {
      const r = await putSettings(body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(JSON.stringify(await r.json()), JSON.stringify(body)).toContain(pointer.split("/")[1] as string);
    }
    expect((await putSettings({ mode: "proxy_jwt", surprise: 1 })).status).toBe(400);
    const s = (await (await server.fetch("/api/admin/auth-settings", { headers: admin })).json()) as {
      mode: string;
    };
    expect(s.mode).toBe("password");
  });

  it("enables the gateway proxy mode once its JWKS answers", async () => {
    const before = jwksFetches;
    const r = await putSettings({
      mode: "proxy_jwt",
      proxy_jwt: { jwks_url: jwksUrl, issuer: ISSUER, audience: AUDIENCE },
      claim_mappings: { email: "profile.email" },
    });
    expect(r.status).toBe(200);
    const s = (await r.json()) as { mode: string; proxy_jwt: Record<string, unknown> };
    expect(s.mode).toBe("proxy_jwt");
    expect(s.proxy_jwt).toMatchObject({
      jwks_url: jwksUrl,
      issuer: ISSUER,
      audience: AUDIENCE,
      header: "Authorization",
    });
    expect(jwksFetches).toBeGreaterThan(before);
  });
});

describe("gateway proxy JWT sign-in", () => {
  it("first sign-in provisions a viewer with sub as external id and starts a browser session", async () => {
    const r = await me(await sign(key1, "k1", person("idp|alice", "alice@corp.test", "Alice Liddell")));
    expect(r.status).toBe(200);
    const body = (await r.json()) as { user?: { email: string; role: string } } & Record<string, unknown>;
    expect(JSON.stringify(body)).toContain("alice@corp.test");
    const cookies = r.headers.getSetCookie();
    expect(cookies.some((c) => c.startsWith("netmon_session=") || c.includes("session"))).toBe(true);
    const row = await server.db.one<Record<string, unknown>>(
      sql`SELECT role, external_id, external_provider, last_auth_method, display_name, last_login_at
          FROM users WHERE email = 'alice@corp.test'`,
    );
    expect(row).toMatchObject({
      role: "viewer",
      external_id: "idp|alice",
      external_provider: "gateway",
      last_auth_method: "gateway",
      display_name: "Alice Liddell",
    });

    // The session alone carries on (the gateway injects the JWT on every request, but need not).
    const cookie = cookies.map((c) => c.split(";")[0]).join("; ");
    const again = await server.fetch("/api/v1/me", { headers: { cookie } });
    expect(again.status).toBe(200);
    expect(JSON.stringify(await again.json())).toContain("alice@corp.test");

    // A later sign-in updates last_login_at on the same account (no second user).
    await new Promise((res) => setTimeout(res, 20));
    expect((await me(await sign(key1, "k1", person("idp|alice", "alice@corp.test")))).status).toBe(200);
    const later = await server.db.many<{ last_login_at: Date }>(
      sql`SELECT last_login_at FROM users WHERE external_id = 'idp|alice'`,
    );
    expect(later).toHaveLength(1);
    expect((later[0] as { last_login_at: Date }).last_login_at.getTime()).toBeGreaterThan(
      (row as { last_login_at: Date }).last_login_at.getTime(),
    );
  });

  it("links an existing account by email instead of creating a second one", async () => {
    const existing = await createUser(server, { role: "operator", email: "bob@corp.test" });
    expect((await me(await sign(key1, "k1", person("idp|bob", "bob@corp.test")))).status).toBe(200);
    const row = await server.db.one<Record<string, unknown>>(
      sql`SELECT id, role, external_id FROM users WHERE email = 'bob@corp.test'`,
    );
    expect(row).toMatchObject({ id: existing.id, role: "operator", external_id: "idp|bob" });
  });

  it("refuses forged, expired, unsigned, wrong-issuer, wrong-audience and claim-less tokens", async () => {
    const claims = person("idp|mallory", "mallory@corp.test");
    const attacker = await generateKeyPair("RS256");
    const hmac = await new SignJWT(claims)
      .setProtectedHeader({ alg: "HS256" })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode("a-secret-the-attacker-chose-32-bytes!"));
    const tokens: Record<string, string> = {
      "signed by another key under a known kid": await sign(attacker, "k1", claims),
      expired: await sign(key1, "k1", claims, { exp: Math.floor(Date.now() / 1000) - 3600 }),
      "wrong issuer": await sign(key1, "k1", claims, { iss: "https://evil.example.test" }),
      "wrong audience": await sign(key1, "k1", claims, { aud: "someone-else" }),
      "alg none": new UnsecuredJWT(claims)
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime("5m")
        .encode(),
      HS256: hmac,
      "no email claim": await sign(key1, "k1", { sub: "idp|mallory" }),
      "no sub claim": await sign(key1, "k1", { profile: { email: "mallory@corp.test" } }),
      garbage: "not.a.jwt",
    };
    for (const [what, token] of Object.entries(tokens)) {
      const r = await me(token);
      expect(r.status, what).toBe(401);
      expect(
        r.headers.getSetCookie().filter((c) => !c.includes("Max-Age=0")),
        what,
      ).toEqual([]);
    }
    const made = await server.db.many(sql`SELECT id FROM users WHERE email = 'mallory@corp.test'`);
    expect(made).toEqual([]);
  });

  it("follows key rotation: a token signed by a newly published key is accepted", async () => {
    published = [await publicJwk(key2, "k2")];
    const token = await sign(key2, "k2", person("idp|carol", "carol@corp.test"));
    // The cached set lacks k2; it is refetched (at most every few seconds).
    await waitFor(async () => (await me(token)).status === 200, "the rotated key to be accepted", 30_000);
    // The retired key no longer signs anyone in once the set is refetched.
    expect((await me(await sign(key1, "k1", person("idp|alice", "alice@corp.test")))).status).toBe(401);
  });

  it("denies access without a verified JWT or session; netmon's own API tokens keep working", async () => {
    expect((await server.fetch("/api/v1/me")).status).toBe(401);
    expect((await server.fetch("/api/v1/me", { headers: admin })).status).toBe(200);
    const page = await server.fetch("/users/log-in");
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("gateway");
    expect(html).not.toContain('action="/users/log-in"');
  });

  it("refuses a disabled account", async () => {
    const token = await sign(key2, "k2", person("idp|dave", "dave@corp.test"));
    expect((await me(token)).status).toBe(200);
    const dave = await server.db.one<{ id: string }>(
      sql`SELECT id FROM users WHERE email = 'dave@corp.test'`,
    );
    const off = await server.fetch(`/api/admin/users/${dave?.id}/deactivate`, {
      method: "POST",
      headers: { ...admin, "content-type": "application/json" },
      body: "{}",
    });
    expect(off.status).toBe(200);
    expect((await me(await sign(key2, "k2", person("idp|dave", "dave@corp.test")))).status).toBe(401);
  });
});

describe("local sign-in in an SSO mode", () => {
  const signIn = (s: TestServer, path: string, email: string, password: string) =>
    s.fetch(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password }),
    });

  it("lets accounts with the admin toggle in through /auth/local, and no one else", async () => {
    const local = await server.fetch("/auth/local");
    expect(local.status).toBe(200);
    expect(await local.text()).toContain('action="/auth/local/sign-in"');

    const adminUser = await createUser(server, { role: "admin" });
    expect((await signIn(server, "/auth/local/sign-in", adminUser.email, adminUser.password)).status).toBe(
      200,
    );

    const viewer = await createUser(server, { role: "viewer" });
    await server.db.query(sql`UPDATE users SET local_login_enabled = false WHERE id = ${viewer.id}`);
    const refused = await signIn(server, "/auth/local/sign-in", viewer.email, viewer.password);
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: string }).error).toBe("local_login_disabled");
    expect((await signIn(server, "/users/log-in", viewer.email, viewer.password)).status).toBe(403);

    const on = await server.fetch(`/api/admin/users/${viewer.id}`, {
      method: "PATCH",
      headers: { ...admin, "content-type": "application/json" },
      body: JSON.stringify({ local_login_enabled: true }),
    });
    expect(on.status).toBe(200);
    expect((await signIn(server, "/auth/local/sign-in", viewer.email, viewer.password)).status).toBe(200);
  });

  it("SERVICE_AUTH_FORCE_LOCAL_LOGIN=true lets any account with a password in; a static PEM key verifies ES256", async () => {
    const forced = await startTestServer({ env: { SERVICE_AUTH_FORCE_LOCAL_LOGIN: "true" } });
    try {
      const es = await generateKeyPair("ES256", { extractable: true });
      const forcedAdmin = authHeaders(await tokenFor(forced, "admin"));
      const r = await forced.fetch("/api/admin/auth-settings", {
        method: "PUT",
        headers: { ...forcedAdmin, "content-type": "application/json" },
        body: JSON.stringify({
          mode: "proxy_jwt",
          proxy_jwt: { public_key_pem: await exportSPKI(es.publicKey), header: "X-Gateway-Assertion" },
        }),
      });
      expect(r.status).toBe(200);
      const token = await new SignJWT({ sub: "idp|erin", email: "erin@corp.test" })
        .setProtectedHeader({ alg: "ES256" })
        .setExpirationTime("5m")
        .sign(es.privateKey);
      const ok = await forced.fetch("/api/v1/me", { headers: { "x-gateway-assertion": token } });
      expect(ok.status).toBe(200);

      const viewer = await createUser(forced, { role: "viewer" });
      await forced.db.query(sql`UPDATE users SET local_login_enabled = false WHERE id = ${viewer.id}`);
      expect((await signIn(forced, "/auth/local/sign-in", viewer.email, viewer.password)).status).toBe(200);
      // Accounts the identity provider created have no password: nothing to force.
      expect(
        (await signIn(forced, "/auth/local/sign-in", "erin@corp.test", "anything-at-all-1")).status,
      ).toBe(401);
    } finally {
      await forced.stop();
    }
  });
});
