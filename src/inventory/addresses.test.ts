import { describe, expect, it } from "vitest";
import { isLocallyAdministered, macHex, normalizeIp, normalizeMac } from "./addresses.ts";
import { DEVICE_UID_RE, deterministicUid, uidFromSeed } from "./uid.ts";

describe("addresses", () => {
  it("canonicalises IPv4 and IPv6 strictly", () => {
    expect(normalizeIp(" 10.0.0.1 ")).toBe("10.0.0.1");
    expect(normalizeIp("2001:DB8:0:0:0:0:0:1")).toBe("2001:db8::1");
    expect(normalizeIp("010.0.0.1")).toBeNull();
    expect(normalizeIp("10.0.0.256")).toBeNull();
    expect(normalizeIp("10.0.0.0/24")).toBeNull();
    expect(normalizeIp("fe80::1%eth0")).toBeNull();
    expect(normalizeIp("host.example")).toBeNull();
    expect(normalizeIp(42)).toBeNull();
  });

  it("normalises MACs to colon form and detects locally administered ones", () => {
    expect(normalizeMac("aa-bb-cc-dd-ee-ff")).toBe("AA:BB:CC:DD:EE:FF");
    expect(normalizeMac("aabb.ccdd.eeff")).toBe("AA:BB:CC:DD:EE:FF");
    expect(macHex("AA:BB:CC:DD:EE")).toBeNull();
    expect(isLocallyAdministered("020000000001")).toBe(true);
    expect(isLocallyAdministered("001122334455")).toBe(false);
  });
});

describe("device uids", () => {
  it("are sr: + a version-4 shaped UUID derived from SHA-256 of the seed", () => {
    const uid = uidFromSeed("x");
    expect(uid).toMatch(DEVICE_UID_RE);
    expect(uid[17]).toBe("4");
    expect(["8", "9", "a", "b"]).toContain(uid[22]);
    // sha256("x") = 2d711642b726b04401627ca9fbac32f5...
    expect(uid).toBe("sr:2d711642-b726-4044-8162-7ca9fbac32f5");
  });

  it("seed from the strong identifiers in priority order, else the IP, and include the partition", () => {
    const a = deterministicUid("default", { mac: "001122334455", agent_id: "ag1" }, "10.0.0.1");
    expect(a).toBe(uidFromSeed("netmon-device-v1:partition:default:agent:ag1mac:001122334455"));
    expect(deterministicUid("default", {}, "10.0.0.1")).toBe(
      uidFromSeed("netmon-device-v1:partition:default:ip:10.0.0.1"),
    );
    expect(deterministicUid("p2", {}, "10.0.0.1")).not.toBe(deterministicUid("default", {}, "10.0.0.1"));
    expect(deterministicUid("default", {}, null)).toMatch(DEVICE_UID_RE);
  });
});
