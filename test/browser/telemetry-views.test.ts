import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_DIR } from "../../src/http/routes/console.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { launchChromium, screenshot, seriousA11yViolations } from "./browser.ts";

/**
 * The console's telemetry views in real Chromium, fed real OTLP/HTTP JSON through /v1/*: logs
 * (filters, live tail, a record's detail), a trace's span waterfall, and an OTel gauge's chart.
 */
const EMAIL = "admin@localhost";
const PASSWORD = "telemetry-views-password-1";

let server: TestServer;
let browser: Browser;
let ingest: string;
const pageErrors: string[] = [];

type Attr = { key: string; value: { stringValue: string } };
const attrs = (o: Record<string, string>): Attr[] =>
  Object.entries(o).map(([key, v]) => ({ key, value: { stringValue: v } }));
const nowNanos = () => BigInt(Date.now()) * 1_000_000n;
const hex = (bytes: number) => randomBytes(bytes).toString("hex");

async function otlp(kind: "logs" | "traces" | "metrics", body: unknown): Promise<void> {
  const res = await server.fetch(`/v1/${kind}`, {
    method: "POST",
    headers: { ...authHeaders(ingest), "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  // A partial success would mean the console is tested on less than we think we sent.
  expect(text).toBe("{}");
}

function sendLogs(
  service: string,
  records: Array<{
    body: string;
    severity: [string, number];
    traceId?: string;
    attributes?: Record<string, string>;
  }>,
) {
  return otlp("logs", {
    resourceLogs: [
      {
        resource: { attributes: attrs({ "service.name": service, "host.name": "web-7" }) },
        scopeLogs: [
          {
            logRecords: records.map((r) => ({
              timeUnixNano: String(nowNanos()),
              severityText: r.severity[0],
              severityNumber: r.severity[1],
              body: { stringValue: r.body },
              ...(r.traceId ? { traceId: r.traceId, spanId: hex(8) } : {}),
              attributes: attrs(r.attributes ?? {}),
            })),
          },
        ],
      },
    ],
  });
}

/** A 3-span trace: GET /cart → load cart → SELECT cart_items (the last one failed). */
async function sendCartTrace() {
  const traceId = hex(16);
  const [root, child, grandchild] = [hex(8), hex(8), hex(8)];
  const t0 = nowNanos();
  const ms = (n: number) => String(t0 + BigInt(n) * 1_000_000n);
  await otlp("traces", {
    resourceSpans: [
      {
        resource: { attributes: attrs({ "service.name": "storefront" }) },
        scopeSpans: [
          {
            spans: [
              {
                traceId,
                spanId: root,
                name: "GET /cart",
                kind: 2,
                startTimeUnixNano: ms(0),
                endTimeUnixNano: ms(200),
                attributes: attrs({ "http.route": "/cart" }),
              },
              {
                traceId,
                spanId: child,
                parentSpanId: root,
                name: "load cart",
                kind: 1,
                startTimeUnixNano: ms(20),
                endTimeUnixNano: ms(120),
              },
              {
                traceId,
                spanId: grandchild,
                parentSpanId: child,
                name: "SELECT cart_items",
                kind: 3,
                startTimeUnixNano: ms(40),
                endTimeUnixNano: ms(100),
                status: { code: 2, message: "deadlock detected" },
                attributes: attrs({ "db.system": "postgresql" }),
              },
            ],
          },
        ],
      },
    ],
  });
  return { traceId, root, child, grandchild };
}

async function signIn(context: BrowserContext, returnTo: string): Promise<Page> {
  const page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(`${page.url()}: ${e.message}`));
  await page.goto(`${server.url}${returnTo}`);
  expect(new URL(page.url()).pathname).toBe("/users/log-in");
  await page.fill("#email", EMAIL);
  await page.fill("#password", PASSWORD);
  await page.click("button[type=submit]");
  await page.waitForURL((u) => u.pathname === returnTo.split("?")[0]);
  return page;
}

const logRows = (page: Page) => page.locator("section[aria-label='Log records'] tbody tr");
const shownErrors = (page: Page) => page.locator("main p.error, main div.error").allInnerTexts();

beforeAll(async () => {
  if (!fs.existsSync(path.join(CONSOLE_DIR, "index.html"))) {
    throw new Error(`the console is not built (${CONSOLE_DIR}); run npm run build:web`);
  }
  server = await startTestServer({ env: { SERVICE_ADMIN_PASSWORD: PASSWORD } });
  // An operator holds telemetry.ingest, the permission the OTLP receivers ask for.
  ingest = await tokenFor(server, "operator");
  browser = await launchChromium();
});

afterEach(() => {
  expect(pageErrors.splice(0)).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe("telemetry views (Chromium)", () => {
  it("logs: lists records, filters by severity, tails new ones live and stops when unchecked", {
    timeout: 120_000,
  }, async () => {
    const traceId = hex(16);
    await sendLogs("checkout", [
      {
        body: "order 41 accepted",
        severity: ["INFO", 9],
        traceId,
        attributes: { "order.id": "41" },
      },
      { body: "payment declined for order 42", severity: ["ERROR", 17], attributes: { "order.id": "42" } },
    ]);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn(context, "/logs");
    await page.getByRole("heading", { name: "Logs" }).waitFor();
    await logRows(page).filter({ hasText: "order 41 accepted" }).waitFor();
    const declined = logRows(page).filter({ hasText: "payment declined for order 42" });
    await declined.waitFor();
    await expect.poll(() => declined.innerText()).toContain("checkout");
    expect(await declined.innerText()).toContain("web-7");
    expect(await declined.innerText()).toContain("ERROR");

    // A row's detail: attributes and resource as JSON; a record with a trace id links to it.
    await logRows(page).filter({ hasText: "order 41 accepted" }).locator("td").last().click();
    const detail = page.locator("section[aria-label='Log record']");
    await detail.waitFor();
    expect(await detail.locator("pre").first().innerText()).toContain('"order.id": "41"');
    expect(await detail.locator("pre").nth(1).innerText()).toContain('"service.name": "checkout"');
    expect(await detail.getByRole("link", { name: /View trace/ }).getAttribute("href")).toBe(
      `/traces/${traceId}`,
    );

    // Severity: ERROR and above hides the INFO record; the filter is in the URL.
    await page.getByLabel("Severity").selectOption("ERROR");
    await page.waitForURL(/severity=ERROR/);
    await expect.poll(() => logRows(page).filter({ hasText: "order 41 accepted" }).count()).toBe(0);
    await declined.waitFor();
    // Free text in the body narrows further.
    await page.fill("#log-text", "no such words anywhere");
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByText("No log records match.").waitFor();

    // Live tail: a record sent after the page opened shows up at the top without a reload.
    await page.goto(`${server.url}/logs`);
    await logRows(page).filter({ hasText: "order 41 accepted" }).waitFor();
    await page.getByLabel("Live tail").check();
    await page.waitForURL(/live=1/);
    await page.getByText("Live tail: new records appear").waitFor();
    const marker = `tail arrival ${hex(4)}`;
    await sendLogs("checkout", [{ body: marker, severity: ["WARN", 13] }]);
    await logRows(page).filter({ hasText: marker }).waitFor({ timeout: 20_000 });
    expect(await logRows(page).first().innerText()).toContain(marker);
    // Still the same document: the row came from the tail, not from a navigation.
    expect(await page.evaluate("performance.getEntriesByType('navigation').length")).toBe(1);

    // Unchecked: nothing new arrives, even after several tail intervals have passed.
    await page.getByLabel("Live tail").uncheck();
    await page.getByText("Live tail is off.").waitFor();
    const late = `after the tail stopped ${hex(4)}`;
    await sendLogs("checkout", [{ body: late, severity: ["WARN", 13] }]);
    await page.waitForTimeout(6000);
    expect(await logRows(page).filter({ hasText: late }).count()).toBe(0);
    // ...and a reload (the ordinary list) does show it, so its absence above was the pause.
    await page.reload();
    await logRows(page).filter({ hasText: late }).waitFor();
    expect(await shownErrors(page)).toEqual([]);
    await screenshot(page, "logs");
    await context.close();
  });

  it("logs: the live tail pauses while the reader scrolls down and catches up at the top", {
    timeout: 90_000,
  }, async () => {
    const service = `bulk-${hex(3)}`;
    await sendLogs(
      service,
      Array.from({ length: 60 }, (_, i) => ({
        body: `bulk line ${i}`,
        severity: ["INFO", 9] as [string, number],
      })),
    );
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn(context, `/logs?service=${service}&live=1`);
    await expect.poll(() => logRows(page).count(), { timeout: 20_000 }).toBe(60);
    await page.getByText("Live tail: new records appear").waitFor();

    await page.mouse.move(640, 500);
    await page.mouse.wheel(0, 1500);
    await page.getByText("Live tail paused while you read older rows").waitFor();
    const marker = `while scrolled ${hex(4)}`;
    await sendLogs(service, [{ body: marker, severity: ["ERROR", 17] }]);
    await page.waitForTimeout(6000);
    expect(await logRows(page).filter({ hasText: marker }).count()).toBe(0);

    await page.mouse.wheel(0, -5000);
    await page.getByText("Live tail: new records appear").waitFor();
    await logRows(page).filter({ hasText: marker }).waitFor({ timeout: 20_000 });
    expect(await logRows(page).first().innerText()).toContain(marker);
    expect(await logRows(page).count()).toBe(61);
    await context.close();
  });

  it("traces: the list links to a waterfall of 3 nested bars with the error span marked", {
    timeout: 90_000,
  }, async () => {
    const { traceId, root, child, grandchild } = await sendCartTrace();
    await sendLogs("storefront", [
      { body: "cart query deadlocked, retrying", severity: ["ERROR", 17], traceId },
      { body: "unrelated storefront line", severity: ["ERROR", 17] },
    ]);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn(context, "/traces");
    const row = page.locator("tbody tr").filter({ hasText: "GET /cart" });
    await row.waitFor();
    expect(await row.innerText()).toContain("storefront");
    // The error filter keeps it (its child failed); a slower-than filter above it hides it.
    await page.getByLabel("With errors only").check();
    await page.waitForURL(/errors=1/);
    await row.waitFor();
    await page.getByLabel("Slower than (ms)").fill("5000");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByText("No traces match.").waitFor();
    await page.goto(`${server.url}/traces`);
    await row.getByRole("link", { name: "GET /cart" }).click();
    await page.waitForURL((u) => u.pathname === `/traces/${traceId}`);

    const bars = page.locator(".waterfall .span-bar");
    await expect.poll(() => bars.count(), { timeout: 15_000 }).toBe(3);
    const rows = page.locator(".waterfall li.wf-row");
    expect(
      await rows.evaluateAll((els) =>
        els.map((e) => [e.getAttribute("data-span-id"), e.getAttribute("data-depth")]),
      ),
    ).toEqual([
      [root, "0"],
      [child, "1"],
      [grandchild, "2"],
    ]);
    // Bars sit on one time axis: each child inside its parent's extent, the error one marked.
    const box = async (i: number) => {
      const b = await bars.nth(i).boundingBox();
      if (!b) throw new Error(`bar ${i} is not rendered`);
      return b;
    };
    const [rb, cb, gb] = [await box(0), await box(1), await box(2)];
    expect(cb.x).toBeGreaterThan(rb.x);
    expect(cb.x + cb.width).toBeLessThan(rb.x + rb.width);
    expect(gb.x).toBeGreaterThan(cb.x);
    expect(gb.x + gb.width).toBeLessThan(cb.x + cb.width);
    expect(await page.locator(".waterfall .span-bar.error").count()).toBe(1);
    expect(await rows.nth(2).getAttribute("class")).toContain("error");
    // Each child's label is indented further than its parent's.
    const labelX = async (i: number) => (await rows.nth(i).locator("button .wf-name").boundingBox())?.x ?? 0;
    expect(await labelX(1)).toBeGreaterThan(await labelX(0));
    expect(await labelX(2)).toBeGreaterThan(await labelX(1));

    // A span's attributes on click.
    await rows.nth(2).getByRole("button").click();
    const detail = page.locator("section[aria-label='Span SELECT cart_items']");
    await detail.waitFor();
    expect(await detail.innerText()).toContain("deadlock detected");
    expect(await detail.locator("pre").first().innerText()).toContain('"db.system": "postgresql"');
    expect(await shownErrors(page)).toEqual([]);
    await screenshot(page, "trace-waterfall");

    // The trace's own logs, and only those.
    await page.getByRole("link", { name: "Logs of this trace" }).click();
    await page.waitForURL(/\/logs\?trace=/);
    await logRows(page).filter({ hasText: "cart query deadlocked" }).waitFor();
    expect(await logRows(page).count()).toBe(1);
    await context.close();
  });

  it("metrics: charts an OTel gauge per series and names the series", { timeout: 90_000 }, async () => {
    const metric = `shop.queue.depth.${hex(3)}`;
    const t = nowNanos();
    const minute = 60_000_000_000n;
    const point = (ago: bigint, value: number, queue: string) => ({
      timeUnixNano: String(t - ago * minute),
      asDouble: value,
      attributes: attrs({ queue }),
    });
    await otlp("metrics", {
      resourceMetrics: [
        {
          resource: { attributes: attrs({ "service.name": "worker" }) },
          scopeMetrics: [
            {
              metrics: [
                {
                  name: metric,
                  unit: "1",
                  gauge: {
                    dataPoints: [
                      point(10n, 3, "emails"),
                      point(5n, 9, "emails"),
                      point(1n, 4, "emails"),
                      point(7n, 1, "sms"),
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await signIn(context, "/otel-metrics");
    await page.getByText("Pick a metric to chart its points.").waitFor();
    await page.getByLabel("Metric").selectOption(metric);
    await page.waitForURL(/metric=/);

    const series = page.locator("section[aria-label='Series'] tbody tr");
    const emails = series.filter({ hasText: "worker {queue=emails}" });
    await emails.waitFor();
    expect((await emails.locator("td").allInnerTexts()).slice(1)).toEqual(["3", "4"]);
    expect(await series.count()).toBe(2);
    await page.locator(`figure[aria-label='${metric}']`).waitFor();

    // uPlot draws on a canvas: count pixels in the first series' colour (the theme's --chart-1).
    const drawn = async () =>
      Number(
        await page.evaluate(`(() => {
          const hex = getComputedStyle(document.documentElement).getPropertyValue("--chart-1").trim();
          const want = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
          let n = 0;
          for (const c of document.querySelectorAll("figure.chart canvas")) {
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            for (let i = 0; i < d.length; i += 4) {
              if (d[i + 3] > 200 && want.every((w, k) => Math.abs(d[i + k] - w) < 24)) n++;
            }
          }
          return n;
        })()`),
      );
    await expect.poll(drawn, { timeout: 15_000 }).toBeGreaterThan(30);
    await screenshot(page, "metrics-series");

    // The attribute filter narrows to one series.
    await page.getByLabel("Attribute").fill("queue=sms");
    await page.getByRole("button", { name: "Apply" }).click();
    await page.waitForURL(/attr=queue/);
    await expect.poll(() => series.count()).toBe(1);
    expect(await series.first().innerText()).toContain("worker {queue=sms}");
    expect(await shownErrors(page)).toEqual([]);
    await screenshot(page, "metrics");
    await context.close();
  });

  it("the three pages (and a waterfall) are reachable, fit a phone, and pass axe", {
    timeout: 150_000,
  }, async () => {
    const { traceId } = await sendCartTrace();
    const findings: string[] = [];
    for (const [viewport, theme] of [
      [{ width: 1280, height: 800 }, "light"],
      [{ width: 1280, height: 800 }, "dark"],
      [{ width: 390, height: 844 }, "dark"],
    ] as const) {
      const context = await browser.newContext({ viewport, colorScheme: theme });
      const page = await signIn(context, "/");
      for (const [label, p] of [
        ["Logs", "/logs"],
        ["Traces", "/traces"],
        ["Metrics", "/otel-metrics"],
        [`Trace ${traceId}`, `/traces/${traceId}`],
      ] as Array<[string, string]>) {
        if (viewport.width > 600 && !p.startsWith("/traces/")) {
          await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: label }).click();
          await page.waitForURL((u) => u.pathname === p);
        } else await page.goto(`${server.url}${p}`);
        await page.getByRole("heading", { name: label, level: 1 }).waitFor();
        await page.waitForLoadState("networkidle");
        expect(await shownErrors(page), p).toEqual([]);
        const overflow = Number(
          await page.evaluate("document.documentElement.scrollWidth - window.innerWidth"),
        );
        expect(overflow, `${p} at ${viewport.width}px overflows by ${overflow}px`).toBeLessThanOrEqual(1);
        await screenshot(
          page,
          `${p.split("/")[1]}${p.startsWith("/traces/") ? "-detail" : ""}-${theme}-${viewport.width}`,
        );
        for (const v of await seriousA11yViolations(page)) {
          findings.push(`${p} ${theme} ${viewport.width}px: ${v.id} ${v.help} ${JSON.stringify(v.nodes)}`);
        }
      }
      await context.close();
    }
    expect(findings).toEqual([]);
  });
});
