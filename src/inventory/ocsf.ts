import { type Actor, hasPermission } from "../access/actor.ts";
import { ForbiddenError, InvalidRequestError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { join, type SqlFragment, sql } from "../storage/sql.ts";
import { normalizeIp, normalizeMac } from "./addresses.ts";
import type { DeviceRow } from "./device.ts";
import { DEVICE_TYPES } from "./device-types.ts";
import { checkPathUid, parseLimit, parseOffset } from "./devices.ts";

export const OCSF_VERSION = "1.7.0";
export const EXPORT_DEFAULT_LIMIT = 100;
export const EXPORT_MAX_LIMIT = 1000;

const OS_TYPES: Record<number, string> = {
  0: "Unknown",
  99: "Other",
  100: "Windows",
  101: "Windows Mobile",
  200: "Linux",
  201: "Android",
  300: "macOS",
  301: "iOS",
  302: "iPadOS",
  400: "Solaris",
  401: "AIX",
  402: "HP-UX",
};
const RISK_LEVELS: Record<number, string> = {
  0: "Info",
  1: "Low",
  2: "Medium",
  3: "High",
  4: "Critical",
  99: "Other",
};

function osTypeIdFromName(name: string): number {
  const n = name.toLowerCase();
  if (n.includes("windows")) return 100;
  if (n.includes("android")) return 201;
  if (n.includes("ipados")) return 302;
  if (n.includes("ios") && !n.includes("cisco")) return 301;
  if (n.includes("mac") || n.includes("darwin")) return 300;
  if (n.includes("linux") || n.includes("ubuntu") || n.includes("debian") || n.includes("centos")) return 200;
  if (n.includes("solaris")) return 400;
  if (n.includes("aix")) return 401;
  if (n.includes("hp-ux")) return 402;
  return 99;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

/** OCSF OS object, or undefined when the stored OS has no name (name and type_id are required). */
function ocsfOs(os: Record<string, unknown> | null): Record<string, unknown> | undefined {
  if (!os) return undefined;
  const name = str(os.name);
  if (!name) return undefined;
  const given = os.type_id;
  const typeId = typeof given === "number" && OS_TYPES[given] !== undefined ? given : osTypeIdFromName(name);
  const out: Record<string, unknown> = {
    name,
    type_id: typeId,
    type: typeId === 99 ? (str(os.type) ?? "Other") : OS_TYPES[typeId],
  };
  for (const k of ["version", "build", "edition", "kernel_release", "lang", "cpe_name", "sp_name"]) {
    const v = str(os[k]);
    if (v) out[k] = v;
  }
  return out;
}

/** OCSF User object, or undefined without one of account/name/uid. */
function ocsfOwner(o: Record<string, unknown> | null): Record<string, unknown> | undefined {
  if (!o) return undefined;
  const out: Record<string, unknown> = {};
  for (const k of ["name", "uid", "email_addr", "full_name", "domain"]) {
    const v = str(o[k]);
    if (v) out[k] = v;
  }
  if (out.email_addr && !/^[^@\s]+@[^@\s]+$/.test(out.email_addr as string)) delete out.email_addr;
  if (!out.name && !out.uid) return undefined;
  return out;
}

/** Map a stored device to an OCSF 1.7.0 `device` object (absent values are left out, never null). */
export function toOcsfDevice(d: DeviceRow): Record<string, unknown> {
  const typeId = DEVICE_TYPES[d.type_id] !== undefined ? d.type_id : 99;
  const out: Record<string, unknown> = {
    uid: d.uid,
    type_id: typeId,
    type: typeId === 99 ? (d.type ?? "Other") : DEVICE_TYPES[typeId],
  };
  const put = (k: string, v: unknown) => {
    if (v !== null && v !== undefined && v !== "") out[k] = v;
  };
  put("name", d.name);
  put("hostname", d.hostname);
  put("ip", d.ip ? (normalizeIp(d.ip) ?? undefined) : undefined);
  put("mac", d.mac ? (normalizeMac(d.mac) ?? undefined) : undefined);
  put("uid_alt", d.uid_alt);
  put("vendor_name", d.vendor_name);
  put("model", d.model);
  put("domain", d.domain);
  put("zone", d.zone);
  put("subnet_uid", d.subnet_uid);
  put("vlan_uid", d.vlan_uid);
  put("region", d.region);
  put("first_seen_time", d.first_seen_time.getTime());
  put("last_seen_time", d.last_seen_time.getTime());
  put("created_time", d.created_time.getTime());
  put("modified_time", d.modified_time.getTime());
  if (d.risk_level_id !== null && RISK_LEVELS[d.risk_level_id] !== undefined) {
    out.risk_level_id = d.risk_level_id;
    out.risk_level = d.risk_level_id === 99 ? (d.risk_level ?? "Other") : RISK_LEVELS[d.risk_level_id];
  } else put("risk_level", d.risk_level);
  put("risk_score", d.risk_score);
  put("is_managed", d.is_managed);
  put("is_compliant", d.is_compliant);
  put("is_trusted", d.is_trusted);
  put("os", ocsfOs(d.os));
  put("owner", ocsfOwner(d.owner));
  return out;
}

export interface ExportParams {
  limit: number;
  offset: number;
  typeId?: number;
  firstSeenAfter?: Date;
  lastSeenAfter?: Date;
  /** One device (the console's device page shows its OCSF object). */
  uid?: string;
}

function parseDate(
  q: Record<string, unknown>,
  key: "first_seen_after" | "last_seen_after",
): Date | undefined {
  const v = q[key];
  if (v === undefined || v === "") return undefined;
  const d = typeof v === "string" && /^\d{4}-\d{2}-\d{2}/.test(v) ? new Date(v) : null;
  if (!d || Number.isNaN(d.getTime())) {
    throw new InvalidRequestError("invalid datetime format (use ISO8601)", {
      code: `invalid_${key}` as const,
      source: { parameter: key },
    });
  }
  return d;
}

export function parseExportParams(q: Record<string, unknown>): ExportParams {
  const limit = parseLimit(q, EXPORT_DEFAULT_LIMIT, EXPORT_MAX_LIMIT);
  const offset = parseOffset(q, limit);
  const p: ExportParams = { limit, offset };
  const t = q.type_id;
  if (t !== undefined && t !== "") {
    if (typeof t !== "string" || !/^-?[0-9]+$/.test(t.trim())) {
      throw new InvalidRequestError("invalid integer value", {
        code: "invalid_type_id",
        source: { parameter: "type_id" },
      });
    }
    p.typeId = Number(t.trim());
  }
  p.firstSeenAfter = parseDate(q, "first_seen_after");
  p.lastSeenAfter = parseDate(q, "last_seen_after");
  const uid = q.uid;
  if (uid !== undefined && uid !== "") {
    if (typeof uid !== "string") {
      throw new InvalidRequestError("uid must be one value", {
        code: "invalid_uid",
        source: { parameter: "uid" },
      });
    }
    checkPathUid(uid);
    p.uid = uid;
  }
  return p;
}

/** `GET /api/devices/ocsf/export`: OCSF 1.7.0 class 5001 "Device Inventory Info". */
export async function exportOcsf(db: Queryable, actor: Actor, p: ExportParams) {
  if (!hasPermission(actor, "devices.export")) throw new ForbiddenError("missing devices.export");
  const where: SqlFragment[] = [sql`deleted_at IS NULL`];
  if (actor.partitions !== null) where.push(sql`partition = ANY(${[...actor.partitions]}::text[])`);
  if (p.typeId !== undefined) where.push(sql`type_id = ${p.typeId}`);
  if (p.uid !== undefined) where.push(sql`uid = ${p.uid}`);
  if (p.firstSeenAfter) where.push(sql`first_seen_time >= ${p.firstSeenAfter}`);
  if (p.lastSeenAfter) where.push(sql`last_seen_time >= ${p.lastSeenAfter}`);
  const rows = await db.many<DeviceRow>(
    sql`SELECT * FROM devices WHERE ${join(where, " AND ")}
        ORDER BY last_seen_time DESC, seq LIMIT ${p.limit} OFFSET ${p.offset}`,
  );
  const devices = rows.map(toOcsfDevice);
  return {
    ocsf_version: OCSF_VERSION,
    class_uid: 5001,
    class_name: "Device Inventory Info",
    devices,
    count: devices.length,
    pagination: {
      limit: p.limit,
      offset: p.offset,
      next_offset: rows.length >= p.limit ? p.offset + p.limit : null,
    },
  };
}
