import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
} from "node:crypto";
import { canonicalJson } from "./manifest.ts";

/**
 * Package signatures (decision 0710). The signed bytes are the UTF-8 encoding of
 *
 *   "netmon-dashboard-package-v1\n" + canonicalJson(manifest) + "\n" + content_hash
 *
 * where content_hash is the lowercase hex SHA-256 of the renderer bytes. The manifest already
 * names that hash (`renderer.sha256`), but it is repeated so a signature never verifies over a
 * renderer other than the one uploaded. The signature is Ed25519, sent base64-encoded.
 */
const DOMAIN = "netmon-dashboard-package-v1";

export function signedMessage(manifest: unknown, contentHash: string): Buffer {
  return Buffer.from(`${DOMAIN}\n${canonicalJson(manifest)}\n${contentHash}`, "utf8");
}

export function signPackage(privateKeyPem: string, manifest: unknown, contentHash: string): string {
  const key = createPrivateKey(privateKeyPem);
  if (key.asymmetricKeyType !== "ed25519") throw new Error("the signing key is not an Ed25519 key");
  return sign(null, signedMessage(manifest, contentHash), key).toString("base64");
}

/** Whether `signature` (base64) is a valid Ed25519 signature by `publicKeyPem` over the package. */
export function verifyPackage(
  publicKeyPem: string,
  manifest: unknown,
  contentHash: string,
  signature: string,
): boolean {
  if (!/^[A-Za-z0-9+/]{86}==$/.test(signature)) return false;
  try {
    const key = createPublicKey(publicKeyPem);
    return verify(null, signedMessage(manifest, contentHash), key, Buffer.from(signature, "base64"));
  } catch {
    return false;
  }
}

/** A public key in canonical SPKI PEM, or an Error saying why the text is not an Ed25519 public key. */
export function normalisePublicKey(text: string): { pem: string; fingerprint: string } | Error {
  // createPublicKey would derive the public half of a private key; refuse it so a private key
  // is never handed around as if it were the shareable one.
  if (text.includes("PRIVATE KEY")) return new Error("this is a private key; give the .pub file");
  try {
    const key = createPublicKey(text);
    if (key.asymmetricKeyType !== "ed25519") return new Error("the key is not an Ed25519 public key");
    const der = key.export({ type: "spki", format: "der" });
    return {
      pem: key.export({ type: "spki", format: "pem" }).toString(),
      fingerprint: `sha256:${createHash("sha256").update(der).digest("hex")}`,
    };
  } catch (err) {
    return new Error(`not a PEM public key: ${(err as Error).message}`);
  }
}

export function generateSigningKeyPair(): { publicKeyPem: string; privateKeyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  return {
    publicKeyPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
    privateKeyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
  };
}
