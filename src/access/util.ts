import { createHash, createHmac, randomBytes } from "node:crypto";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(v: unknown): v is string {
  return typeof v === "string" && UUID.test(v);
}

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

/** `30d`, `12h`, `15m`, `90s` or a bare number of seconds → seconds. */
/** The longest lifetime any credential may be given: ten years (beyond it dates stop being useful). */
export const MAX_TTL_SECONDS = 10 * 366 * 86400;

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
  const m = /^(\d+)(s|m|h|d)?$/.exec(raw.trim());
  if (!m) throw new Error(`must be a duration like 3600, 90s, 15m, 12h or 30d, got '${raw}'`);
  const n = Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[(m[2] ?? "s") as "s" | "m" | "h" | "d"];
  if (n <= 0) throw new Error("must be positive");
  return bounded(n);
}
