import { describe, expect, it } from "vitest";
import { build } from "../storage/sql.ts";
import { searchCondition } from "./devices.ts";

describe("devices search condition", () => {
  const cols = (t: string) =>
    [...build(searchCondition(t)).text.matchAll(/(hostname|ip|mac|uid)\)? (I?LIKE)/g)].map((m) => m[1]);
  it("always searches hostname and only the canonical columns a term can match", () => {
    expect(cols("web-01")).toEqual(["hostname"]);
    expect(cols("10.0.1")).toEqual(["hostname", "ip"]);
    expect(cols("AA:BB")).toEqual(["hostname", "ip", "mac", "uid"]);
    expect(cols("sr:12ab")).toEqual(["hostname", "uid"]);
    expect(cols("3f2a-")).toEqual(["hostname", "uid"]);
    expect(cols("2001:db8::1")).toEqual(["hostname", "ip", "mac", "uid"]);
  });
  it("escapes LIKE metacharacters", () => {
    expect(build(searchCondition("50%_x")).values[0]).toBe("%50\\%\\_x%");
  });
});
