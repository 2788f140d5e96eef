import { describe, expect, it } from "vitest";
import { unsafeIntegerLiteral } from "./json-numbers.ts";

describe("unsafe integer literals", () => {
  it("finds integers JSON.parse would round, and only those", () => {
    expect(unsafeIntegerLiteral('{"a":9007199254740993}')).toBe("9007199254740993");
    expect(unsafeIntegerLiteral('{"a":-9223372036854775808}')).toBe("-9223372036854775808");
    expect(unsafeIntegerLiteral('{"a":9007199254740991}')).toBeNull();
    expect(unsafeIntegerLiteral('{"a":1234567890123456.5,"b":1e308}')).toBeNull();
    expect(unsafeIntegerLiteral('{"id":"90071992547409930000","q":"\\"12345678901234567890\\""}')).toBeNull();
    expect(unsafeIntegerLiteral('["\\\\",12345678901234567890]')).toBe("12345678901234567890");
  });

  it("stays linear on hostile text", () => {
    const text = `${"9".repeat(16)}${'"'.repeat(200_000)}`;
    expect(unsafeIntegerLiteral(text)).toBe("9".repeat(16));
    expect(unsafeIntegerLiteral(`"${"9".repeat(16)}${'\\"'.repeat(200_000)}`)).toBeNull();
  });
});
