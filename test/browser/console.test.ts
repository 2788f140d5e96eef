import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_DIR } from "../../src/http/routes/console.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { launchChromium, screenshot, seriousA11yViolations } from "./browser.ts";

/**
 * The operator console in real Chromium against a real server (embedded agent on), doing an
 * operator's first hour: sign in, watch the host, add a device, monitor a web service, handle
 * its alert, query, mint an API token, sign out.
 */
const EMAIL = "admin@localhost";
const PASSWORD = "console-test-password-1";

let server: TestServer;
let browser: Browser;
let target: http.Server;
let targetPort = 0;
let healthy = true;
let hookHits = 0;
/** Uncaught exceptions in any page; asserted empty after each test. */
const pageErrors: string[] = [];

/** Error banners the page shows (an API call of the page failed). */
async function shownErrors(page: Page): Promise<string[]> {
  return page.locator("main p.error, main div.error").allInnerTexts();
}

function waitText(page: Page, text: string | RegExp, timeout = 20_000) {
  return page.getByText(text).first().waitFor({ timeout });
}

async function signIn(context: BrowserContext, returnTo = "/"): Promise<Page> {
  const page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(`${page.url()}: ${e.message}`));
  await page.goto(`${server.url}${returnTo}`);
  // No session: the console sends us to the sign-in page and remembers where we were going.
  expect(new URL(page.url()).pathname).toBe("/users/log-in");
  await page.fill("#email", EMAIL);
  await page.fill("#password", PASSWORD);
  await page.click("button[type=submit]");
  await page.waitForURL((u) => u.pathname === returnTo.split("?")[0]);
  return page;
}

beforeAll(async () => {
  if (!fs.existsSync(path.join(CONSOLE_DIR, "index.html"))) {
    throw new Error(`the console is not built (${CONSOLE_DIR}); npm ci builds it, or run npm run build:web`);
  }
  target = http.createServer((req, res) => {
    if (req.url === "/hook") hookHits++;
    res.writeHead(healthy ? 200 : 503, { "content-type": "text/plain" }).end(healthy ? "ok" : "down");
  });
  await new Promise<void>((r) => target.listen(0, "127.0.0.1", r));
  targetPort = (target.address() as { port: number }).port;
  server = await startTestServer({
    env: {
      NETMON_EMBEDDED_AGENT: "true",
      SERVICE_ADMIN_PASSWORD: PASSWORD,
      NETMON_HOST_METRICS_INTERVAL: "2s",
    },
  });
  browser = await launchChromium();
});

afterEach(() => {
  const errors = pageErrors.splice(0);
  expect(errors).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await new Promise((r) => target?.close(r));
});

describe("operator console (Chromium)", () => {
  it("serves the console only to a session, with strict security headers and no inline script", async () => {
    const anon = await fetch(`${server.url}/devices?search=x`, { redirect: "manual" });
    expect(anon.status).toBe(303);
    expect(anon.headers.get("location")).toBe(
      `/users/log-in?return_to=${encodeURIComponent("/devices?search=x")}`,
    );
    const signIn = await fetch(`${server.url}/users/log-in`);
    const csp = signIn.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(signIn.headers.get("x-content-type-options")).toBe("nosniff");
    expect(signIn.headers.get("referrer-policy")).toBeTruthy();
    const index = fs.readFileSync(path.join(CONSOLE_DIR, "index.html"), "utf8");
    expect(index).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    // API paths keep their JSON 404: the console answers only its own paths.
    const api404 = await fetch(`${server.url}/api/nope`);
    expect(api404.status).toBe(404);
    expect(api404.headers.get("content-type")).toContain("application/json");
  });

  it("walks an operator through the product", { timeout: 180_000 }, async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn(context, "/");

    // Overview: the local host, live, within 10 s of a fresh start.
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    await waitText(page, /GiB of .* used/, 10_000);
    await page
      .locator("section[aria-label='Disks'] tbody tr td", { hasText: "/" })
      .first()
      .waitFor({ timeout: 10_000 });
    await page.locator("section[aria-label='Gateways']").getByText("healthy").waitFor();

    // Devices: add one, then find it by search; the URL carries the filter.
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Devices" }).click();
    await page.getByText("Add device").click();
    await page.fill("input[name=ip]", "192.0.2.77");
    await page.fill("input[name=hostname]", "edge-router-77");
    await page.getByRole("button", { name: "Add", exact: true }).click();
    await waitText(page, "edge-router-77");
    await page.goto(`${server.url}/devices`);
    await page.fill("#device-search", "router-77");
    await page.getByRole("button", { name: "Search" }).click();
    await page.waitForURL(/search=router-77/);
    await expect.poll(() => page.locator("tbody tr").count()).toBe(1);
    await page.getByRole("link", { name: "edge-router-77" }).click();
    await page.getByRole("heading", { name: "edge-router-77" }).waitFor();
    await waitText(page, "192.0.2.77");
    await page.waitForLoadState("networkidle");
    expect(await shownErrors(page)).toEqual([]);

    // Monitoring profile: a new group whose devices get a ping check; moving the device into
    // the group monitors it with no further step.
    const deviceUrl = page.url();
    await page.goto(`${server.url}/checks/profiles`);
    await page.getByRole("button", { name: "New profile" }).click();
    await page.fill("#f-name", "edge basics");
    await page.fill("#f-new_group", "edge routers");
    await page.getByLabel("Check 1 name").fill("edge ping");
    await page.getByRole("button", { name: "Create profile" }).click();
    await page.getByRole("cell", { name: "edge basics" }).waitFor();
    expect(await shownErrors(page)).toEqual([]);
    await page.goto(deviceUrl);
    await page.getByLabel("Device group").selectOption({ label: "edge routers" });
    await page.getByRole("link", { name: "edge ping" }).waitFor({ timeout: 30_000 });
    expect(await shownErrors(page)).toEqual([]);

    // Checks: an HTTP check against a loopback server; its first result; then break the target.
    await page.goto(`${server.url}/checks/new`);
    await page.fill("#f-name", "web front");
    await page.fill("#f-target", `http://127.0.0.1:${targetPort}/`);
    await page.fill("#f-interval_seconds", "1");
    await page.fill("#f-timeout_seconds", "2");
    await page.getByRole("button", { name: "Create check" }).click();
    await page.waitForURL(/\/checks\/[0-9a-f-]{36}$/);
    await page.getByRole("heading", { name: "web front" }).waitFor();
    await page.locator(".page-head .badge", { hasText: "success" }).waitFor({ timeout: 30_000 });
    healthy = false;
    await page.locator(".page-head .badge", { hasText: "critical" }).waitFor({ timeout: 30_000 });

    // Alerts: the failing check raised one; acknowledge, then resolve it with a note.
    await page.goto(`${server.url}/alerts`);
    const alertLink = page.getByRole("link", { name: /web front is failing/ });
    await alertLink.waitFor({ timeout: 30_000 });
    await alertLink.click();
    // Silence alerts like this one for an hour; the silence is listed with its reason.
    await page.getByRole("button", { name: "Silence for 1 hour" }).click();
    await waitText(page, /Silenced for an hour/);
    await page.fill("#alert-note", "looking into it");
    await page.getByRole("button", { name: "Acknowledge" }).click();
    await waitText(page, /Acknowledged.*by/);
    // Resolved by hand while the check still fails (it stays quiet until the check recovers,
    // decision 0600); the target comes back only afterwards, so the check's own recovery cannot
    // resolve the alert first on a slow machine.
    await page.fill("#alert-note", "restarted the web server");
    await page.getByRole("button", { name: "Resolve" }).click();
    await waitText(page, /restarted the web server/);
    await page.locator(".page-head .badge", { hasText: "resolved" }).waitFor();
    healthy = true;
    expect(await shownErrors(page)).toEqual([]);
    await page.goto(`${server.url}/alerts?view=resolved`);
    await page.getByRole("link", { name: /web front is failing/ }).waitFor();
    expect(await shownErrors(page)).toEqual([]);
    await page.goto(`${server.url}/alerts?view=silences`);
    await page.getByRole("cell", { name: /silenced from alert/ }).waitFor();
    await page.getByRole("button", { name: "End now" }).click();
    await page.getByRole("cell", { name: "expired" }).waitFor();

    // Notifications: a webhook channel made in the console, test-sent from it.
    await page.goto(`${server.url}/rules?tab=channels`);
    await page.getByText("New channel").click();
    await page.fill("#f-name", "loopback hook");
    await page.fill("input[name=url]", `http://127.0.0.1:${targetPort}/hook`);
    await page.getByRole("button", { name: "Create channel" }).click();
    await page.getByRole("cell", { name: "loopback hook" }).waitFor();
    await page.getByRole("button", { name: "Send test" }).click();
    await waitText(page, "delivered (200)");
    expect(hookHits).toBeGreaterThan(0);

    // Query: run a query and page through it.
    await page.goto(`${server.url}/query`);
    await page.fill("#srql", "in:cpu_metrics sort:timestamp:desc limit:2");
    await page.getByRole("button", { name: "Run" }).click();
    await page.waitForURL(/q=in%3Acpu_metrics/);
    await expect.poll(() => page.locator("table tbody tr").count()).toBe(2);
    const first = await page.locator("table tbody tr").first().innerText();
    await page.getByRole("button", { name: "Next →" }).click();
    await expect.poll(async () => page.locator("table tbody tr").first().innerText()).not.toBe(first);
    // A bad query shows the error and where it is.
    await page.fill("#srql", "in:nonsense");
    await page.getByRole("button", { name: "Run" }).click();
    await page.locator("#srql-error mark").waitFor();

    // API token: created once, shown once, and it works with fetch.
    await page.goto(`${server.url}/settings/api-credentials`);
    await page.fill("#f-name", "ci script");
    await page.getByRole("button", { name: "Create token" }).click();
    const token = await page.locator("#new-token").inputValue();
    expect(token.length).toBeGreaterThan(20);
    const me = await page.evaluate(async (t) => {
      const r = await fetch("/api/v1/me", { headers: { authorization: `Bearer ${t}` }, credentials: "omit" });
      return { status: r.status, body: (await r.json()) as { auth_method?: string } };
    }, token);
    expect(me.status).toBe(200);
    expect(me.body.auth_method).toBe("api_token");
    await waitText(page, "ci script");

    // Session expiry mid-session: the next API call answers 401, the console goes to sign-in
    // and, after signing in again, back to the same view.
    await page.goto(`${server.url}/fleet`);
    await page.getByRole("heading", { name: "Gateways and agents" }).waitFor();
    const session = (await context.cookies()).find((c) => c.name === "netmon_session");
    expect(session).toBeDefined();
    await context.clearCookies({ name: "netmon_session" });
    // The next API call answers 401: the Checks view's, or — on a loaded machine — the Fleet
    // page's own refresh if it fires first (then the click finds the sign-in page instead).
    await page
      .getByRole("navigation", { name: "Main" })
      .getByRole("link", { name: "Checks" })
      .click({ timeout: 5_000 })
      .catch(() => undefined);
    await page.waitForURL(/\/users\/log-in\?return_to=%2F(checks|fleet)/);
    const back = new URL(page.url()).searchParams.get("return_to") as string;
    await page.fill("#email", EMAIL);
    await page.fill("#password", PASSWORD);
    await page.click("button[type=submit]");
    await page.waitForURL((u) => u.pathname === back);
    await page
      .getByRole("heading", { name: back === "/checks" ? "Checks" : "Gateways and agents" })
      .waitFor();

    // Sign out: the session is gone and the console sends us back to sign in.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/\/users\/log-in/);
    await page.goto(`${server.url}/checks`);
    expect(new URL(page.url()).pathname).toBe("/users/log-in");
    await context.close();
  });

  it("every main page: screenshots in both themes, no serious axe findings, desktop and phone", {
    timeout: 240_000,
  }, async () => {
    const pages = [
      "/alerts?view=resolved",
      "/alerts?view=silences",
      "/rules?tab=channels",
      "/rules?tab=routes",
      "/",
      "/devices",
      "/checks",
      "/checks/profiles",
      "/alerts",
      "/query?q=in%3Adevices",
      "/fleet",
      "/rules",
      "/settings",
      "/settings/api-credentials",
      "/dashboards",
    ];
    const findings: string[] = [];
    for (const viewport of [
      { width: 1280, height: 800 },
      { width: 390, height: 844 },
    ]) {
      for (const theme of ["light", "dark"] as const) {
        const context = await browser.newContext({ viewport, colorScheme: theme });
        const page = await signIn(context, "/");
        for (const p of pages) {
          await page.goto(`${server.url}${p}`);
          await page.locator("main h1").first().waitFor();
          await page.waitForLoadState("networkidle");
          expect(await page.evaluate("document.documentElement.dataset.theme")).toBe(theme);
          expect(await shownErrors(page), `${p}: the page shows an error`).toEqual([]);
          // Nothing wider than the viewport (tables scroll inside their own box).
          const overflow = Number(
            await page.evaluate("document.documentElement.scrollWidth - window.innerWidth"),
          );
          expect(overflow, `${p} at ${viewport.width}px overflows by ${overflow}px`).toBeLessThanOrEqual(1);
          const name = `${p.replace(/\?.*/, "").replace(/\W+/g, "-").replace(/^-|-$/g, "") || "overview"}-${theme}-${viewport.width}`;
          await screenshot(page, name);
          for (const v of await seriousA11yViolations(page)) {
            findings.push(
              `${p} ${theme} ${viewport.width}px: ${v.id} (${v.impact}) ${v.help} ${JSON.stringify(v.nodes)}`,
            );
          }
        }
        await context.close();
      }
    }
    expect(findings).toEqual([]);
  });
});
