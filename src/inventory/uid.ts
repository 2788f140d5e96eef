import { createHash, randomUUID } from "node:crypto";

/** Namespace of the deterministic device uid seed (versioned: changing it changes every uid). */
export const UID_NAMESPACE = "netmon-device-v1";

export const DEVICE_UID_RE = /^sr:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Strong identifier kinds in merge priority order (reference §5.2). */
export const STRONG_ID_TYPES = [
  "agent_id",
  "armis_device_id",
  "integration_id",
  "netbox_device_id",
  "mac",
] as const;
export type IdentifierType = (typeof STRONG_ID_TYPES)[number];

const SEED_PREFIX: Record<IdentifierType, string> = {
  agent_id: "agent",
  armis_device_id: "armis",
  integration_id: "integration",
  netbox_device_id: "netbox",
  mac: "mac",
};

/** First 16 bytes of SHA-256(seed) shaped as an RFC 4122 version-4 UUID, prefixed `sr:`. */
export function uidFromSeed(seed: string): string {
  const b = createHash("sha256").update(seed, "utf8").digest().subarray(0, 16);
  b[6] = ((b[6] as number) & 0x0f) | 0x40;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `sr:${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * Deterministic uid from the strong identifiers present (in priority order), else from the IP,
 * else random. MAC values are 12 lower-case hex digits.
 */
export function deterministicUid(
  partition: string,
  ids: Partial<Record<IdentifierType, string>>,
  ip?: string | null,
): string {
  let seeds = "";
  for (const t of STRONG_ID_TYPES) {
    const v = ids[t];
    if (v) seeds += `${SEED_PREFIX[t]}:${v}`;
  }
  if (seeds) return uidFromSeed(`${UID_NAMESPACE}:partition:${partition}:${seeds}`);
  if (ip) return uidFromSeed(`${UID_NAMESPACE}:partition:${partition}:ip:${ip}`);
  return `sr:${randomUUID()}`;
}
