/**
 * Settings → Authentication and limited API tokens in real Chromium (issue 17): an admin turns
 * the gateway proxy mode on from the console (a JWKS that does not answer is refused with the
 * reason shown; one that answers is accepted), then back to passwords; and mints a token limited
 * to one permission, seeing what it can do.
 */
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { exportJWK, generateKeyPair } from "jose";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_DIR } from "../../src/http/routes/console.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { launchChromium, screenshot, seriousA11yViolations } from "./browser.ts";

const EMAIL = "admin@localhost";
const PASSWORD = "auth-settings-test-password-1";
let server: TestServer;
let browser: Browser;
let jwks: http.Server;
let jwksUrl = "";
const pageErrors: string[] = [];

async function signIn(): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  page.on("pageerror", (e) => pageErrors.push(e.message));
  await page.goto(`${server.url}/users/log-in`);
  await page.fill("#email", EMAIL);
  await page.fill("#password", PASSWORD);
  await page.click("button[type=submit]");
  await page.waitForURL((u) => u.pathname === "/");
  return page;
}

beforeAll(async () => {
  if (!fs.existsSync(path.join(CONSOLE_DIR, "index.html"))) {
    throw new Error(`the console is not built (${CONSOLE_DIR}); npm ci builds it, or run npm run build:web`);
  }
  const key = await generateKeyPair("RS256", { extractable: true });
  const jwk = { ...(await exportJWK(key.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  jwks = http.createServer((_req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((r) => jwks.listen(0, "127.0.0.1", r));
  jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
  server = await startTestServer({ env: { SERVICE_ADMIN_PASSWORD: PASSWORD } });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await new Promise<void>((r) => jwks.close(() => r()));
});

describe("Settings → Authentication (Chromium)", () => {
  it("switches to the gateway proxy mode only when its JWKS answers, and back", {
    timeout: 90_000,
  }, async () => {
    const page = await signIn();
    await page.goto(`${server.url}/settings`);
    await page.getByRole("link", { name: "Authentication" }).click();
    await page.waitForURL((u) => u.pathname === "/settings/authentication");
    await page.locator("#f-mode").waitFor();
    expect(await page.locator("#f-mode").inputValue()).toBe("password");
    expect(await seriousA11yViolations(page)).toEqual([]);

    await page.selectOption("#f-mode", "proxy_jwt");
    await page.fill("#f-jwks_url", "http://127.0.0.1:1/jwks.json");
    await page.click("button[type=submit]");
    await page
      .getByText(/jwks_url could not be used/)
      .first()
      .waitFor({ timeout: 20_000 });

    await page.fill("#f-jwks_url", jwksUrl);
    await page.fill("#f-issuer", "https://gateway.example.test");
    await page.fill("#f-claim_email", "profile.email");
    await page.click("button[type=submit]");
    await page.getByText(/Saved\. Sign-in now uses: Gateway proxy/).waitFor({ timeout: 20_000 });
    await page.mouse.move(0, 0); // not hovering the button axe measures
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "settings-authentication-proxy");

    const stored = (await page.evaluate(async () => (await fetch("/api/admin/auth-settings")).json())) as {
      mode: string;
      proxy_jwt: { jwks_url: string; issuer: string };
      claim_mappings: { email: string };
    };
    expect(stored.mode).toBe("proxy_jwt");
    expect(stored.proxy_jwt).toMatchObject({ jwks_url: jwksUrl, issuer: "https://gateway.example.test" });
    expect(stored.claim_mappings.email).toBe("profile.email");

    // The admin's session still works (admins keep local sign-in), and passwords come back.
    await page.selectOption("#f-mode", "password");
    await page.click("button[type=submit]");
    await page.getByText(/Sign-in now uses: Password only/).waitFor({ timeout: 20_000 });
    expect(pageErrors).toEqual([]);
  });

  it("mints a token limited to one permission and shows what it can do", { timeout: 90_000 }, async () => {
    const page = await signIn();
    await page.goto(`${server.url}/settings/api-credentials`);
    await page.fill("#f-name", "inventory reader");
    await page.fill("#f-permissions", "devices.view");
    await page.click("button[type=submit]");
    await page.getByText(/Token “inventory reader” created/).waitFor({ timeout: 20_000 });
    const token = await page.locator("#new-token").inputValue();
    const me = await fetch(`${server.url}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(((await me.json()) as { permissions: string[] }).permissions).toEqual(["devices.view"]);
    const row = page.locator("tr", { hasText: "inventory reader" });
    await row.waitFor({ timeout: 20_000 });
    expect(await row.innerText()).toContain("devices.view");
    await page.mouse.move(0, 0);
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
