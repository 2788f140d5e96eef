import { createHash } from "node:crypto";
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

/** A probe renderer: prints what the host gives it and drives the api from buttons. */
const PROBE = `
export function mountDashboard(root, host, api) {
  const out = document.createElement("pre");
  out.id = "probe";
  const log = [];
  const draw = () => {
    const f = api.frame("rows");
    out.textContent = JSON.stringify({
      theme: host.theme, dashboard: host.dashboard.id, status: f.status, encoding: f.encoding,
      hosts: f.rows.map((r) => r.hostname), next: Boolean(f.pagination.next_cursor), log,
    });
  };
  const button = (label, fn) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", fn);
    root.append(b);
  };
  button("update", () => api.srql.update("in:devices vendor_name:cisco sort:hostname:asc"));
  button("page", () => {
    const cursor = api.frame("rows").pagination.next_cursor || "no-cursor";
    api.srql.page("rows", cursor).then(() => { log.push("paged"); draw(); });
  });
  button("empty", () => {
    try { api.srql.page("rows", ""); } catch (e) { log.push("threw " + e.name); draw(); }
  });
  root.append(out);
  const unsubscribe = api.subscribe(draw);
  draw();
  return { destroy() { unsubscribe(); window.__probeDestroyed = (window.__probeDestroyed || 0) + 1; } };
}
`;

async function publishProbe(id: string, slug: string, capabilities: string[]): Promise<string> {
  const renderer = Buffer.from(PROBE);
  const manifest = {
    id,
    name: `Probe ${id}`,
    version: "1.0.0",
    renderer: {
      kind: "browser_module",
      interface_version: "dashboard-browser-module-v1",
      artifact: "renderer.js",
      sha256: createHash("sha256").update(renderer).digest("hex"),
      trust: "trusted",
      entrypoint: "mountDashboard",
    },
    data_frames: [{ id: "rows", query: "in:devices sort:hostname:asc", encoding: "json", limit: 2 }],
    capabilities,
  };
  const form = new FormData();
  form.append("manifest", new Blob([JSON.stringify(manifest)], { type: "application/json" }), "m.json");
  form.append("renderer", new Blob([renderer], { type: "text/javascript" }), "r.js");
  form.append("route", slug);
  const res = await server.fetch("/api/v1/dashboard-packages", {
    method: "POST",
    headers: authHeaders(await tokenFor(server, "admin")),
    body: form,
  });
  const body = (await res.json()) as { id: string };
  expect(res.status).toBe(200);
  expect((await api("POST", `/api/v1/dashboard-packages/${body.id}/verify`)).status).toBe(200);
  expect((await api("POST", `/api/v1/dashboard-packages/${body.id}/enable`)).status).toBe(200);
  return body.id;
}

async function probe(page: Page): Promise<Record<string, unknown>> {
  return JSON.parse((await page.locator("#probe").textContent()) ?? "{}") as Record<string, unknown>;
}

describe("host API contract (Chromium)", () => {
  it("JSON frames through /api/query, srql.update from offset 0, page with a cursor, empty cursors throw, destroy on leave", async () => {
    await publishProbe("probe.exec", "probe-exec", ["srql.execute"]);
    const page = await signIn("/dashboards/probe-exec");
    const queries: string[] = [];
    page.on("request", (r) => {
      if (r.url().endsWith("/api/query")) queries.push(r.postData() ?? "");
    });
    await expect.poll(async () => (await probe(page)).status, { timeout: 20_000 }).toBe("ok");
    expect(await probe(page)).toMatchObject({
      theme: "light",
      dashboard: "probe.exec",
      encoding: "json",
      hosts: ["cam-garage", "cam-lobby"],
      next: true,
    });
    await page.getByRole("button", { name: "page" }).click();
    await expect
      .poll(async () => (await probe(page)).hosts, { timeout: 20_000 })
      .toEqual(["core-sw1", "edge-rtr"]);
    expect(JSON.parse(queries.at(-1) ?? "{}")).toMatchObject({
      query: "in:devices sort:hostname:asc",
      limit: 2,
    });
    expect(JSON.parse(queries.at(-1) ?? "{}").cursor).toBeTruthy();

    await page.getByRole("button", { name: "update" }).click();
    const lastQuery = () => JSON.parse(queries.at(-1) ?? "{}") as Record<string, unknown>;
    await expect
      .poll(() => lastQuery().query, { timeout: 20_000 })
      .toBe("in:devices vendor_name:cisco sort:hostname:asc");
    // The new query starts at offset 0: no cursor is sent with it.
    expect(lastQuery().cursor).toBeUndefined();
    await expect
      .poll(async () => (await probe(page)).hosts, { timeout: 20_000 })
      .toEqual(["core-sw1", "edge-rtr"]);

    await page.getByRole("button", { name: "empty" }).click();
    await expect.poll(async () => (await probe(page)).log).toContain("threw TypeError");

    await page.getByRole("link", { name: "Dashboards" }).first().click();
    await page.waitForURL((u) => u.pathname === "/dashboards");
    expect(await page.evaluate("window.__probeDestroyed")).toBe(1);
    await page.context().close();
  }, 60_000);

  it("without srql.execute, srql.page is a no-op", async () => {
    await publishProbe("probe.readonly", "probe-readonly", ["map.basemap.read"]);
    const page = await signIn("/dashboards/probe-readonly");
    await expect.poll(async () => (await probe(page)).status, { timeout: 20_000 }).toBe("ok");
    let queries = 0;
    page.on("request", (r) => {
      if (r.url().endsWith("/api/query")) queries++;
    });
    await page.getByRole("button", { name: "page" }).click();
    await expect.poll(async () => (await probe(page)).log).toContain("paged");
    expect((await probe(page)).hosts).toEqual(["cam-garage", "cam-lobby"]);
    expect(queries).toBe(0);
    await page.context().close();
  }, 60_000);
});

describe("no page errors", () => {
  it("had none", () => {
    expect(pageErrors).toEqual([]);
  });
});
