import { type Actor, hasPermission } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { ForbiddenError, InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import { isUuid } from "../kernel/ids.ts";
import type { Queryable } from "../storage/db.ts";
import { ident, join, type SqlFragment, sql } from "../storage/sql.ts";
import { type DeviceRow, deviceJson } from "./device.ts";

export const LIST_DEFAULT_LIMIT = 100;
export const LIST_MAX_LIMIT = 500;
export const MAX_OFFSET = 100_000;
const MAX_SEARCH = 200;
/** Device uid accepted in URL paths (reference §5.2). */
export const PATH_UID_RE = /^[A-Za-z0-9][A-Za-z0-9:._-]*$/;

type Query = Record<string, unknown>;

/** The list's query parameters; each has its own `invalid_<name>` error code. */
type ListParam =
  | "device_type"
  | "gateway_id"
  | "group_id"
  | "limit"
  | "offset"
  | "page"
  | "search"
  | "sort"
  | "source"
  | "status";

function one(q: Query, key: ListParam): string | undefined {
  const v = q[key];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) {
    throw new InvalidRequestError(`invalid ${key}`, {
      code: `invalid_${key}` as const,
      source: { parameter: key },
    });
  }
  return typeof v === "string" ? v : String(v);
}

const INT_RE = /^[0-9]+$/;

/** `limit`: positive integer, clamped to `max` (as the original); anything else is 400 naming it. */
export function parseLimit(q: Query, def: number, max: number): number {
  const v = one(q, "limit");
  if (v === undefined || v === "") return def;
  const t = v.trim();
  if (!INT_RE.test(t) || Number(t) <= 0) {
    throw new InvalidRequestError("invalid limit", { code: "invalid_limit", source: { parameter: "limit" } });
  }
  return Math.min(Number(t), max);
}

/** `offset` (≥ 0, ≤ 100 000) or 1-based `page`. */
export function parseOffset(q: Query, limit: number): number {
  const v = one(q, "offset");
  if (v !== undefined && v !== "") {
    const t = v.trim();
    if (!INT_RE.test(t)) {
      throw new InvalidRequestError("invalid offset", {
        code: "invalid_offset",
        source: { parameter: "offset" },
      });
    }
    const n = Number(t);
    if (n > MAX_OFFSET) {
      throw new InvalidRequestError("offset too large", {
        code: "invalid_offset",
        source: { parameter: "offset" },
      });
    }
    return n;
  }
  const p = one(q, "page");
  if (p !== undefined && p !== "") {
    const t = p.trim();
    if (!INT_RE.test(t) || Number(t) < 1) {
      throw new InvalidRequestError("invalid page", { code: "invalid_page", source: { parameter: "page" } });
    }
    const n = (Number(t) - 1) * limit;
    if (n > MAX_OFFSET) {
      throw new InvalidRequestError("offset too large", {
        code: "invalid_page",
        source: { parameter: "page" },
      });
    }
    return n;
  }
  return 0;
}

/** Escape LIKE metacharacters so a search term matches literally. */
export function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * Could `t` (lower case) be a substring of a canonical IP? IPv4 is a dotted quad (digits and
 * dots, no colon); IPv6 is compressed lower-case hex whose groups have no leading zeros and no
 * dots (an IPv4-mapped address is stored as hex groups, `::ffff:a01:203`), with at most one `::`.
 */
export function mayMatchIp(t: string): boolean {
  if (/^[0-9.]+$/.test(t)) return true;
  if (!/^[0-9a-f:]+$/.test(t) || t.length > 39) return false;
  if (t.includes(":::") || t.split("::").length > 2) return false;
  const groups = t.split(":");
  // The first and last pieces may be partial groups; the inner ones are whole groups.
  if ((groups[0] as string).length > 4 || (groups[groups.length - 1] as string).length > 4) return false;
  return groups.slice(1, -1).every((g) => g === "" || /^(0|[1-9a-f][0-9a-f]{0,3})$/.test(g));
}

/** Could `t` (lower case) be a substring of a stored MAC (`aa:bb:cc:dd:ee:ff` once lowered)? */
export function mayMatchMac(t: string): boolean {
  if (!/^[0-9a-f:]+$/.test(t) || t.length > 17) return false;
  const groups = t.split(":");
  if (groups.length > 6) return false;
  if ((groups[0] as string).length > 2 || (groups[groups.length - 1] as string).length > 2) return false;
  return groups.slice(1, -1).every((g) => g.length === 2);
}

/** Could `t` (lower case) be a substring of a uid (`sr:` + a lower-case UUID)? */
export function mayMatchUid(t: string): boolean {
  if (t.length > 39) return false;
  return /^(?:s|sr|r|(?:sr:|r:|:)?[0-9a-f-]*)$/.test(t);
}

/**
 * `search` over hostname, IP, MAC and uid (substring, case-insensitive). IP, MAC and uid are
 * stored in canonical forms, so a term that cannot be a substring of such a form (e.g. `web-01`
 * for all three, a MAC fragment `16:00:0a:bc` for IPv6 and uid, a dotted IPv4 for MAC and uid)
 * cannot match them and their (costly) trigram probes are skipped. lower(ip|uid) LIKE matches the
 * expression trigram indexes of migration 0201, MACs are probed in colon-free form (0202).
 */
export function searchCondition(term: string): SqlFragment {
  const t = term.toLowerCase();
  const pat = `%${escapeLike(t)}%`;
  const parts: SqlFragment[] = [sql`hostname ILIKE ${pat}`];
  if (mayMatchIp(t)) parts.push(sql`lower(ip) LIKE ${pat}`);
  if (mayMatchMac(t)) {
    // Probe the colon-free hex index (migration 0202), recheck the colon form: a colon-form
    // match is always a hex-form match, not the reverse (the hex form ignores group alignment).
    const hex = t.replace(/:/g, "");
    parts.push(sql`(replace(lower(mac), ':', '') LIKE ${`%${hex}%`} AND lower(mac) LIKE ${pat})`);
  }
  if (mayMatchUid(t)) parts.push(sql`lower(uid) LIKE ${pat}`);
  return sql`(${join(parts, " OR ")})`;
}

export interface DeviceListParams {
  limit: number;
  offset: number;
  search?: string;
  status?: "online" | "offline";
  gatewayId?: string;
  deviceType?: string;
  /** A discovery source the device was seen by (e.g. "sweep", "snmp", "manual"). */
  source?: string;
  groupId?: string;
  /** Whitelisted column, optionally prefixed with "-" for descending. */
  sort?: { column: (typeof DEVICE_SORTS)[number]; desc: boolean };
  includeDeleted?: boolean;
}

/** Columns the device list sorts by (each has, or is cheap without, an index at inventory scale). */
export const DEVICE_SORTS = [
  "hostname",
  "ip",
  "mac",
  "type",
  "vendor_name",
  "last_seen_time",
  "first_seen_time",
  "is_available",
] as const;

export function parseListParams(q: Query): DeviceListParams {
  const limit = parseLimit(q, LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT);
  const offset = parseOffset(q, limit);
  const params: DeviceListParams = { limit, offset };
  const search = one(q, "search");
  if (search !== undefined && search.trim() !== "") {
    const s = search.trim();
    if (s.length > MAX_SEARCH) {
      throw new InvalidRequestError(`search is longer than ${MAX_SEARCH} characters`, {
        code: "invalid_search",
        source: { parameter: "search" },
      });
    }
    params.search = s;
  }
  const status = one(q, "status");
  if (status !== undefined && status.trim() !== "") {
    const s = status.trim().toLowerCase();
    if (s === "online" || s === "available") params.status = "online";
    else if (s === "offline" || s === "unavailable") params.status = "offline";
    else {
      throw new InvalidRequestError(`invalid status: ${status}`, {
        code: "invalid_status",
        source: { parameter: "status" },
      });
    }
  }
  const gw = one(q, "gateway_id");
  if (gw !== undefined && gw.trim() !== "") params.gatewayId = gw.trim();
  const dt = one(q, "device_type");
  if (dt !== undefined && dt.trim() !== "") params.deviceType = dt.trim();
  const source = one(q, "source");
  if (source !== undefined && source.trim() !== "") params.source = source.trim().slice(0, 100);
  const group = one(q, "group_id");
  if (group !== undefined && group.trim() !== "") {
    if (!isUuid(group.trim())) {
      throw new InvalidRequestError("group_id must be a UUID", {
        code: "invalid_group_id",
        source: { parameter: "group_id" },
      });
    }
    params.groupId = group.trim();
  }
  const sort = one(q, "sort");
  if (sort !== undefined && sort.trim() !== "") {
    const desc = sort.startsWith("-");
    const column = DEVICE_SORTS.find((c) => c === sort.replace(/^-/, ""));
    if (!column) {
      throw new InvalidRequestError(
        `sort must be one of ${DEVICE_SORTS.join(", ")} (prefix - for descending)`,
        {
          code: "invalid_sort",
          source: { parameter: "sort" },
        },
      );
    }
    params.sort = { column, desc };
  }
  return params;
}

function visibleWhere(actor: Actor, includeDeleted: boolean): SqlFragment[] {
  const where: SqlFragment[] = [];
  if (!includeDeleted) where.push(sql`deleted_at IS NULL`);
  if (actor.partitions !== null) where.push(sql`partition = ANY(${[...actor.partitions]}::text[])`);
  return where;
}

/**
 * Devices list. Sorted by insertion order (`seq`), so devices created while a client pages
 * append at the end: offset paging neither skips nor repeats devices (docs/decisions/0200).
 */
export async function listDevices(
  db: Queryable,
  actor: Actor,
  p: DeviceListParams,
): Promise<{ data: DeviceRow[]; pagination: { limit: number; offset: number; next_offset: number | null } }> {
  if (!hasPermission(actor, "devices.view")) throw new ForbiddenError("missing devices.view");
  const where = visibleWhere(actor, p.includeDeleted ?? false);
  if (p.search) {
    where.push(searchCondition(p.search));
  }
  if (p.status === "online") where.push(sql`is_available IS TRUE`);
  if (p.status === "offline") where.push(sql`is_available IS NOT TRUE`);
  if (p.gatewayId) where.push(sql`gateway_id = ${p.gatewayId}`);
  if (p.deviceType) where.push(sql`type = ${p.deviceType}`);
  if (p.source) where.push(sql`discovery_sources @> ARRAY[${p.source}]::text[]`);
  if (p.groupId) where.push(sql`group_id = ${p.groupId}::uuid`);
  const cond = where.length > 0 ? sql`WHERE ${join(where, " AND ")}` : sql``;
  // seq breaks ties so offset pages never repeat or skip a device.
  const order = p.sort
    ? sql`ORDER BY ${ident(p.sort.column)} ${p.sort.desc ? sql`DESC NULLS LAST` : sql`ASC NULLS LAST`}, seq`
    : sql`ORDER BY seq`;
  const rows = await db.many<DeviceRow>(
    sql`SELECT * FROM devices ${cond} ${order} LIMIT ${p.limit} OFFSET ${p.offset}`,
  );
  return {
    data: rows,
    pagination: {
      limit: p.limit,
      offset: p.offset,
      next_offset: rows.length >= p.limit ? p.offset + p.limit : null,
    },
  };
}

export function checkPathUid(uid: string): void {
  if (uid.length > 200 || !PATH_UID_RE.test(uid)) {
    throw new InvalidRequestError("invalid uid", { code: "invalid_uid", source: { parameter: "uid" } });
  }
}

/** One device; 404 when unknown, soft-deleted (unless asked) or outside the caller's partitions. */
export async function getDevice(
  db: Queryable,
  actor: Actor,
  uid: string,
  opts: { includeDeleted?: boolean } = {},
): Promise<DeviceRow> {
  if (!hasPermission(actor, "devices.view")) throw new ForbiddenError("missing devices.view");
  checkPathUid(uid);
  const where = [sql`uid = ${uid}`, ...visibleWhere(actor, opts.includeDeleted ?? false)];
  const row = await db.one<DeviceRow>(sql`SELECT * FROM devices WHERE ${join(where, " AND ")}`);
  if (!row) throw new NotFoundError("device not found", { code: "not_found" });
  return row;
}

/** Soft delete: hidden from lists and identity, purged by the cleanup job after retention. */
export async function softDeleteDevice(
  ctx: AppContext,
  actor: Actor,
  uid: string,
  reason?: string | null,
): Promise<DeviceRow> {
  if (!hasPermission(actor, "devices.delete")) throw new ForbiddenError("missing devices.delete");
  checkPathUid(uid);
  const where = [sql`uid = ${uid}`, ...visibleWhere(actor, false)];
  const row = await ctx.db.one<DeviceRow>(
    sql`UPDATE devices SET deleted_at = ${ctx.now()}, deleted_by = ${actor.email ?? actor.id},
          deleted_reason = ${reason ?? null}, modified_time = ${ctx.now()}
        WHERE ${join(where, " AND ")} RETURNING *`,
  );
  if (!row) throw new NotFoundError("device not found", { code: "not_found" });
  return row;
}

export { deviceJson };
