import { describe, expect, it } from "vitest";
import { build } from "../storage/sql.ts";
import { mayMatchIp, mayMatchMac, mayMatchUid, searchCondition } from "./devices.ts";

describe("devices search condition", () => {
  const cols = (t: string) =>
    [...build(searchCondition(t)).text.matchAll(/(hostname|ip|mac|uid)\)? (I?LIKE)/g)].map((m) => m[1]);
  it("always searches hostname and only the canonical columns a term can match", () => {
    expect(cols("web-01")).toEqual(["hostname"]);
    expect(cols("10.0.1")).toEqual(["hostname", "ip"]);
    expect(cols("AA:BB")).toEqual(["hostname", "ip", "mac"]);
    expect(cols("sr:12ab")).toEqual(["hostname", "uid"]);
    expect(cols("3f2a-")).toEqual(["hostname", "uid"]);
    expect(cols("2001:db8::1")).toEqual(["hostname", "ip"]);
    expect(cols("16:00:0A:BC")).toEqual(["hostname", "mac"]);
    expect(cols("00:16:00:0A:BC:DE")).toEqual(["hostname", "mac"]);
    expect(cols("abc1")).toEqual(["hostname", "ip", "uid"]); // four hex digits in a row: not a MAC
    expect(cols("ab")).toEqual(["hostname", "ip", "mac", "uid"]);
  });
  it("keeps every column a real value of that form could match", () => {
    const ips = ["10.1.2.3", "2001:db8::1", "fe80::1:20", "::ffff:a01:203", "::"];
    for (const ip of ips)
      for (let i = 0; i < ip.length; i++)
        for (let j = i + 1; j <= ip.length; j++)
          expect(mayMatchIp(ip.slice(i, j)), ip.slice(i, j)).toBe(true);
    const mac = "00:16:0a:bc:de:f0";
    for (let i = 0; i < mac.length; i++)
      for (let j = i + 1; j <= mac.length; j++)
        expect(mayMatchMac(mac.slice(i, j)), mac.slice(i, j)).toBe(true);
    const uid = "sr:0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
    for (let i = 0; i < uid.length; i++)
      for (let j = i + 1; j <= uid.length; j++)
        expect(mayMatchUid(uid.slice(i, j)), uid.slice(i, j)).toBe(true);
  });
  it("rules out forms a canonical value never has", () => {
    expect(mayMatchIp("16:00:0a")).toBe(false); // a whole IPv6 group never has a leading zero
    expect(mayMatchIp("1.2:3")).toBe(false);
    expect(mayMatchIp("1::2::3")).toBe(false);
    expect(mayMatchMac("001:2")).toBe(false);
    expect(mayMatchMac("a:b:c")).toBe(false);
    expect(mayMatchUid("ab:cd")).toBe(false);
    expect(mayMatchUid("10.1")).toBe(false);
  });
  it("escapes LIKE metacharacters", () => {
    expect(build(searchCondition("50%_x")).values[0]).toBe("%50\\%\\_x%");
  });
});
