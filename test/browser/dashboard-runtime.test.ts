import fs from "node:fs";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_DIR } from "../../src/http/routes/console.ts";
import { seedAll } from "../e2e/srql-seed.ts";
import { authHeaders, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { launchChromium, screenshot } from "./browser.ts";

/**
 * The dashboard runtime in real Chromium: the example package is published over the API,
 * verified and enabled, then opened at /dashboards/<slug>, where the console hash-checks and
 * imports its renderer, feeds it an Arrow IPC frame and pages it with srql.page. Disabling it
 * takes the renderer away (404).
 */
const EMAIL = "admin@localhost";
const PASSWORD = "dashboard-runtime-password-1";
const SLUG = "device-availability";
const EXAMPLE = path.resolve(import.meta.dirname, "../../examples/dashboards/device-availability");

let server: TestServer;
let browser: Browser;
let publisher: string;
let packageId: string;
const pageErrors: string[] = [];

async function signIn(returnTo: string): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(`${page.url()}: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") pageErrors.push(`console: ${m.text()}`);
  });
  await page.goto(`${server.url}${returnTo}`);
  expect(new URL(page.url()).pathname).toBe("/users/log-in");
  await page.fill("#email", EMAIL);
  await page.fill("#password", PASSWORD);
  await page.click("button[type=submit]");
  await page.waitForURL((u) => u.pathname === returnTo);
  return page;
}

async function api(method: string, url: string, body?: unknown) {
  const res = await server.fetch(url, {
    method,
    headers: {
      ...authHeaders(publisher),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  if (!fs.existsSync(path.join(CONSOLE_DIR, "index.html"))) {
    throw new Error(`the console is not built (${CONSOLE_DIR}); npm ci builds it, or run npm run build:web`);
  }
  server = await startTestServer({ env: { SERVICE_ADMIN_PASSWORD: PASSWORD } });
  await seedAll(server.db);
  const admin = await createUser(server, { role: "admin" });
  publisher = await tokenFor(server, { id: admin.id });
  browser = await launchChromium();

  const form = new FormData();
  form.append(
    "manifest",
    new Blob([fs.readFileSync(path.join(EXAMPLE, "manifest.json"))], { type: "application/json" }),
    "manifest.json",
  );
  form.append(
    "renderer",
    new Blob([fs.readFileSync(path.join(EXAMPLE, "renderer.js"))], { type: "text/javascript" }),
    "renderer.js",
  );
  form.append("route", SLUG);
  const res = await server.fetch("/api/v1/dashboard-packages", {
    method: "POST",
    headers: authHeaders(publisher),
    body: form,
  });
  const published = (await res.json()) as Record<string, unknown>;
  expect(res.status, JSON.stringify(published)).toBe(200);
  expect(published).toMatchObject({ status: "staged", result: "written", verification_status: "pending" });
  packageId = published.id as string;
  // Unsigned: an administrator vouches for it before it can be enabled.
  expect((await api("POST", `/api/v1/dashboard-packages/${packageId}/enable`)).body.error).toBe(
    "verification_required",
  );
  expect((await api("POST", `/api/v1/dashboard-packages/${packageId}/verify`)).status).toBe(200);
  expect((await api("POST", `/api/v1/dashboard-packages/${packageId}/enable`)).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe("dashboard runtime (Chromium)", () => {
  it("lists the package, renders its Arrow frame, pages it with srql.page, and loses it when disabled", async () => {
    const page = await signIn("/dashboards");
    const arrowResponses: string[] = [];
    page.on("response", (r) => {
      if (r.url().includes(`/api/v1/dashboard-packages/${packageId}/frames/availability`)) {
        arrowResponses.push(`${r.status()} ${r.headers()["content-type"]}`);
      }
    });

    await page.getByRole("link", { name: "Device availability" }).click();
    await page.waitForURL((u) => u.pathname === `/dashboards/${SLUG}`);
    const status = page.locator("[data-role=status]");
    await expect
      .poll(() => status.textContent(), { timeout: 20_000 })
      .toBe("3 devices on this page: 2 available, 1 unavailable");
    // The bars are drawn from the Arrow column is_available.
    expect(await page.locator("rect[data-series=available]").getAttribute("data-value")).toBe("2");
    expect(await page.locator("rect[data-series=unavailable]").getAttribute("data-value")).toBe("1");
    expect(await page.locator("[data-role=hosts]").textContent()).toBe(
      "Hosts: cam-garage, cam-lobby, core-sw1",
    );
    expect(arrowResponses).toEqual(["200 application/vnd.apache.arrow.stream"]);
    await screenshot(page, "dashboard-runtime-page1");

    await page.getByRole("button", { name: "Next page" }).click();
    const hosts = page.locator("[data-role=hosts]");
    await expect.poll(() => hosts.textContent(), { timeout: 20_000 }).not.toContain("cam-garage");
    const second = (await hosts.textContent()) ?? "";
    expect(second).toContain("edge-rtr");
    expect(second).not.toContain("core-sw1");
    expect(arrowResponses).toHaveLength(2);

    // frames:refresh forgets the cursor: back to the first page.
    await page.getByRole("button", { name: "First page" }).click();
    await expect
      .poll(() => hosts.textContent(), { timeout: 20_000 })
      .toBe("Hosts: cam-garage, cam-lobby, core-sw1");

    // Leaving the page destroys the dashboard.
    await page.getByRole("link", { name: "all dashboards" }).click();
    await page.waitForURL((u) => u.pathname === "/dashboards");
    expect(await page.locator(".device-availability").count()).toBe(0);

    const renderer = `${server.url}/api/v1/dashboard-packages/${packageId}/renderer`;
    expect((await page.request.get(renderer)).status()).toBe(200);
    expect((await api("POST", `/api/v1/dashboard-packages/${packageId}/disable`)).status).toBe(200);
    const gone = await page.request.get(renderer);
    expect(gone.status()).toBe(404);

    pageErrors.length = 0; // the 404s below are the point
    await page.goto(`${server.url}/dashboards/${SLUG}`);
    await page.getByText(`no dashboard is installed at ${SLUG}`).waitFor({ timeout: 20_000 });
    expect(await page.locator(".device-availability").count()).toBe(0);
    await page.context().close();
  }, 120_000);

  it("refuses to run renderer bytes that do not match the published content hash", async () => {
    // Re-enable, then change the stored bytes behind the server's back.
    expect((await api("POST", `/api/v1/dashboard-packages/${packageId}/enable`)).status).toBe(200);
    const row = await server.db.one<{ renderer_path: string }>(
      "SELECT renderer_path FROM dashboard_packages WHERE id = $1",
      [packageId],
    );
    const file = path.join(server.dataDir, "dashboards", "renderers", row?.renderer_path as string);
    const original = fs.readFileSync(file);
    fs.writeFileSync(file, "export function mountDashboard(root) { root.textContent = 'tampered'; }");
    try {
      const page = await signIn(`/dashboards/${SLUG}`);
      await page.getByText("renderer integrity check failed").waitFor({ timeout: 20_000 });
      expect(await page.getByText("tampered").count()).toBe(0);
      pageErrors.length = 0;
      await page.context().close();
    } finally {
      fs.writeFileSync(file, original);
    }
  }, 60_000);
});

describe("no page errors", () => {
  it("had none", () => {
    expect(pageErrors).toEqual([]);
  });
});
