import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { VARIABLES } from "./config.ts";

describe("README configuration table", () => {
  const readme = fs.readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  it.each(Object.keys(VARIABLES))("documents %s", (name) => {
    expect(readme).toMatch(new RegExp(`\\| \`${name}\` \\|`));
  });
});

describe("environment variables", () => {
  // Every variable netmon reads is declared in the config table (issue 11): a read elsewhere
  // would be undocumented and unvalidated. Process-level variables of the OS are exempt.
  const SYSTEM = new Set(["PATH", "HOME", "NODE_ENV", "TZ"]);
  const srcDir = new URL("../", import.meta.url);
  function sources(dir: URL): string[] {
    return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      if (e.isDirectory()) return sources(new URL(`${e.name}/`, dir));
      return /\.(ts|mjs)$/.test(e.name) && !/\.test\.ts$/.test(e.name) && !dir.pathname.includes("/testing/")
        ? [fileURLToPath(new URL(e.name, dir))]
        : [];
    });
  }
  it("reads only variables declared in the config table", () => {
    const undeclared: string[] = [];
    for (const file of sources(srcDir)) {
      const text = fs.readFileSync(file, "utf8");
      for (const m of text.matchAll(/process\.env(?:\.([A-Z_][A-Z0-9_]*)|\[\s*"([A-Z_][A-Z0-9_]*)"\s*\])/g)) {
        const name = (m[1] ?? m[2]) as string;
        if (!SYSTEM.has(name) && !Object.hasOwn(VARIABLES, name)) undeclared.push(`${name} in ${file}`);
      }
    }
    expect(undeclared).toEqual([]);
  });
});
