import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";

/**
 * Secrets netmon must use again later (an OIDC client secret), sealed at rest with AES-256-GCM
 * under a key derived from the instance secret key. A database dump alone does not reveal them;
 * restoring one on an instance with a different secret key leaves them unreadable (they must be
 * entered again), which `open` reports as null.
 */
function keyFor(secret: Buffer, purpose: string): Buffer {
  return createHmac("sha256", secret).update(`netmon:sealed:${purpose}`).digest();
}

export function seal(secret: Buffer, purpose: string, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", keyFor(secret, purpose), iv);
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return `v1.${iv.toString("base64url")}.${body.toString("base64url")}.${cipher.getAuthTag().toString("base64url")}`;
}

export function open(secret: Buffer, purpose: string, sealed: string): string | null {
  const [v, iv, body, tag] = sealed.split(".");
  if (v !== "v1" || !iv || body === undefined || !tag) return null;
  try {
    const decipher = createDecipheriv("aes-256-gcm", keyFor(secret, purpose), Buffer.from(iv, "base64url"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString(
      "utf8",
    );
  } catch {
    return null;
  }
}
