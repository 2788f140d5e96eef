/**
 * OIDC sign-in (spec 5, issue 17) against a real, certified OpenID Provider on loopback
 * (`oidc-provider`): the authorization code flow with PKCE, state and nonce, ID token
 * validation, claim mappings, just-in-time provisioning as viewer, later sign-ins, disabled
 * accounts, replayed and forged callbacks, and the settings API's validation of the mode.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import Provider from "oidc-provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { freeTcpUdpPort } from "../helpers/ports.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

let server: TestServer;
let admin: { authorization: string };
let idp: http.Server;
let issuer = "";
/** Who the provider signs in at its next interaction (the test's stand-in for a login form). */
let nextAccount = "alice";
const CLIENT_SECRET = "a-long-client-secret-for-the-test-relying-party";
const people: Record<string, Record<string, unknown>> = {
  alice: { email: "alice@idp.test", email_verified: true, name: "Alice Liddell" },
  bob: { email: "bob@idp.test", email_verified: true, name: "Bob" },
  noemail: { name: "No Mail" },
};

/** A cookie jar per origin, for walking redirects by hand. */
class Browser {
  cookies = new Map<string, Map<string, string>>();
  header(url: URL): string {
    return [...(this.cookies.get(url.host) ?? new Map()).entries()].map(([k, v]) => `${k}=${v}`).join("; ");
  }
  keep(url: URL, res: Response): void {
    const jar = this.cookies.get(url.host) ?? new Map<string, string>();
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const i = (pair as string).indexOf("=");
      jar.set((pair as string).slice(0, i), (pair as string).slice(i + 1));
    }
    this.cookies.set(url.host, jar);
  }
  async get(url: string): Promise<Response> {
    const u = new URL(url);
    const res = await fetch(u, { redirect: "manual", headers: { cookie: this.header(u) } });
    this.keep(u, res);
    return res;
  }
  /** Follow redirects until one leaves for `stopAt` (not followed) or a non-redirect answers. */
  async follow(url: string, stopAt: string): Promise<{ url: string; res: Response | null }> {
    let current = url;
    for (let i = 0; i < 20; i++) {
      if (current.startsWith(stopAt)) return { url: current, res: null };
      const res = await this.get(current);
      const loc = res.headers.get("location");
      if (res.status < 300 || res.status >= 400 || !loc) return { url: current, res };
      current = new URL(loc, current).toString();
    }
    throw new Error("too many redirects");
  }
}

async function signInThroughIdp(account: string, returnTo = "/devices") {
  nextAccount = account;
  const b = new Browser();
  const start = await b.get(`${server.url}/auth/oidc/login?return_to=${encodeURIComponent(returnTo)}`);
  expect(start.status).toBe(302);
  const toIdp = start.headers.get("location") as string;
  expect(toIdp.startsWith(issuer)).toBe(true);
  const auth = new URL(toIdp).searchParams;
  expect(auth.get("code_challenge_method")).toBe("S256");
  expect(auth.get("state")).toBeTruthy();
  expect(auth.get("nonce")).toBeTruthy();
  expect(auth.get("redirect_uri")).toBe(`${server.url}/auth/oidc/callback`);
  const back = await b.follow(toIdp, `${server.url}/auth/oidc/callback`);
  expect(back.url.startsWith(`${server.url}/auth/oidc/callback?`)).toBe(true);
  const done = await b.get(back.url);
  return { browser: b, callbackUrl: back.url, done };
}

const putSettings = (body: unknown) =>
  server.fetch("/api/admin/auth-settings", {
    method: "PUT",
    headers: { ...admin, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  // The redirect URI is built from NETMON_BASE_URL, so the server's address is fixed up front.
  const port = await freeTcpUdpPort();
  server = await startTestServer({
    env: { PORT: String(port), NETMON_BASE_URL: `http://127.0.0.1:${port}` },
  });
  admin = authHeaders(await tokenFor(server, "admin"));
  idp = http.createServer();
  await new Promise<void>((r) => idp.listen(0, "127.0.0.1", r));
  issuer = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: "netmon",
        client_secret: CLIENT_SECRET,
        redirect_uris: [`${server.url}/auth/oidc/callback`],
        response_types: ["code"],
        grant_types: ["authorization_code"],
      },
    ],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    pkce: { required: () => true },
    findAccount: async (_ctx: unknown, id: string) => ({
      accountId: id,
      claims: async () => ({ sub: id, ...(people[id] ?? {}) }),
    }),
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
  });
  const handler = provider.callback();
  idp.on("request", (req, res) => {
    if (req.url?.startsWith("/interaction/")) {
      // The test's login form: sign `nextAccount` in and grant what was asked.
      (async () => {
        const details = await provider.interactionDetails(req, res);
        const accountId = nextAccount;
        const grant = new provider.Grant({ accountId, clientId: "netmon" });
        grant.addOIDCScope(String(details.params.scope ?? "openid"));
        const grantId = await grant.save();
        await provider.interactionFinished(
          req,
          res,
          { login: { accountId }, consent: { grantId } },
          { mergeWithLastSubmission: false },
        );
      })().catch((err) => {
        res.statusCode = 500;
        res.end(String(err));
      });
      return;
    }
    handler(req, res);
  });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => idp.close(() => r()));
});

describe("OIDC settings", () => {
  it("is refused until discovery works and the client is complete; the secret is write-only", async () => {
    for (const [body, pointer] of [
      [{ mode: "oidc" }, "oidc"],
      [
        {
          mode: "oidc",
          oidc: { discovery_url: "http://idp.example.test/x", client_id: "a", client_secret: "b" },
        },
        "discovery_url",
      ],
      [
        {
          mode: "oidc",
          oidc: { discovery_url: `${issuer}/nothing-here`, client_id: "a", client_secret: "b" },
        },
        "discovery_url",
      ],
      [{ oidc: { scopes: "email profile" } }, "scopes"],
      [{ oidc: { surprise: 1 } }, "surprise"],
    ] as const) {
      const r = await putSettings(body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(JSON.stringify(await r.json())).toContain(pointer);
    }
    const ok = await putSettings({
      mode: "oidc",
      oidc: {
        discovery_url: `${issuer}/.well-known/openid-configuration`,
        client_id: "netmon",
        client_secret: CLIENT_SECRET,
      },
    });
    expect(ok.status).toBe(200);
    const s = (await ok.json()) as { mode: string; oidc: Record<string, unknown> };
    expect(s.mode).toBe("oidc");
    expect(s.oidc.client_secret).toEqual({ set: true });
    expect(s.oidc.redirect_uri).toBe(`${server.url}/auth/oidc/callback`);
    expect(JSON.stringify(s)).not.toContain(CLIENT_SECRET);
    const stored = await server.db.one<{ oidc_client_secret_sealed: string }>(
      sql`SELECT oidc_client_secret_sealed FROM auth_settings`,
    );
    expect(stored?.oidc_client_secret_sealed).not.toContain(CLIENT_SECRET);
    // Sending the marker back keeps the stored secret.
    const again = await putSettings({
      oidc: { client_secret: { set: true }, scopes: "openid email profile" },
    });
    expect(again.status).toBe(200);
  });
});

describe("OIDC sign-in", () => {
  it("the sign-in page offers single sign-on", async () => {
    const html = await (await server.fetch("/users/log-in")).text();
    expect(html).toContain("/auth/oidc/login");
  });

  it("first sign-in provisions a viewer with sub as external id; the session works; later sign-ins update it", async () => {
    const { browser, done } = await signInThroughIdp("alice", "/devices");
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe("/devices");
    const me = await browser.get(`${server.url}/api/v1/me`);
    expect(me.status).toBe(200);
    expect(JSON.stringify(await me.json())).toContain("alice@idp.test");
    const row = await server.db.one<Record<string, unknown>>(
      sql`SELECT role, external_id, external_provider, last_auth_method, display_name, last_login_at FROM users WHERE email = 'alice@idp.test'`,
    );
    expect(row).toMatchObject({
      role: "viewer",
      external_id: "alice",
      external_provider: "oidc",
      last_auth_method: "oidc",
      display_name: "Alice Liddell",
    });
    await new Promise((r) => setTimeout(r, 20));
    const second = await signInThroughIdp("alice");
    expect(second.done.status).toBe(303);
    const later = await server.db.many<{ last_login_at: Date }>(
      sql`SELECT last_login_at FROM users WHERE external_provider = 'oidc' AND external_id = 'alice'`,
    );
    expect(later).toHaveLength(1);
    expect((later[0] as { last_login_at: Date }).last_login_at.getTime()).toBeGreaterThan(
      (row as { last_login_at: Date }).last_login_at.getTime(),
    );
  });

  it("a replayed callback, a forged state and a missing email are refused without a session", async () => {
    const first = await signInThroughIdp("bob");
    expect(first.done.status).toBe(303);
    const replay = await new Browser().get(first.callbackUrl);
    expect(replay.status).toBe(401);
    expect(replay.headers.getSetCookie().filter((c) => c.startsWith("netmon_session="))).toEqual([]);

    const forged = new URL(first.callbackUrl);
    forged.searchParams.set("state", "made-up-state");
    expect((await new Browser().get(forged.toString())).status).toBe(401);

    const noMail = await signInThroughIdp("noemail");
    expect(noMail.done.status).toBe(401);
    expect(await noMail.done.text()).toContain("email");
  });

  it("a disabled account is refused", async () => {
    await server.db.query(sql`UPDATE users SET status = 'disabled' WHERE email = 'bob@idp.test'`);
    const { done } = await signInThroughIdp("bob");
    expect(done.status).toBe(403);
    expect(done.headers.getSetCookie().filter((c) => c.startsWith("netmon_session="))).toEqual([]);
  });
});
