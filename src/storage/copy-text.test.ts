import { describe, expect, it } from "vitest";
import { copyLine, copyStatement } from "./copy-text.ts";

describe("COPY text format", () => {
  it("escapes the four special characters and writes NULL as \\N", () => {
    expect(copyLine(["a\tb", "c\nd\re", "back\\slash", null, undefined, "\\N"])).toBe(
      "a\\tb\tc\\nd\\re\tback\\\\slash\t\\N\t\\N\t\\\\N\n",
    );
  });

  it("maps values as query parameters would", () => {
    expect(copyLine([true, false, 1.5, 12n, Number.NaN, new Date("2026-01-02T03:04:05.678Z")])).toBe(
      "t\tf\t1.5\t12\tNaN\t2026-01-02T03:04:05.678Z\n",
    );
    // JSON escapes the tab as \t; COPY then doubles that backslash.
    expect(copyLine([{ k: "v\t" }])).toBe(`${String.raw`{"k":"v\\t"}`}\n`);
  });

  it("writes array literals with quoted elements, NULLs and nesting", () => {
    expect(copyLine([["a", null, 'q"uote', "b\\s", [1, 2]]])).toBe(
      '{"a",NULL,"q\\\\"uote","b\\\\\\\\s",{"1","2"}}\n',
    );
  });

  it("quotes identifiers", () => {
    expect(copyStatement("logs", ["timestamp", 'we"ird'], "STDIN")).toBe(
      'COPY "logs" ("timestamp", "we""ird") FROM STDIN',
    );
  });
});
