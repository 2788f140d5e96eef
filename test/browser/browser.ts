import fs from "node:fs";
import path from "node:path";
import axe from "axe-core";
import { type Browser, chromium, type Page } from "playwright-core";

/** Debian's Chromium, driven by playwright-core (no browser downloads on this network). */
export const CHROMIUM = process.env.NETMON_CHROMIUM ?? "/usr/bin/chromium";

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    // As root in CI: no sandbox. The rest keeps Chromium off a network it cannot reach.
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-quic",
      "--no-first-run",
    ],
  });
}

/** Screenshots land here as CI artefacts (git-ignored). */
export const SHOT_DIR = path.resolve(import.meta.dirname, "../../.tmp/screenshots");

export async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SHOT_DIR, `${name}.png`), fullPage: true });
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: unknown; failureSummary?: string }>;
}

/**
 * Serious and critical axe-core findings on the current page. axe runs through the DevTools
 * protocol (page.evaluate), which the page's Content-Security-Policy does not govern.
 */
export async function seriousA11yViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axe.source);
  // A string, evaluated in the page (this file is type-checked without DOM types).
  const result = (await page.evaluate('axe.run(document, { resultTypes: ["violations"] })')) as {
    violations: AxeViolation[];
  };
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 3).map((n) => ({ target: n.target, failureSummary: n.failureSummary })),
    }));
}
