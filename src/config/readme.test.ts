import fs from "node:fs";
import { describe, expect, it } from "vitest";
import { VARIABLES } from "./config.ts";

describe("README configuration table", () => {
  const readme = fs.readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  it.each(Object.keys(VARIABLES))("documents %s", (name) => {
    expect(readme).toMatch(new RegExp(`\\| \`${name}\` \\|`));
  });
});
