import { describe, expect, it } from "vitest";
import { InvalidRequestError, NotAcceptableError, UnsupportedMediaTypeError } from "../../kernel/errors.ts";
import { checkAccept, checkContentType } from "./media.ts";
import { parseDeepQuery, splitKey } from "./query.ts";
import { parseQueryValue } from "./values.ts";

describe("deepObject query parsing", () => {
  it("nests brackets, appends [] and repeated keys, keeps indexes", () => {
    expect(splitKey("filter[a][0][b]")).toEqual(["filter", "a", "0", "b"]);
    expect(splitKey("filter[a")).toBeNull();
    const q = parseDeepQuery(
      "filter[or][0][status][eq]=a&filter[or][1][port][in][]=1&filter[or][1][port][in][]=2&sort=-x&filter[name][in]=p&filter[name][in]=q",
    );
    expect(q).toEqual({
      filter: {
        or: { "0": { status: { eq: "a" } }, "1": { port: { in: ["1", "2"] } } },
        name: { in: ["p", "q"] },
      },
      sort: "-x",
    });
    expect(parseDeepQuery("fields%5Bagent%5D=a%2Cb")).toEqual({ fields: { agent: "a,b" } });
  });

  it("rejects conflicting and malformed keys naming them", () => {
    expect(() => parseDeepQuery("filter=x&filter[a][eq]=1")).toThrow(InvalidRequestError);
    expect(() => parseDeepQuery("filter[]x=1")).toThrow(InvalidRequestError);
  });
});

describe("typed filter values", () => {
  it("validates per type and names the parameter", () => {
    expect(parseQueryValue("42", { type: "integer" }, "p")).toBe(42);
    expect(parseQueryValue("-1.5e2", { type: "float" }, "p")).toBe(-150);
    expect(parseQueryValue("true", { type: "boolean" }, "p")).toBe(true);
    expect(parseQueryValue("2026-01-01T00:00:00+02:00", { type: "datetime" }, "p")).toBe(
      "2026-01-01T00:00:00+02:00",
    );
    expect(parseQueryValue("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", { type: "uuid" }, "p")).toBe(
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    );
    for (const [v, t] of [
      ["1.5", "integer"],
      ["NaN", "float"],
      ["1", "boolean"],
      ["2026-01-01", "datetime"],
      ["2026-13-01T00:00:00Z", "datetime"],
      ["xyz", "uuid"],
      ["[1]", "object"],
      ["{", "array"],
    ] as const) {
      try {
        parseQueryValue(v, { type: t }, "filter[x][eq]");
        expect.unreachable(`${t} ${v}`);
      } catch (err) {
        expect((err as InvalidRequestError).source?.parameter).toBe("filter[x][eq]");
      }
    }
    expect(() => parseQueryValue("z", { type: "enum", values: ["a"] }, "p")).toThrow(/not one of a/);
  });
});

describe("JSON:API media type negotiation", () => {
  it("Content-Type", () => {
    expect(() => checkContentType("application/vnd.api+json", true)).not.toThrow();
    expect(() => checkContentType('application/vnd.api+json; profile="https://x"', true)).not.toThrow();
    expect(() => checkContentType("application/json", true)).toThrow(UnsupportedMediaTypeError);
    expect(() => checkContentType("application/vnd.api+json; charset=utf-8", true)).toThrow(
      UnsupportedMediaTypeError,
    );
    expect(() => checkContentType('application/vnd.api+json; ext="https://x"', true)).toThrow(
      UnsupportedMediaTypeError,
    );
    expect(() => checkContentType(undefined, true)).toThrow(UnsupportedMediaTypeError);
    expect(() => checkContentType("text/plain", false)).not.toThrow();
  });

  it("Accept", () => {
    expect(() => checkAccept(undefined)).not.toThrow();
    expect(() => checkAccept("*/*")).not.toThrow();
    expect(() => checkAccept("text/html")).not.toThrow();
    expect(() => checkAccept("application/vnd.api+json;q=0.9")).not.toThrow();
    expect(() => checkAccept("application/vnd.api+json; charset=utf-8")).toThrow(NotAcceptableError);
    expect(() => checkAccept('application/vnd.api+json; ext="a,b"')).toThrow(NotAcceptableError);
    expect(() =>
      checkAccept("application/vnd.api+json; charset=utf-8, application/vnd.api+json"),
    ).not.toThrow();
  });
});
