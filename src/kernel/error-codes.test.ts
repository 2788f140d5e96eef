import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ERROR_CODES } from "./error-codes.ts";
import { renderErrorDocs } from "./error-docs.ts";

const src = path.resolve(import.meta.dirname, "..");

function productionSources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === "testing" ? [] : productionSources(p);
    return /\.(ts|mjs)$/.test(e.name) && !e.name.endsWith(".test.ts") ? [p] : [];
  });
}

describe("error-code catalogue", () => {
  const files = productionSources(src).filter((f) => !f.endsWith(path.join("kernel", "error-codes.ts")));
  const texts = files.map((f) => fs.readFileSync(f, "utf8"));

  it("docs/errors.md is generated from the catalogue (run scripts/error-docs.ts)", () => {
    const doc = fs.readFileSync(path.resolve(src, "../docs/errors.md"), "utf8");
    expect(doc).toBe(renderErrorDocs());
  });

  it("every catalogued code is answered somewhere in src/ (none documented that nothing can answer)", () => {
    const unused = Object.keys(ERROR_CODES).filter((code) => {
      if (texts.some((t) => t.includes(`"${code}"`))) return false;
      // Codes built per parameter (`invalid_${key}` over a literal union of keys).
      const rest = code.startsWith("invalid_") ? code.slice("invalid_".length) : null;
      return !(rest && texts.some((t) => t.includes("`invalid_${") && t.includes(`"${rest}"`)));
    });
    expect(unused).toEqual([]);
  });

  it("error bodies built by hand use catalogued codes", () => {
    // AppError.code is typed by the catalogue; a route that sends `{ error: "…" }` itself is not,
    // so it is checked here.
    const stray: string[] = [];
    files.forEach((f, i) => {
      for (const m of (texts[i] as string).matchAll(/send\(\{\s*error:\s*"([a-z_]+)"/g)) {
        if (!Object.hasOwn(ERROR_CODES, m[1] as string)) stray.push(`${m[1]} in ${f}`);
      }
    });
    expect(stray).toEqual([]);
  });

  it("statuses are HTTP error statuses", () => {
    for (const [code, spec] of Object.entries(ERROR_CODES)) {
      expect(spec.status, code).toBeGreaterThanOrEqual(400);
      expect(spec.status, code).toBeLessThan(600);
    }
  });
});
