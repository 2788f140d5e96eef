import type { AppContext } from "../kernel/context.ts";
import { ConflictError, InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import { asDomainError } from "../storage/db-error.ts";
import { sql } from "../storage/sql.ts";
import { normalisePublicKey, verifyPackage } from "./signing.ts";

/** Trusted publisher keys: an Ed25519 signature by one of them makes a package `verified`. */
export interface PublisherKeyRow {
  [k: string]: unknown;
  id: string;
  name: string;
  public_key: string;
  fingerprint: string;
  created_at: Date;
}

export function serializeKey(k: PublisherKeyRow): Record<string, unknown> {
  return { id: k.id, name: k.name, fingerprint: k.fingerprint, created_at: k.created_at.toISOString() };
}

export async function addPublisherKey(
  ctx: AppContext,
  name: string,
  publicKeyText: string,
): Promise<PublisherKeyRow> {
  const trimmed = name.trim();
  if (!/^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,99}$/.test(trimmed)) {
    throw new InvalidRequestError("a key name is 1 to 100 letters, digits, spaces or . _ @ -");
  }
  const key = normalisePublicKey(publicKeyText);
  if (key instanceof Error) throw new InvalidRequestError(key.message);
  try {
    const row = await ctx.db.one<PublisherKeyRow>(sql`
      INSERT INTO dashboard_publisher_keys (name, public_key, fingerprint, created_at)
      VALUES (${trimmed}, ${key.pem}, ${key.fingerprint}, ${ctx.now()}) RETURNING *`);
    if (!row) throw new Error("key insert returned nothing");
    return row;
  } catch (err) {
    throw asDomainError(err, {
      message: "a key with this name or public key is already trusted",
      code: "conflict",
    });
  }
}

export async function listPublisherKeys(ctx: AppContext): Promise<PublisherKeyRow[]> {
  return ctx.db.many<PublisherKeyRow>(sql`SELECT * FROM dashboard_publisher_keys ORDER BY name`);
}

/** Remove by name or fingerprint. Packages it verified stay verified (the verdict was recorded). */
export async function removePublisherKey(
  ctx: AppContext,
  nameOrFingerprint: string,
): Promise<PublisherKeyRow> {
  const rows = await ctx.db.many<PublisherKeyRow>(sql`
    DELETE FROM dashboard_publisher_keys
    WHERE name = ${nameOrFingerprint} OR fingerprint = ${nameOrFingerprint} RETURNING *`);
  if (rows.length === 0) throw new NotFoundError(`no trusted key named ${nameOrFingerprint}`);
  if (rows.length > 1) throw new ConflictError("more than one key matched");
  return rows[0] as PublisherKeyRow;
}

export type SignatureVerdict = { keyId: string; reason: null } | { keyId: null; reason: string };

export async function verifyWithTrustedKeys(
  ctx: AppContext,
  manifest: unknown,
  contentHash: string,
  signature: string,
): Promise<SignatureVerdict> {
  const keys = await listPublisherKeys(ctx);
  for (const k of keys) {
    if (verifyPackage(k.public_key, manifest, contentHash, signature)) return { keyId: k.id, reason: null };
  }
  return {
    keyId: null,
    reason:
      keys.length === 0 ? "no trusted publisher keys are configured" : "the signature matches no trusted key",
  };
}
