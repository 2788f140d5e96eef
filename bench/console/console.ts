// The console's weight and speed in real Chromium against a real `netmon serve` (PGlite):
//   1. JavaScript shipped for the first page, gzip, against the 150 KB budget;
//   2. time to interactive of the overview on loopback, against the server-rendered sign-in page
//      loaded in the same browser (the floor: one HTML page, no script);
//   3. scripting time to render a 500-row device page, against the 100 ms budget.
// Run: node --import tsx bench/console/console.ts   (BENCH_CONSOLE_RUNS=5)
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import type { Page } from "playwright-core";
import { launchChromium } from "../../test/browser/browser.ts";

const RUNS = Number(process.env.BENCH_CONSOLE_RUNS ?? 5);
const root = path.resolve(import.meta.dirname, "../..");
const dist = path.join(root, "web/dist");
const PASSWORD = "bench-console-password";
const PORT = 40_000 + Math.floor(Math.random() * 10_000);
const base = `http://127.0.0.1:${PORT}`;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

async function waitHealthy(): Promise<void> {
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    try {
      if ((await fetch(`${base}/health`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("server did not become healthy");
}

async function signIn(page: Page): Promise<void> {
  await page.goto(`${base}/users/log-in`);
  await page.fill("#email", "admin@localhost");
  await page.fill("#password", PASSWORD);
  await page.click("button[type=submit]");
  await page.waitForURL(`${base}/`);
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-bench-console-"));
const server: ChildProcess = spawn(process.execPath, ["bin/netmon.mjs", "serve"], {
  cwd: root,
  env: {
    ...process.env,
    PORT: String(PORT),
    HOST: "127.0.0.1",
    NETMON_DATA_DIR: dataDir,
    NETMON_LOG_LEVEL: "warn",
    SERVICE_ADMIN_PASSWORD: PASSWORD,
    NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s",
  },
  stdio: ["ignore", "ignore", "inherit"],
});

try {
  await waitHealthy();
  const browser = await launchChromium();
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await signIn(page);

  // 1. JavaScript of the first page: every script the overview loads, gzip-compressed.
  const scripts = new Set<string>();
  page.on("response", (r) => {
    if (r.request().resourceType() === "script") scripts.add(new URL(r.url()).pathname);
  });
  await page.goto(`${base}/`);
  await page.waitForLoadState("networkidle");
  let gzip = 0;
  let raw = 0;
  for (const p of scripts) {
    const data = fs.readFileSync(path.join(dist, p));
    raw += data.length;
    gzip += zlib.gzipSync(data, { level: 9 }).length;
  }

  // 2. Time to interactive: navigation start → the overview's device counts are rendered and the
  //    main thread has been free of long tasks; versus the sign-in page's load event.
  const tti: number[] = [];
  const floor: number[] = [];
  const anon = await browser.newContext();
  const anonPage = await anon.newPage();
  for (let i = 0; i < RUNS; i++) {
    const t0 = Date.now();
    await page.goto(`${base}/`, { waitUntil: "commit" });
    await page
      .locator("section[aria-label='Devices'] .stat-value")
      .first()
      .filter({ hasText: /\d/ })
      .waitFor();
    tti.push(Date.now() - t0);
    const t1 = Date.now();
    await anonPage.goto(`${base}/users/log-in`, { waitUntil: "load" });
    floor.push(Date.now() - t1);
  }

  // 3. 500 devices, then the scripting time of rendering one 500-row page (DevTools metrics).
  const csrf = (await context.cookies()).find((c) => c.name === "netmon_csrf")?.value ?? "";
  const updates = Array.from({ length: 500 }, (_, i) => ({
    ip: `10.77.${Math.floor(i / 250)}.${(i % 250) + 1}`,
    hostname: `bench-${String(i).padStart(3, "0")}`,
    mac: `02:00:00:00:${(i >> 8).toString(16).padStart(2, "0")}:${(i & 255).toString(16).padStart(2, "0")}`,
    source: "manual",
  }));
  const seeded = await context.request.post(`${base}/api/v1/device-updates`, {
    data: { updates },
    headers: { "x-csrf-token": csrf },
  });
  if (!seeded.ok()) throw new Error(`seeding failed: ${seeded.status()} ${await seeded.text()}`);
  const cdp = await context.newCDPSession(page);
  await cdp.send("Performance.enable");
  const scriptMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    await page.goto(`${base}/devices?limit=50`);
    await page.locator("tbody tr").nth(49).waitFor();
    await page.waitForLoadState("networkidle");
    const before = await cdp.send("Performance.getMetrics");
    await page.locator("label", { hasText: "Per page" }).locator("select").selectOption("500");
    await page.locator("tbody tr").nth(499).waitFor();
    const after = await cdp.send("Performance.getMetrics");
    const m = (r: typeof before, n: string) => r.metrics.find((x) => x.name === n)?.value ?? 0;
    scriptMs.push((m(after, "ScriptDuration") - m(before, "ScriptDuration")) * 1000);
  }
  const version = browser.version();
  await browser.close();

  const kb = (n: number) => (n / 1024).toFixed(1);
  const t = median(tti);
  const f = median(floor);
  const s = median(scriptMs);
  console.log(`## Console (bench/console/console.ts)

Command: \`node --import tsx bench/console/console.ts\` (${RUNS} runs each, medians; real \`netmon serve\` on PGlite,
Debian Chromium ${version} via playwright-core, loopback, load average ${os.loadavg()[0]?.toFixed(1)}).

| Measure | netmon | Peer / budget | Ratio |
|---|---|---|---|
| JavaScript for the first page (gzip) | ${kb(gzip)} KB (${kb(raw)} KB raw, ${scripts.size} file${scripts.size === 1 ? "" : "s"}) | budget 150 KB | ${(gzip / 1024 / 150).toFixed(2)}× budget |
| Overview time to interactive (navigation → device counts rendered) | ${t} ms | sign-in page load ${f} ms | ${(t / Math.max(f, 1)).toFixed(1)}× the server-rendered floor |
| Scripting to render a 500-row device page | ${s.toFixed(1)} ms | budget 100 ms | ${(s / 100).toFixed(2)}× budget |
`);
} finally {
  server.kill("SIGTERM");
  await new Promise((r) => server.once("exit", r));
  fs.rmSync(dataDir, { recursive: true, force: true });
}
