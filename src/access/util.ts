import { createHash, createHmac, randomBytes } from "node:crypto";
import { parseDurationSeconds } from "../kernel/duration.ts";

export { isUuid } from "../kernel/ids.ts";

export function sha256Hex(v: string): string {
  return createHash("sha256").update(v).digest("hex");
}

export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}

/** A key for one purpose derived from the instance secret. */
export function deriveKey(secret: Buffer, purpose: string): Buffer {
  return createHmac("sha256", secret).update(`netmon:${purpose}`).digest();
}

/** The longest lifetime any credential may be given: ten years (beyond it dates stop being useful). */
export const MAX_TTL_SECONDS = 10 * 366 * 86400;

/** `30d`, `12h`, `15m`, `90s` or a bare number of seconds → seconds. */
export function parseTtl(raw: string | number): number {
  const bounded = (n: number) => {
    if (n > MAX_TTL_SECONDS) throw new Error(`must be at most ${MAX_TTL_SECONDS} seconds (ten years)`);
    return n;
  };
  if (typeof raw === "number") {
    if (!Number.isInteger(raw) || raw <= 0) throw new Error("must be a positive number of seconds");
    return bounded(raw);
  }
  if (typeof raw !== "string") throw new Error("must be a number of seconds or a duration like 30d");
  const n = parseDurationSeconds(raw, { bareSeconds: true });
  if (n <= 0) throw new Error("must be positive");
  return bounded(n);
}
