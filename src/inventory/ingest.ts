import { type Actor, hasPermission } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { ForbiddenError, InvalidRequestError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { isLocallyAdministered, isUselessMac, macColon, macHex, normalizeIp } from "./addresses.ts";
import type { DeviceRow } from "./device.ts";
import { classifyType } from "./device-types.ts";
import { deterministicUid, type IdentifierType, STRONG_ID_TYPES } from "./uid.ts";

/** At most this many sightings per batch (`POST /api/v1/device-updates`). */
export const MAX_BATCH = 1000;

/**
 * Resolution of `last_seen_time` for re-sightings that change nothing else: a known device seen
 * again within this window of its stored `last_seen_time`, with no other field changing, is not
 * written at all (its `last_seen_time` may lag the latest sighting by less than this).
 */
export const LAST_SEEN_RESOLUTION_MS = 60_000;

/** Ingestion batches are serialised by this transaction-level advisory lock (identity is global state). */
export const INGEST_LOCK_KEY = 0x6e65746d6f6e0200n;

export const PARTITION_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const SOURCE_RE = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
const MAX_TEXT = 1024;

/** One validated sighting. */
export interface Sighting {
  index: number;
  partition: string;
  ip: string;
  /** 12 lower-case hex digits. */
  macHex: string | null;
  source: string;
  observedAt: Date;
  ids: Partial<Record<IdentifierType, string>>;
  /** Locally administered MAC: stored as a medium identifier, never used to merge. */
  mediumMac: string | null;
  fields: {
    hostname?: string;
    name?: string;
    type?: string;
    vendor_name?: string;
    model?: string;
    domain?: string;
    zone?: string;
    region?: string;
    uid_alt?: string;
    gateway_id?: string;
    agent_id?: string;
    risk_level?: string;
    risk_score?: number;
    is_available?: boolean;
    is_managed?: boolean;
    is_compliant?: boolean;
    os?: Record<string, unknown>;
    owner?: Record<string, unknown>;
    metadata?: Record<string, unknown>;
  };
}

export interface ItemError {
  index: number;
  field: string | null;
  error: string;
  message: string;
}

export interface IngestItemResult {
  index: number;
  uid: string;
  ip: string;
  partition: string;
  created: boolean;
}

export interface IngestResult {
  created: number;
  updated: number;
  results: IngestItemResult[];
  /** Fields of the updates that netmon does not know, with how many updates carried each. */
  unknown_fields?: Record<string, number>;
}

/** Every member an update may carry; anything else is reported back, never silently dropped. */
export const UPDATE_FIELDS: ReadonlySet<string> = new Set([
  "ip",
  "mac",
  "source",
  "partition",
  "observed_at",
  "hostname",
  "name",
  "type",
  "vendor_name",
  "model",
  "domain",
  "zone",
  "region",
  "uid_alt",
  "gateway_id",
  "agent_id",
  "risk_level",
  "risk_score",
  "is_available",
  "is_managed",
  "is_compliant",
  "os",
  "owner",
  "metadata",
  "armis_device_id",
  "integration_id",
  "netbox_device_id",
]);

/** Count the members of `updates` that are not update fields (issue 13: report, do not drop). */
export function unknownFields(updates: readonly unknown[]): Record<string, number> {
  const out: Record<string, number> = Object.create(null);
  for (const u of updates) {
    if (!isObject(u)) continue;
    for (const k of Object.keys(u)) if (!UPDATE_FIELDS.has(k)) out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Validate raw sightings. Returns the valid ones and one error per invalid field; the caller
 * rejects the whole batch when any error exists.
 */
export function validateSightings(
  updates: unknown,
  actor: Actor,
  now: Date,
): { sightings: Sighting[]; errors: ItemError[] } {
  if (!Array.isArray(updates)) {
    throw new InvalidRequestError("updates must be an array", {
      code: "invalid_updates",
      source: { pointer: "/updates" },
    });
  }
  if (updates.length === 0) {
    throw new InvalidRequestError("at least one update is required", { code: "empty_updates" });
  }
  if (updates.length > MAX_BATCH) {
    throw new InvalidRequestError(`at most ${MAX_BATCH} updates per request`, { code: "too_many_updates" });
  }
  const sightings: Sighting[] = [];
  const errors: ItemError[] = [];
  updates.forEach((raw, index) => {
    const err = (field: string | null, error: string, message: string) =>
      errors.push({ index, field, error, message });
    if (!isObject(raw)) {
      err(null, "invalid_update", "each update must be an object");
      return;
    }
    const before = errors.length;
    const text = (key: string): string | undefined => {
      const v = raw[key];
      if (v === undefined || v === null) return undefined;
      if (typeof v !== "string") {
        err(key, "invalid_field", `${key} must be a string`);
        return undefined;
      }
      const t = v.trim();
      if (t.length > MAX_TEXT) {
        err(key, "invalid_field", `${key} is longer than ${MAX_TEXT} characters`);
        return undefined;
      }
      return t === "" ? undefined : t;
    };
    const bool = (key: string): boolean | undefined => {
      const v = raw[key];
      if (v === undefined || v === null) return undefined;
      if (typeof v !== "boolean") {
        err(key, "invalid_field", `${key} must be a boolean`);
        return undefined;
      }
      return v;
    };
    const obj = (key: string): Record<string, unknown> | undefined => {
      const v = raw[key];
      if (v === undefined || v === null) return undefined;
      if (!isObject(v)) {
        err(key, "invalid_field", `${key} must be an object`);
        return undefined;
      }
      return v;
    };

    const ipText = raw.ip;
    let ip: string | null = null;
    if (ipText === undefined || ipText === null || ipText === "")
      err("ip", "missing_ip", "an ip is required");
    else {
      ip = normalizeIp(ipText);
      if (!ip) err("ip", "invalid_ip", "ip is not a valid address");
    }
    const source = text("source");
    if (!source) {
      if (raw.source === undefined || raw.source === null || raw.source === "")
        err("source", "missing_source", "a source is required");
    } else if (!SOURCE_RE.test(source)) err("source", "invalid_source", "source is not a valid identifier");
    const partition = text("partition") ?? "default";
    if (!PARTITION_RE.test(partition)) err("partition", "invalid_partition", "partition is not a valid name");
    else if (actor.partitions !== null && !actor.partitions.includes(partition))
      err("partition", "partition_forbidden", "you may not write to that partition");

    let mHex: string | null = null;
    if (raw.mac !== undefined && raw.mac !== null && raw.mac !== "") {
      mHex = macHex(raw.mac);
      if (!mHex) err("mac", "invalid_mac", "mac is not a valid MAC address");
      else if (isUselessMac(mHex)) mHex = null;
    }
    let observedAt = now;
    if (raw.observed_at !== undefined && raw.observed_at !== null) {
      const d = typeof raw.observed_at === "string" ? new Date(raw.observed_at) : null;
      if (!d || Number.isNaN(d.getTime()))
        err("observed_at", "invalid_observed_at", "observed_at must be an ISO 8601 date-time");
      else observedAt = d;
    }
    let riskScore: number | undefined;
    if (raw.risk_score !== undefined && raw.risk_score !== null) {
      if (!Number.isInteger(raw.risk_score))
        err("risk_score", "invalid_field", "risk_score must be an integer");
      else riskScore = raw.risk_score as number;
    }
    const fields: Sighting["fields"] = {
      hostname: text("hostname"),
      name: text("name"),
      type: text("type"),
      vendor_name: text("vendor_name"),
      model: text("model"),
      domain: text("domain"),
      zone: text("zone"),
      region: text("region"),
      uid_alt: text("uid_alt"),
      gateway_id: text("gateway_id"),
      agent_id: text("agent_id"),
      risk_level: text("risk_level"),
      risk_score: riskScore,
      is_available: bool("is_available"),
      is_managed: bool("is_managed"),
      is_compliant: bool("is_compliant"),
      os: obj("os"),
      owner: obj("owner"),
      metadata: obj("metadata"),
    };
    const ids: Sighting["ids"] = {};
    if (fields.agent_id) ids.agent_id = fields.agent_id;
    for (const k of ["armis_device_id", "integration_id", "netbox_device_id"] as const) {
      const v = text(k);
      if (v) ids[k] = v;
    }
    let mediumMac: string | null = null;
    if (mHex) {
      if (isLocallyAdministered(mHex)) mediumMac = mHex;
      else ids.mac = mHex;
    }
    if (errors.length > before || !ip || !source) return;
    sightings.push({ index, partition, ip, macHex: mHex, source, observedAt, ids, mediumMac, fields });
  });
  return { sightings, errors };
}

/** Mutable in-memory device during a batch. */
interface WorkDevice {
  row: DeviceRow;
  isNew: boolean;
  origIp: string | null;
  origLive: boolean;
  dirty: boolean;
  /** Something other than last_seen_time changed in this batch. */
  changed: boolean;
  /** Existing rows: last_seen_time as read. */
  origLastSeen?: number;
}

interface IdentifierWrite {
  device_uid: string;
  partition: string;
  identifier_type: string;
  identifier_value: string;
  confidence: string;
  source: string;
  seen: string;
}

const idKey = (partition: string, type: string, value: string) => `${partition}\u0000${type}\u0000${value}`;
const ipKey = (partition: string, ip: string) => `${partition}\u0000${ip}`;

function newRow(uid: string, s: Sighting, now: Date): DeviceRow {
  return {
    uid,
    seq: 0,
    partition: s.partition,
    ip: null,
    mac: null,
    hostname: null,
    name: null,
    type_id: 0,
    type: null,
    vendor_name: null,
    model: null,
    domain: null,
    zone: null,
    subnet_uid: null,
    vlan_uid: null,
    region: null,
    os: null,
    owner: null,
    org: null,
    hw_info: null,
    network_interfaces: null,
    groups: null,
    agent_list: null,
    risk_level_id: null,
    risk_level: null,
    risk_score: null,
    is_managed: null,
    is_available: null,
    is_compliant: null,
    is_trusted: null,
    gateway_id: null,
    agent_id: null,
    management_device_id: null,
    group_id: null,
    discovery_sources: [],
    tags: {},
    metadata: {},
    uid_alt: null,
    first_seen_time: s.observedAt,
    last_seen_time: s.observedAt,
    created_time: now,
    modified_time: now,
    deleted_at: null,
    deleted_by: null,
    deleted_reason: null,
  };
}

/**
 * Reconcile validated sightings against the database inside `tx` (which the caller opened).
 * Constant number of round trips per batch: lock, two reads, three writes.
 */
export async function applySightings(tx: Queryable, sightings: Sighting[], now: Date): Promise<IngestResult> {
  if (sightings.length === 0) return { created: 0, updated: 0, results: [] };
  await tx.query(sql`SELECT pg_advisory_xact_lock(${INGEST_LOCK_KEY.toString()}::bigint)`);

  // 1. Identifier owners for every identifier in the batch.
  const idP: string[] = [];
  const idT: string[] = [];
  const idV: string[] = [];
  for (const s of sightings) {
    for (const t of STRONG_ID_TYPES) {
      const v = s.ids[t];
      if (v) {
        idP.push(s.partition);
        idT.push(t);
        idV.push(v);
      }
    }
    if (s.mediumMac) {
      idP.push(s.partition);
      idT.push("mac");
      idV.push(s.mediumMac);
    }
  }
  const idOwner = new Map<string, string>();
  if (idP.length > 0) {
    const rows = await tx.many<{
      device_uid: string;
      partition: string;
      identifier_type: string;
      identifier_value: string;
    }>(
      sql`SELECT di.device_uid, di.partition, di.identifier_type, di.identifier_value
            FROM device_identifiers di
            JOIN unnest(${idP}::text[], ${idT}::text[], ${idV}::text[]) AS q(p, t, v)
              ON di.partition = q.p AND di.identifier_type = q.t AND di.identifier_value = q.v`,
    );
    for (const r of rows)
      idOwner.set(idKey(r.partition, r.identifier_type, r.identifier_value), r.device_uid);
  }

  const heldBefore = new Map(idOwner);

  // 2. Candidate devices: identifier owners, deterministic uids, live holders of batch IPs.
  const detUid = sightings.map((s) => deterministicUid(s.partition, s.ids, s.ip));
  const uidSet = new Set<string>([...idOwner.values(), ...detUid]);
  const ipP = sightings.map((s) => s.partition);
  const ipV = sightings.map((s) => s.ip);
  const existing = await tx.many<DeviceRow>(
    sql`SELECT * FROM devices WHERE uid = ANY(${[...uidSet]}::text[])
        UNION ALL
        SELECT d.* FROM devices d
          JOIN (SELECT DISTINCT p, ip FROM unnest(${ipP}::text[], ${ipV}::text[]) AS q(p, ip)) q
            ON d.partition = q.p AND d.ip = q.ip
         WHERE d.deleted_at IS NULL`,
  );
  const devices = new Map<string, WorkDevice>();
  const ipOwner = new Map<string, string>();
  for (const row of existing) {
    if (devices.has(row.uid)) continue;
    devices.set(row.uid, {
      row,
      isNew: false,
      origIp: row.ip,
      origLive: row.deleted_at === null,
      dirty: false,
      changed: false,
      origLastSeen: row.last_seen_time.getTime(),
    });
    if (row.deleted_at === null && row.ip) ipOwner.set(ipKey(row.partition, row.ip), row.uid);
  }

  const identifierWrites = new Map<string, IdentifierWrite>();
  const results: IngestItemResult[] = [];
  const createdUids = new Set<string>();

  sightings.forEach((s, i) => {
    const hasStrong = STRONG_ID_TYPES.some((t) => s.ids[t]);
    let target: string | undefined;
    // (1) strong identifier match, by priority.
    for (const t of STRONG_ID_TYPES) {
      const v = s.ids[t];
      if (!v) continue;
      const owner = idOwner.get(idKey(s.partition, t, v));
      if (owner && devices.has(owner)) {
        target = owner;
        break;
      }
    }
    const det = detUid[i] as string;
    if (!target && hasStrong && devices.has(det)) target = det;
    // (2) IP fallback (weak): the live device at this IP, unless its own strong ids contradict ours.
    if (!target) {
      const atIp = ipOwner.get(ipKey(s.partition, s.ip));
      const cand = atIp ? devices.get(atIp) : undefined;
      if (cand) {
        const r = cand.row;
        const macConflict = s.ids.mac && r.mac && macHex(r.mac) !== s.ids.mac;
        const agentConflict = s.ids.agent_id && r.agent_id && r.agent_id !== s.ids.agent_id;
        if (!macConflict && !agentConflict) target = r.uid;
      }
    }
    // (3) the deterministic uid (IP-seeded when no strong ids); reuse it if it exists.
    if (!target && devices.has(det)) target = det;
    let created = false;
    if (!target) {
      target = det;
      devices.set(det, {
        row: newRow(det, s, now),
        isNew: true,
        origIp: null,
        origLive: false,
        dirty: true,
        changed: true,
      });
      createdUids.add(det);
      created = true;
    }
    const w = devices.get(target) as WorkDevice;
    const r = w.row;
    w.dirty = true;
    // `changed` records whether anything but last_seen_time moves (see LAST_SEEN_RESOLUTION_MS).
    const set = <K extends keyof DeviceRow>(k: K, v: DeviceRow[K]) => {
      if (r[k] !== v) {
        r[k] = v;
        w.changed = true;
      }
    };
    const setObject = (k: "os" | "owner" | "metadata", v: Record<string, unknown>) => {
      if (JSON.stringify(v) !== JSON.stringify(r[k])) {
        (r as unknown as Record<string, unknown>)[k] = v;
        w.changed = true;
      }
    };
    if (r.deleted_at !== null) {
      // A sighting revives a soft-deleted device matched by identity.
      r.deleted_at = null;
      r.deleted_by = null;
      r.deleted_reason = null;
      w.changed = true;
    }
    // Move the IP: whoever holds it loses it (an IP is weak and moves, e.g. DHCP).
    const key = ipKey(s.partition, s.ip);
    const holder = ipOwner.get(key);
    if (holder && holder !== r.uid) {
      const h = devices.get(holder) as WorkDevice;
      h.row.ip = null;
      h.row.modified_time = now;
      h.dirty = true;
      h.changed = true;
    }
    if (r.ip && r.ip !== s.ip && ipOwner.get(ipKey(r.partition, r.ip)) === r.uid) {
      ipOwner.delete(ipKey(r.partition, r.ip));
    }
    set("ip", s.ip);
    ipOwner.set(key, r.uid);

    const f = s.fields;
    if (s.macHex) set("mac", macColon(s.macHex));
    if (f.hostname !== undefined) set("hostname", f.hostname);
    if (f.name !== undefined) set("name", f.name);
    if (f.type !== undefined) {
      const t = classifyType(f.type);
      set("type_id", t.type_id);
      set("type", t.type);
    }
    if (f.vendor_name !== undefined) set("vendor_name", f.vendor_name);
    if (f.model !== undefined) set("model", f.model);
    if (f.domain !== undefined) set("domain", f.domain);
    if (f.zone !== undefined) set("zone", f.zone);
    if (f.region !== undefined) set("region", f.region);
    if (f.uid_alt !== undefined) set("uid_alt", f.uid_alt);
    if (f.gateway_id !== undefined) set("gateway_id", f.gateway_id);
    if (f.agent_id !== undefined) set("agent_id", f.agent_id);
    if (f.risk_level !== undefined) set("risk_level", f.risk_level);
    if (f.risk_score !== undefined) set("risk_score", f.risk_score);
    if (f.is_available !== undefined) set("is_available", f.is_available);
    if (f.is_managed !== undefined) set("is_managed", f.is_managed);
    if (f.is_compliant !== undefined) set("is_compliant", f.is_compliant);
    if (f.os !== undefined) setObject("os", { ...(r.os ?? {}), ...f.os });
    if (f.owner !== undefined) setObject("owner", f.owner);
    if (f.metadata !== undefined) setObject("metadata", { ...r.metadata, ...f.metadata });
    if (!r.discovery_sources.includes(s.source)) set("discovery_sources", [...r.discovery_sources, s.source]);
    if (s.observedAt < r.first_seen_time) set("first_seen_time", s.observedAt);
    if (s.observedAt > r.last_seen_time) r.last_seen_time = s.observedAt;
    r.modified_time = now;

    // Identifiers: claim the ones nobody holds; never steal one from another device.
    const claim = (type: string, value: string, confidence: string) => {
      const k = idKey(s.partition, type, value);
      const owner = idOwner.get(k);
      if (owner && owner !== r.uid) return;
      idOwner.set(k, r.uid);
      const prev = identifierWrites.get(k);
      identifierWrites.set(k, {
        device_uid: r.uid,
        partition: s.partition,
        identifier_type: type,
        identifier_value: value,
        confidence,
        source: s.source,
        seen: prev && new Date(prev.seen) > s.observedAt ? prev.seen : s.observedAt.toISOString(),
      });
    };
    for (const t of STRONG_ID_TYPES) {
      const v = s.ids[t];
      if (v) claim(t, v, "strong");
    }
    if (s.mediumMac) claim("mac", s.mediumMac, "medium");

    results.push({ index: s.index, uid: r.uid, ip: s.ip, partition: s.partition, created });
  });

  // Re-sightings that only advance last_seen_time by less than the resolution are not written
  // (nor are their already-held identifiers).
  const skipped = new Set<string>();
  for (const w of devices.values()) {
    if (w.isNew || !w.dirty || w.origLastSeen === undefined) continue;
    if (w.row.last_seen_time.getTime() - w.origLastSeen >= LAST_SEEN_RESOLUTION_MS) continue;
    if (w.changed) continue;
    w.dirty = false;
    skipped.add(w.row.uid);
  }
  for (const [k, write] of identifierWrites) {
    if (skipped.has(write.device_uid) && heldBefore.get(k) === write.device_uid) identifierWrites.delete(k);
  }

  // 3. Writes. First release IPs that change hands, so the unique (partition, ip) index holds.
  const release = [...devices.values()]
    .filter((w) => !w.isNew && w.dirty && w.origLive && w.origIp !== null && w.origIp !== w.row.ip)
    .map((w) => w.row.uid);
  if (release.length > 0) {
    await tx.query(sql`UPDATE devices SET ip = NULL WHERE uid = ANY(${release}::text[])`);
  }
  const dirty = [...devices.values()].filter((w) => w.dirty);
  const toPayload = ({ row: r }: WorkDevice) => ({
    uid: r.uid,
    partition: r.partition,
    ip: r.ip,
    mac: r.mac,
    hostname: r.hostname,
    name: r.name,
    type_id: r.type_id,
    type: r.type,
    vendor_name: r.vendor_name,
    model: r.model,
    domain: r.domain,
    zone: r.zone,
    region: r.region,
    uid_alt: r.uid_alt,
    os: r.os,
    owner: r.owner,
    risk_level: r.risk_level,
    risk_score: r.risk_score,
    is_managed: r.is_managed,
    is_available: r.is_available,
    is_compliant: r.is_compliant,
    gateway_id: r.gateway_id,
    agent_id: r.agent_id,
    discovery_sources: r.discovery_sources,
    metadata: r.metadata,
    first_seen_time: r.first_seen_time.toISOString(),
    last_seen_time: r.last_seen_time.toISOString(),
    created_time: r.created_time.toISOString(),
    modified_time: r.modified_time.toISOString(),
    deleted_at: r.deleted_at ? r.deleted_at.toISOString() : null,
    deleted_by: r.deleted_by,
    deleted_reason: r.deleted_reason,
  });
  const recordset = (payload: ReturnType<typeof toPayload>[]) =>
    sql`jsonb_to_recordset(${JSON.stringify(payload)}::jsonb) AS x(
          uid text, partition text, ip text, mac text, hostname text, name text, type_id integer,
          type text, vendor_name text, model text, domain text, zone text, region text, uid_alt text,
          os jsonb, owner jsonb, risk_level text, risk_score integer, is_managed boolean,
          is_available boolean, is_compliant boolean, gateway_id text, agent_id text,
          discovery_sources text[], metadata jsonb, first_seen_time timestamptz,
          last_seen_time timestamptz, created_time timestamptz, modified_time timestamptz,
          deleted_at timestamptz, deleted_by text, deleted_reason text)`;
  // Known devices: a plain UPDATE … FROM (no speculative insertion, no row lock record as
  // ON CONFLICT DO UPDATE takes). No indexed column changes on a re-sighting (last_seen_time is
  // not indexed, migration 0202), so these are HOT updates that touch no index.
  const known = dirty.filter((w) => !w.isNew).map(toPayload);
  if (known.length > 0) {
    await tx.query(
      sql`UPDATE devices AS d SET
            ip = x.ip, mac = x.mac, hostname = x.hostname, name = x.name, type_id = x.type_id,
            type = x.type, vendor_name = x.vendor_name, model = x.model, domain = x.domain,
            zone = x.zone, region = x.region, uid_alt = x.uid_alt, os = x.os, owner = x.owner,
            risk_level = x.risk_level, risk_score = x.risk_score, is_managed = x.is_managed,
            is_available = x.is_available, is_compliant = x.is_compliant, gateway_id = x.gateway_id,
            agent_id = x.agent_id, discovery_sources = x.discovery_sources, metadata = x.metadata,
            -- first_seen_time is indexed: keep the stored value (which may carry microseconds
            -- that the JSON round trip drops) unless the batch moved it earlier, so the update
            -- stays HOT. Ingestion only ever clears deleted_at (revival).
            first_seen_time = CASE WHEN x.first_seen_time < date_trunc('milliseconds', d.first_seen_time)
              THEN x.first_seen_time ELSE d.first_seen_time END,
            last_seen_time = greatest(d.last_seen_time, x.last_seen_time),
            modified_time = x.modified_time,
            deleted_at = CASE WHEN x.deleted_at IS NULL THEN NULL ELSE d.deleted_at END,
            deleted_by = x.deleted_by, deleted_reason = x.deleted_reason
          FROM ${recordset(known)}
          WHERE d.uid = x.uid`,
    );
  }
  // New devices get their seq in batch order (the list's stable sort key). ON CONFLICT covers a
  // device created by another writer after this batch read the table.
  const created = dirty.filter((w) => w.isNew).map(toPayload);
  if (created.length > 0) {
    await tx.query(
      sql`INSERT INTO devices (uid, partition, ip, mac, hostname, name, type_id, type, vendor_name, model,
            domain, zone, region, uid_alt, os, owner, risk_level, risk_score, is_managed, is_available,
            is_compliant, gateway_id, agent_id, discovery_sources, metadata, first_seen_time,
            last_seen_time, created_time, modified_time, deleted_at, deleted_by, deleted_reason)
          SELECT uid, partition, ip, mac, hostname, name, type_id, type, vendor_name, model,
            domain, zone, region, uid_alt, os, owner, risk_level, risk_score, is_managed, is_available,
            is_compliant, gateway_id, agent_id, discovery_sources, metadata, first_seen_time,
            last_seen_time, created_time, modified_time, deleted_at, deleted_by, deleted_reason
            FROM ${recordset(created)}
          ON CONFLICT (uid) DO UPDATE SET
            ip = EXCLUDED.ip, mac = EXCLUDED.mac, hostname = EXCLUDED.hostname, name = EXCLUDED.name,
            type_id = EXCLUDED.type_id, type = EXCLUDED.type, vendor_name = EXCLUDED.vendor_name,
            model = EXCLUDED.model, domain = EXCLUDED.domain, zone = EXCLUDED.zone,
            region = EXCLUDED.region, uid_alt = EXCLUDED.uid_alt, os = EXCLUDED.os,
            owner = EXCLUDED.owner, risk_level = EXCLUDED.risk_level, risk_score = EXCLUDED.risk_score,
            is_managed = EXCLUDED.is_managed, is_available = EXCLUDED.is_available,
            is_compliant = EXCLUDED.is_compliant, gateway_id = EXCLUDED.gateway_id,
            agent_id = EXCLUDED.agent_id, discovery_sources = EXCLUDED.discovery_sources,
            metadata = EXCLUDED.metadata, first_seen_time = EXCLUDED.first_seen_time,
            last_seen_time = EXCLUDED.last_seen_time, modified_time = EXCLUDED.modified_time,
            deleted_at = EXCLUDED.deleted_at, deleted_by = EXCLUDED.deleted_by,
            deleted_reason = EXCLUDED.deleted_reason`,
    );
  }
  if (identifierWrites.size > 0) {
    await tx.query(
      sql`INSERT INTO device_identifiers (device_uid, partition, identifier_type, identifier_value,
            confidence, source, first_seen, last_seen)
          SELECT device_uid, partition, identifier_type, identifier_value, confidence, source, seen, seen
            FROM jsonb_to_recordset(${JSON.stringify([...identifierWrites.values()])}::jsonb) AS x(
              device_uid text, partition text, identifier_type text, identifier_value text,
              confidence text, source text, seen timestamptz)
          ON CONFLICT (partition, identifier_type, identifier_value) DO UPDATE SET
            last_seen = greatest(device_identifiers.last_seen, EXCLUDED.last_seen),
            source = EXCLUDED.source`,
    );
  }
  const touched = new Set(results.map((r) => r.uid));
  return {
    created: createdUids.size,
    updated: touched.size - [...touched].filter((u) => createdUids.has(u)).length,
    results,
  };
}

/**
 * Ingest a batch of device sightings (the path of `POST /api/v1/device-updates`, sweeps,
 * integrations and `netmon devices import`). One transaction: either every sighting is applied
 * or the batch is rejected with per-item errors and nothing is written.
 */
export async function ingestSightings(
  ctx: AppContext,
  actor: Actor,
  updates: unknown,
): Promise<IngestResult> {
  if (!hasPermission(actor, "devices.ingest")) throw new ForbiddenError("missing devices.ingest");
  const now = ctx.now();
  const { sightings, errors } = validateSightings(updates, actor, now);
  if (errors.length > 0) {
    throw new InvalidRequestError(`${errors.length} invalid update(s); nothing was written`, {
      code: "invalid_updates",
      extra: { errors },
    });
  }
  const result = await ctx.db.transaction((tx) => applySightings(tx, sightings, now));
  ctx.metrics?.sightings.inc({ source: "api", outcome: "created" }, result.created);
  ctx.metrics?.sightings.inc({ source: "api", outcome: "updated" }, result.updated);
  const unknown = unknownFields(updates as unknown[]);
  return Object.keys(unknown).length > 0 ? { ...result, unknown_fields: { ...unknown } } : result;
}
