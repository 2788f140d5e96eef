import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { InvalidRequestError } from "../kernel/errors.ts";

/**
 * Opaque keyset cursors: `base64url(JSON payload) "." base64url(HMAC-SHA256)`. The payload holds
 * the sort-key values of the boundary row, the direction, and a digest of the query text the
 * cursor came from, so a cursor cannot be edited (signature) nor reused with another query.
 */
export interface CursorPayload {
  v: 1;
  /** Digest of the query text (binds the cursor to it). */
  q: string;
  /** Boundary row's sort-key values as exact text (null for NULL). */
  k: (string | null)[];
  d: "next" | "prev";
}

const MAX_CURSOR_LENGTH = 4096;

export function cursorKey(secretKey: Buffer): Buffer {
  return createHmac("sha256", secretKey).update("netmon-srql-cursor-v1").digest();
}

export function queryDigest(query: string): string {
  return createHash("sha256").update(query.trim()).digest("base64url").slice(0, 22);
}

function sign(key: Buffer, body: string): string {
  return createHmac("sha256", key).update(body).digest("base64url");
}

export function encodeCursor(key: Buffer, payload: CursorPayload): string {
  const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
  return `${body}.${sign(key, body)}`;
}

function bad(message: string): InvalidRequestError {
  return new InvalidRequestError(message, { code: "invalid_cursor", source: { parameter: "cursor" } });
}

export function decodeCursor(key: Buffer, cursor: string, query: string, keyCount: number): CursorPayload {
  if (cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(cursor)) {
    throw bad("invalid cursor");
  }
  const [body, sig] = cursor.split(".") as [string, string];
  const expected = Buffer.from(sign(key, body));
  const given = Buffer.from(sig);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw bad("invalid cursor signature");
  }
  let payload: CursorPayload;
  try {
    payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as CursorPayload;
  } catch {
    throw bad("invalid cursor payload");
  }
  if (payload?.v !== 1) throw bad("unsupported cursor version");
  if (payload.q !== queryDigest(query)) throw bad("cursor does not belong to this query");
  if (
    !Array.isArray(payload.k) ||
    payload.k.length !== keyCount ||
    !payload.k.every((x) => x === null || typeof x === "string") ||
    (payload.d !== "next" && payload.d !== "prev")
  ) {
    throw bad("invalid cursor payload");
  }
  return payload;
}
