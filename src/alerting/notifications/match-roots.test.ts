import { describe, expect, it } from "vitest";
import { validateMatchExpression } from "./match-expression.ts";

/** Issue 13: a route whose match can never fire is refused when saved, with the fix. */
describe("match expression field paths", () => {
  it("refuses paths outside alert./device./check. and says what to write", () => {
    expect(() => validateMatchExpression({ severity: "critical" })).toThrow(/alert\.severity/);
    expect(() => validateMatchExpression({ field: "title", contains: "disk" })).toThrow(/alert\.title/);
    expect(() => validateMatchExpression({ any: [{ "alert.severity": "critical" }, { host: "x" }] })).toThrow(
      /start with alert\., device\. or check\./,
    );
  });

  it("accepts paths under alert., device. and check.", () => {
    expect(() => validateMatchExpression({ "alert.severity": "critical" })).not.toThrow();
    expect(() =>
      validateMatchExpression({ all: [{ field: "device.uid", exists: true }, { "alert.source_type": "x" }] }),
    ).not.toThrow();
  });
});
