import { type Actor, hasPermission } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { ConflictError, ForbiddenError, InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { macColon, macHex, normalizeIp } from "./addresses.ts";

/** Batch form: at most this many addresses (spec 8). */
export const MAX_RESOLVE_BATCH = 128;

export interface ResolveQuery {
  ip: string;
  partition: string;
  mac?: string | null;
}

export type ResolveOutcome =
  | { ok: true; uid: string }
  | { ok: false; error: "invalid_ip" }
  | { ok: false; error: "not_found" }
  | { ok: false; error: "ambiguous"; uids: string[] }
  | { ok: false; error: "mac_ip_conflict"; ip_uid: string; mac_uid: string };

const cleanPartition = (p: unknown): string =>
  typeof p === "string" && p.trim() !== "" ? p.trim() : "default";

function visible(actor: Actor, partition: string): boolean {
  return actor.partitions === null || actor.partitions.includes(partition);
}

/**
 * Resolve addresses to device uids in ONE SQL round trip, whatever the batch size.
 * The IP is authoritative; a MAC only corroborates: ignored when no device holds it,
 * reported as `mac_ip_conflict` when a different device holds it. Creates and probes nothing.
 */
export async function resolveAddresses(
  db: Queryable,
  actor: Actor,
  queries: ResolveQuery[],
): Promise<ResolveOutcome[]> {
  const out: ResolveOutcome[] = new Array(queries.length);
  const idx: number[] = [];
  const parts: string[] = [];
  const ips: string[] = [];
  const macs: (string | null)[] = [];
  const macsColon: (string | null)[] = [];
  queries.forEach((q, i) => {
    const ip = normalizeIp(q.ip);
    if (!ip) {
      out[i] = { ok: false, error: "invalid_ip" };
      return;
    }
    if (!visible(actor, q.partition)) {
      // A partition the caller may not see holds nothing for it.
      out[i] = { ok: false, error: "not_found" };
      return;
    }
    const hex = q.mac ? macHex(q.mac) : null;
    idx.push(i);
    parts.push(q.partition);
    ips.push(ip);
    macs.push(hex);
    macsColon.push(hex ? macColon(hex) : null);
  });
  if (idx.length > 0) {
    const rows = await db.many<{ i: number; ip_uids: string[] | null; mac_uids: string[] | null }>(
      sql`SELECT q.i,
            (SELECT array_agg(d.uid ORDER BY d.uid) FROM devices d
              WHERE d.partition = q.p AND d.ip = q.ip AND d.deleted_at IS NULL) AS ip_uids,
            CASE WHEN q.mac IS NULL THEN NULL ELSE
              (SELECT array_agg(o.uid ORDER BY o.uid) FROM (
                 SELECT di.device_uid AS uid FROM device_identifiers di
                   JOIN devices dd ON dd.uid = di.device_uid AND dd.deleted_at IS NULL
                  WHERE di.partition = q.p AND di.identifier_type = 'mac' AND di.identifier_value = q.mac
                 UNION
                 SELECT d.uid FROM devices d
                  WHERE d.partition = q.p AND d.mac = q.macc AND d.deleted_at IS NULL) o)
            END AS mac_uids
          FROM unnest(${idx}::int[], ${parts}::text[], ${ips}::text[], ${macs}::text[], ${macsColon}::text[])
            AS q(i, p, ip, mac, macc)`,
    );
    for (const r of rows) {
      const ipUids = r.ip_uids ?? [];
      const macUids = r.mac_uids ?? [];
      let res: ResolveOutcome;
      if (ipUids.length === 0) res = { ok: false, error: "not_found" };
      else if (ipUids.length > 1) res = { ok: false, error: "ambiguous", uids: ipUids };
      else {
        const ipUid = ipUids[0] as string;
        if (macUids.length === 0 || macUids.includes(ipUid)) res = { ok: true, uid: ipUid };
        else res = { ok: false, error: "mac_ip_conflict", ip_uid: ipUid, mac_uid: macUids[0] as string };
      }
      out[r.i] = res;
    }
  }
  return out;
}

function requirePermission(actor: Actor): void {
  if (!hasPermission(actor, "identity.resolve")) throw new ForbiddenError("missing identity.resolve");
}

/** The single form (`GET /api/v1/identity/resolve`): errors are thrown with the reference's codes. */
export async function resolveOne(
  ctx: AppContext,
  actor: Actor,
  input: { ip?: unknown; partition?: unknown; mac?: unknown },
): Promise<{ ip: string; partition: string; uid: string }> {
  requirePermission(actor);
  const ipRaw = typeof input.ip === "string" ? input.ip.trim() : "";
  if (ipRaw === "") throw new InvalidRequestError("an ip is required", { code: "missing_ip" });
  const partition = cleanPartition(input.partition);
  const mac = typeof input.mac === "string" && input.mac.trim() !== "" ? input.mac.trim() : null;
  const [res] = await resolveAddresses(ctx.db, actor, [{ ip: ipRaw, partition, mac }]);
  if (!res) throw new Error("resolution returned nothing");
  if (res.ok) return { ip: ipRaw, partition, uid: res.uid };
  switch (res.error) {
    case "invalid_ip":
      throw new InvalidRequestError("ip is not a valid address", { code: "invalid_ip" });
    case "not_found":
      throw new NotFoundError("no device found at that address", { code: "not_found" });
    case "ambiguous":
      throw new ConflictError("more than one device holds that address", {
        code: "ambiguous",
        extra: { uids: res.uids },
      });
    case "mac_ip_conflict":
      throw new ConflictError("the mac belongs to a different device than the ip", {
        code: "mac_ip_conflict",
        extra: { ip_uid: res.ip_uid, mac_uid: res.mac_uid },
      });
  }
}

export interface BatchEntry {
  ip: string;
  partition: string;
  uid?: string;
  error?: string;
  uids?: string[];
  ip_uid?: string;
  mac_uid?: string;
}

/** The batch form (`POST /api/v1/identity/resolve`): 200 with one entry per address. */
export async function resolveBatch(ctx: AppContext, actor: Actor, body: unknown): Promise<BatchEntry[]> {
  requirePermission(actor);
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const defaultPartition = cleanPartition(b.partition);
  if (b.devices !== undefined && b.devices !== null && !Array.isArray(b.devices)) {
    throw new InvalidRequestError("devices must be an array", { code: "invalid_devices" });
  }
  const raw = (Array.isArray(b.devices) ? b.devices : []) as unknown[];
  const queries: ResolveQuery[] = [];
  for (const item of raw) {
    if (typeof item !== "object" || item === null) continue;
    const e = item as Record<string, unknown>;
    const ip = typeof e.ip === "string" ? e.ip.trim() : "";
    if (ip === "") continue;
    const partition =
      typeof e.partition === "string" && e.partition.trim() !== "" ? e.partition.trim() : defaultPartition;
    const mac = typeof e.mac === "string" && e.mac.trim() !== "" ? e.mac.trim() : null;
    queries.push({ ip, partition, mac });
  }
  if (queries.length === 0) {
    throw new InvalidRequestError("at least one device ip is required", { code: "empty_devices" });
  }
  if (queries.length > MAX_RESOLVE_BATCH) {
    throw new InvalidRequestError(`at most ${MAX_RESOLVE_BATCH} devices per request`, {
      code: "too_many_devices",
    });
  }
  const outcomes = await resolveAddresses(ctx.db, actor, queries);
  return queries.map((q, i) => {
    const o = outcomes[i] as ResolveOutcome;
    const entry: BatchEntry = { ip: q.ip, partition: q.partition };
    if (o.ok) entry.uid = o.uid;
    else {
      entry.error = o.error;
      if (o.error === "ambiguous") entry.uids = o.uids;
      if (o.error === "mac_ip_conflict") {
        entry.ip_uid = o.ip_uid;
        entry.mac_uid = o.mac_uid;
      }
    }
    return entry;
  });
}
