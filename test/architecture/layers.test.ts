/**
 * The layering rule of .dependency-cruiser.cjs (run by `npm run lint`) holds for src/, and it
 * would catch a violation: a throw-away tree with one import per rule, cruised with the same
 * configuration, must be refused for each (issue 11: "the lint rule fails on one").
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "../..");
const depcruise = path.join(root, "node_modules/dependency-cruiser/bin/dependency-cruise.mjs");
const config = path.join(root, ".dependency-cruiser.cjs");

function cruise(cwd: string, outputType: "json" | "err", ...extra: string[]) {
  return spawnSync(
    process.execPath,
    [depcruise, "src", "--config", config, "--output-type", outputType, ...extra],
    { cwd, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
  );
}

function violations(cwd: string, ...extra: string[]): { rule: string; from: string; to: string }[] {
  const out = JSON.parse(cruise(cwd, "json", ...extra).stdout) as {
    summary: { violations: { rule: { name: string; severity: string }; from: string; to: string }[] };
  };
  // With --ignore-known, recorded violations stay in the report at severity "ignore".
  return out.summary.violations
    .filter((v) => v.rule.severity !== "ignore")
    .map((v) => ({ rule: v.rule.name, from: v.from, to: v.to }));
}

describe("layering (dependency-cruiser)", () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-layers-"));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it("src/ has no violation beyond the recorded known ones", () => {
    expect(violations(root, "--ignore-known")).toEqual([]);
  });

  it("the known-violations list only holds violations that still exist (it can only shrink)", () => {
    const known = JSON.parse(
      fs.readFileSync(path.join(root, ".dependency-cruiser-known-violations.json"), "utf8"),
    ) as { from: string; to: string }[];
    const now = violations(root).map((v) => `${v.from} -> ${v.to}`);
    for (const k of known) expect(now).toContain(`${k.from} -> ${k.to}`);
  });

  it("refuses an import against each rule", () => {
    const files: Record<string, string> = {
      "src/kernel/low.ts": 'import { x } from "../alerting/rules.ts";\nexport const low = x;\n',
      "src/storage/db.ts": 'import { x } from "../alerting/rules.ts";\nexport const db = x;\n',
      "src/alerting/rules.ts": 'import { app } from "../http/app.ts";\nexport const x = app;\n',
      "src/alerting/feature.ts": 'import { server } from "../server.ts";\nexport const f = server;\n',
      "src/http/app.ts": "export const app = 1;\n",
      "src/server.ts": "export const server = 1;\n",
      "src/jsonapi/engine/read.ts":
        'import { r } from "../../inventory/resources.ts";\nexport const read = r;\n',
      "src/inventory/resources.ts": 'import { t } from "./fixture.test.ts";\nexport const r = t;\n',
      "src/inventory/fixture.test.ts": "export const t = 1;\n",
      "src/ops/a.ts": 'import { b } from "./b.ts";\nexport const a = 1 + b;\n',
      "src/ops/b.ts": 'import { a } from "./a.ts";\nexport const b = () => a;\n',
    };
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(tmp, rel)), { recursive: true });
      fs.writeFileSync(path.join(tmp, rel), text);
    }
    // A cycle is reported once, from whichever of its modules is cruised first.
    const found = new Set(
      violations(tmp).map((v) => (v.rule === "no-cycles" ? `${v.rule}: src/ops/` : `${v.rule}: ${v.from}`)),
    );
    expect([...found].sort()).toEqual(
      [
        "kernel-is-the-bottom: src/kernel/low.ts",
        "storage-below-domains: src/storage/db.ts",
        "domains-below-adapters: src/alerting/rules.ts",
        "adapters-below-server: src/alerting/feature.ts",
        "engine-owns-no-domain: src/jsonapi/engine/read.ts",
        "tests-stay-out-of-production: src/inventory/resources.ts",
        "no-cycles: src/ops/",
      ].sort(),
    );
    // And the lint command's form (--output-type err) exits non-zero on such a tree, and zero on src/.
    expect(cruise(tmp, "err", "--ignore-known").status).not.toBe(0);
    expect(cruise(root, "err", "--ignore-known").status).toBe(0);
  });

  it("npm run lint runs the rule", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts.lint).toContain("npm run lint:layers");
    expect(pkg.scripts["lint:layers"]).toContain("--ignore-known");
  });
});
