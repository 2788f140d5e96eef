import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalJson, checkManifestValue } from "./manifest.ts";
import {
  generateSigningKeyPair,
  normalisePublicKey,
  signedMessage,
  signPackage,
  verifyPackage,
} from "./signing.ts";

const hash = createHash("sha256").update("renderer bytes").digest("hex");
const manifest = {
  id: "acme.ops",
  name: "Ops",
  version: "1.2.3-rc.1+build.5",
  renderer: {
    kind: "browser_module",
    interface_version: "dashboard-browser-module-v1",
    artifact: "renderer.js",
    sha256: hash,
    trust: "trusted",
    entrypoint: "mountDashboard",
  },
  data_frames: [{ id: "devices", query: "in:devices", encoding: "arrow_ipc", required: true }],
  capabilities: ["srql.execute"],
};

describe("canonical JSON and the signed message", () => {
  it("does not depend on key order or spacing", () => {
    const reversed = Object.fromEntries(Object.entries(manifest).reverse());
    const reordered = JSON.parse(JSON.stringify(reversed, null, 4));
    expect(Object.keys(reordered)[0]).toBe("capabilities");
    expect(canonicalJson(reordered)).toBe(canonicalJson(manifest));
    expect(canonicalJson({ b: [2, { d: 1, c: "x" }], a: null })).toBe('{"a":null,"b":[2,{"c":"x","d":1}]}');
  });

  it("is the documented bytes", () => {
    expect(signedMessage({ b: 1, a: 2 }, "ab").toString("utf8")).toBe(
      'netmon-dashboard-package-v1\n{"a":2,"b":1}\nab',
    );
  });
});

describe("Ed25519 package signatures", () => {
  const pair = generateSigningKeyPair();
  const sig = signPackage(pair.privateKeyPem, manifest, hash);

  it("verify for the same manifest and bytes, and for nothing else", () => {
    expect(verifyPackage(pair.publicKeyPem, manifest, hash, sig)).toBe(true);
    expect(verifyPackage(pair.publicKeyPem, { ...manifest, name: "Other" }, hash, sig)).toBe(false);
    expect(verifyPackage(pair.publicKeyPem, manifest, "0".repeat(64), sig)).toBe(false);
    expect(verifyPackage(generateSigningKeyPair().publicKeyPem, manifest, hash, sig)).toBe(false);
    expect(verifyPackage(pair.publicKeyPem, manifest, hash, "not base64")).toBe(false);
  });

  it("trusted keys are Ed25519 public keys only", () => {
    const ok = normalisePublicKey(pair.publicKeyPem);
    expect(ok).not.toBeInstanceOf(Error);
    expect((ok as { fingerprint: string }).fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(normalisePublicKey(pair.privateKeyPem)).toBeInstanceOf(Error);
    expect(normalisePublicKey("hello")).toBeInstanceOf(Error);
  });
});

describe("manifest schema", () => {
  it("accepts the full manifest and json_rows/json encodings", () => {
    expect(checkManifestValue(manifest).ok).toBe(true);
    const json = { ...manifest, data_frames: [{ id: "a", query: "in:devices", encoding: "json_rows" }] };
    expect(checkManifestValue(json).ok).toBe(true);
  });

  it("is closed and lists each problem", () => {
    const r = checkManifestValue({ ...manifest, id: "X", extra: 1, capabilities: [] });
    expect(r.ok).toBe(false);
    const errors = (r as { errors: string[] }).errors;
    expect(errors.some((e) => e.includes("unsupported key: extra"))).toBe(true);
    expect(errors.some((e) => e.startsWith("manifest.id"))).toBe(true);
    expect(errors.some((e) => e.startsWith("manifest.capabilities"))).toBe(true);
    expect(checkManifestValue([1]).ok).toBe(false);
  });
});
