import { createHash, randomUUID } from "node:crypto";
import { type Actor, hasPermission } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import {
  ConflictError,
  type ErrorCode,
  ForbiddenError,
  InvalidRequestError,
  NotFoundError,
} from "../kernel/errors.ts";
import { join, type SqlFragment, sql } from "../storage/sql.ts";
import { macHex, normalizeIp } from "./addresses.ts";
import { applySightings, type Sighting, validateSightings } from "./ingest.ts";
import { findPlugin, requireApprovedPlugin } from "./plugin-gate.ts";

/** Records per snapshot upload. */
export const MAX_SNAPSHOT_RECORDS = 10_000;
const SOURCE_RE = /^[a-z0-9][a-z0-9_.-]{0,127}$/;
const INSTANCE_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const COLLECTION_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,159}$/;
const RECORD_ID_RE = /^[\p{L}\p{N}\p{P}\p{S}][\p{L}\p{N}\p{P}\p{S} ]{0,255}$/u;
const ALLOWED_PARAMS = new Set([
  "collection",
  "cursor",
  "instance",
  "limit",
  "partition",
  "presence",
  "source",
]);
const CURSOR_KEYS = [
  "collection",
  "id",
  "instance",
  "last_observed_at",
  "partition",
  "presence",
  "source",
  "v",
];

function bad(reason: ErrorCode, param?: string): InvalidRequestError {
  return new InvalidRequestError("Invalid source inventory query", {
    code: reason,
    source: param ? { parameter: param } : undefined,
  });
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

interface RecordIn {
  source_record_id: string;
  source_integration_id: string | null;
  hostname: string | null;
  ip: string | null;
  mac: string | null;
  serial_number: string | null;
  vendor_name: string | null;
  model: string | null;
  device_type: string | null;
  management_status: string | null;
  metadata: Record<string, unknown>;
}

export interface SnapshotResult {
  source: string;
  source_instance: string;
  partition: string;
  collection: CollectionJson;
  results: { source_record_id: string; canonical_device_uid: string | null; error: string | null }[];
}

interface CollectionRow {
  id: string;
  collection: string | null;
  content_hash: string;
  query_hash: string | null;
  observed_at: Date;
  completed_at: Date | null;
  expected_present_count: number;
  absent_count: number;
  complete: boolean;
  [k: string]: unknown;
}

interface CollectionJson {
  id: string;
  name: string | null;
  content_hash: string;
  query_hash: string | null;
  observed_at: string;
  completed_at: string | null;
  expected_present_count: number;
  absent_count: number;
  complete: boolean;
}

function collectionJson(c: CollectionRow): CollectionJson {
  return {
    id: c.id,
    name: c.collection,
    content_hash: c.content_hash,
    query_hash: c.query_hash,
    observed_at: c.observed_at.toISOString(),
    completed_at: c.completed_at ? c.completed_at.toISOString() : null,
    expected_present_count: c.expected_present_count,
    absent_count: c.absent_count,
    complete: c.complete,
  };
}

const optText = (r: Record<string, unknown>, k: string, i: number): string | null => {
  const v = r[k];
  if (v === undefined || v === null || v === "") return null;
  if (typeof v !== "string" && typeof v !== "number") {
    throw new InvalidRequestError(`records[${i}].${k} must be a string`, {
      code: "invalid_record",
      source: { pointer: `/records/${i}/${k}` },
    });
  }
  return String(v).trim().slice(0, 1024) || null;
};

/**
 * A source reports its full current inventory (`POST /api/v1/source-inventory`). Every record
 * with a usable address runs through device ingestion (identity resolution with the strong
 * identifier `integration_id = <source>/<instance>/<source_record_id>`), and the snapshot
 * stores the uid each record resolved to. Records missing from this snapshot become absent.
 * One transaction. See docs/decisions/0201-source-inventory.md.
 */
export async function uploadSnapshot(ctx: AppContext, actor: Actor, body: unknown): Promise<SnapshotResult> {
  if (!hasPermission(actor, "devices.ingest")) throw new ForbiddenError("missing devices.ingest");
  if (!isObject(body)) throw new InvalidRequestError("body must be a JSON object", { code: "invalid_body" });
  const source = typeof body.source === "string" ? body.source.trim().toLowerCase() : "";
  if (!source)
    throw new InvalidRequestError("source is required", {
      code: "source_required",
      source: { pointer: "/source" },
    });
  if (!SOURCE_RE.test(source))
    throw new InvalidRequestError("source is not a valid identifier", {
      code: "invalid_identifier",
      source: { pointer: "/source" },
    });
  const instance = typeof body.instance === "string" ? body.instance.trim() : "";
  if (!INSTANCE_RE.test(instance))
    throw new InvalidRequestError("instance is missing or not a valid identifier", {
      code: "invalid_identifier",
      source: { pointer: "/instance" },
    });
  const partition =
    typeof body.partition === "string" && body.partition.trim() !== "" ? body.partition.trim() : "default";
  if (!INSTANCE_RE.test(partition))
    throw new InvalidRequestError("partition is not a valid identifier", {
      code: "invalid_identifier",
      source: { pointer: "/partition" },
    });
  if (actor.partitions !== null && !actor.partitions.includes(partition))
    throw new ForbiddenError("you may not write to that partition");
  const plugin = requireApprovedPlugin(await findPlugin(ctx.db, source, instance, partition), actor, {
    source,
    instance,
    partition,
  });
  const collection =
    typeof body.collection === "string" && body.collection.trim() !== "" ? body.collection.trim() : null;
  if (collection !== null && !COLLECTION_RE.test(collection))
    throw new InvalidRequestError("collection is not a valid identifier", {
      code: "invalid_identifier",
      source: { pointer: "/collection" },
    });
  const queryHash = typeof body.query_hash === "string" ? body.query_hash.slice(0, 200) : null;
  const complete = body.complete === undefined ? true : body.complete === true;
  const now = ctx.now();
  let observedAt = now;
  if (body.observed_at !== undefined && body.observed_at !== null) {
    const d = typeof body.observed_at === "string" ? new Date(body.observed_at) : null;
    if (!d || Number.isNaN(d.getTime()))
      throw new InvalidRequestError("observed_at must be an ISO 8601 date-time", {
        code: "invalid_observed_at",
        source: { pointer: "/observed_at" },
      });
    observedAt = d;
  }
  if (!Array.isArray(body.records))
    throw new InvalidRequestError("records must be an array", {
      code: "invalid_records",
      source: { pointer: "/records" },
    });
  if (body.records.length > MAX_SNAPSHOT_RECORDS)
    throw new InvalidRequestError(`at most ${MAX_SNAPSHOT_RECORDS} records per snapshot`, {
      code: "too_many_records",
    });

  const seen = new Set<string>();
  const records: RecordIn[] = body.records.map((r: unknown, i: number) => {
    if (!isObject(r))
      throw new InvalidRequestError(`records[${i}] must be an object`, {
        code: "invalid_record",
        source: { pointer: `/records/${i}` },
      });
    const id = optText(r, "source_record_id", i);
    if (!id || !RECORD_ID_RE.test(id))
      throw new InvalidRequestError(`records[${i}].source_record_id is required`, {
        code: "invalid_record",
        source: { pointer: `/records/${i}/source_record_id` },
      });
    if (seen.has(id))
      throw new InvalidRequestError(`records[${i}].source_record_id '${id}' is repeated`, {
        code: "duplicate_record",
        source: { pointer: `/records/${i}/source_record_id` },
      });
    seen.add(id);
    return {
      source_record_id: id,
      source_integration_id: optText(r, "source_integration_id", i),
      hostname: optText(r, "hostname", i),
      ip: optText(r, "ip", i),
      mac: optText(r, "mac", i),
      serial_number: optText(r, "serial_number", i),
      vendor_name: optText(r, "vendor_name", i),
      model: optText(r, "model", i),
      device_type: optText(r, "device_type", i),
      management_status: optText(r, "management_status", i),
      metadata: isObject(r.metadata) ? r.metadata : {},
    };
  });
  const contentHash = createHash("sha256")
    .update(JSON.stringify([...records].sort((a, b) => (a.source_record_id < b.source_record_id ? -1 : 1))))
    .digest("hex");

  // Records with a usable address become sightings; the rest stay unresolved with a reason.
  const errorsByRecord = new Map<string, string>();
  const candidates: { rec: RecordIn; raw: Record<string, unknown> }[] = [];
  for (const rec of records) {
    if (!rec.ip) errorsByRecord.set(rec.source_record_id, "missing_ip");
    else if (!normalizeIp(rec.ip)) errorsByRecord.set(rec.source_record_id, "invalid_ip");
    else if (rec.mac && !macHex(rec.mac)) errorsByRecord.set(rec.source_record_id, "invalid_mac");
    else {
      const raw: Record<string, unknown> = {
        ip: rec.ip,
        mac: rec.mac,
        hostname: rec.hostname,
        partition,
        source,
        vendor_name: rec.vendor_name,
        model: rec.model,
        type: rec.device_type,
        observed_at: observedAt.toISOString(),
        integration_id: `${source}/${instance}/${rec.source_record_id}`,
      };
      if (source === "netbox") raw.netbox_device_id = `${instance}/${rec.source_record_id}`;
      if (source === "armis") raw.armis_device_id = `${instance}/${rec.source_record_id}`;
      candidates.push({ rec, raw });
    }
  }

  return ctx.db.transaction(async (tx) => {
    const uidByRecord = new Map<string, string>();
    for (let i = 0; i < candidates.length; i += 1000) {
      const chunk = candidates.slice(i, i + 1000);
      const { sightings, errors } = validateSightings(
        chunk.map((c) => c.raw),
        actor,
        now,
      );
      for (const e of errors) {
        const c = chunk[e.index];
        if (c) errorsByRecord.set(c.rec.source_record_id, e.error);
      }
      const ok: Sighting[] = sightings;
      const res = await applySightings(tx, ok, now);
      for (const r of res.results) {
        const c = chunk[r.index];
        if (c) uidByRecord.set(c.rec.source_record_id, r.uid);
      }
    }

    await tx.query(sql`UPDATE inventory_plugins SET last_snapshot_at = ${now} WHERE id = ${plugin.id}`);
    await tx.query(
      sql`INSERT INTO source_inventory_sources (source, source_instance, partition)
          VALUES (${source}, ${instance}, ${partition})
          ON CONFLICT (source, source_instance, partition) DO UPDATE SET updated_at = now()`,
    );
    const collectionId = randomUUID();
    await tx.query(
      sql`UPDATE source_inventory_collections SET is_current = false
           WHERE source = ${source} AND source_instance = ${instance} AND partition = ${partition}
             AND coalesce(collection, '') = ${collection ?? ""} AND is_current`,
    );
    await tx.query(
      sql`INSERT INTO source_inventory_collections (id, source, source_instance, partition, collection,
            content_hash, query_hash, observed_at, completed_at, expected_present_count, complete, is_current)
          VALUES (${collectionId}, ${source}, ${instance}, ${partition}, ${collection}, ${contentHash},
            ${queryHash}, ${observedAt}, ${now}, ${records.length}, ${complete}, true)`,
    );
    const payload = records.map((r) => ({
      ...r,
      id: randomUUID(),
      canonical_device_uid: uidByRecord.get(r.source_record_id) ?? null,
      resolution_error: errorsByRecord.get(r.source_record_id) ?? null,
    }));
    if (payload.length > 0) {
      await tx.query(
        sql`INSERT INTO source_inventory_records (id, source, source_instance, partition, collection,
              collection_id, source_object_id, source_integration_id, present, first_observed_at,
              last_observed_at, absent_since, hostname, ip, mac, serial_number, vendor_name, model,
              device_type, management_status, metadata, canonical_device_uid, resolution_error, updated_at)
            SELECT x.id, ${source}, ${instance}, ${partition}, ${collection}, ${collectionId}::uuid,
              x.source_record_id, x.source_integration_id, true, ${observedAt}::timestamptz,
              ${observedAt}::timestamptz, NULL, x.hostname, x.ip, x.mac, x.serial_number, x.vendor_name,
              x.model, x.device_type, x.management_status, coalesce(x.metadata, '{}'::jsonb),
              x.canonical_device_uid, x.resolution_error, ${now}::timestamptz
              FROM jsonb_to_recordset(${JSON.stringify(payload)}::jsonb) AS x(id uuid, source_record_id text,
                source_integration_id text, hostname text, ip text, mac text, serial_number text,
                vendor_name text, model text, device_type text, management_status text, metadata jsonb,
                canonical_device_uid text, resolution_error text)
            ON CONFLICT (source, source_instance, partition, coalesce(collection, ''), source_object_id)
            DO UPDATE SET collection_id = EXCLUDED.collection_id, present = true,
              last_observed_at = EXCLUDED.last_observed_at, absent_since = NULL,
              source_integration_id = EXCLUDED.source_integration_id, hostname = EXCLUDED.hostname,
              ip = EXCLUDED.ip, mac = EXCLUDED.mac, serial_number = EXCLUDED.serial_number,
              vendor_name = EXCLUDED.vendor_name, model = EXCLUDED.model,
              device_type = EXCLUDED.device_type, management_status = EXCLUDED.management_status,
              metadata = EXCLUDED.metadata, canonical_device_uid = EXCLUDED.canonical_device_uid,
              resolution_error = EXCLUDED.resolution_error, updated_at = EXCLUDED.updated_at`,
      );
    }
    const absent = await tx.query(
      sql`UPDATE source_inventory_records
             SET present = false, absent_since = coalesce(absent_since, ${observedAt}::timestamptz),
                 collection_id = ${collectionId}::uuid, updated_at = ${now}
           WHERE source = ${source} AND source_instance = ${instance} AND partition = ${partition}
             AND coalesce(collection, '') = ${collection ?? ""} AND collection_id <> ${collectionId}::uuid`,
    );
    const coll = (await tx.one<CollectionRow>(
      sql`UPDATE source_inventory_collections SET absent_count = ${absent.rowCount}
           WHERE id = ${collectionId}::uuid RETURNING *`,
    )) as CollectionRow;
    return {
      source,
      source_instance: instance,
      partition,
      collection: collectionJson(coll),
      results: records.map((r) => ({
        source_record_id: r.source_record_id,
        canonical_device_uid: uidByRecord.get(r.source_record_id) ?? null,
        error: errorsByRecord.get(r.source_record_id) ?? null,
      })),
    };
  });
}

interface Cursor {
  collection: string;
  id: string;
  instance: string;
  last_observed_at: string;
  partition: string;
  presence: string;
  source: string;
  v: 1;
}

function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify(c), "utf8").toString("base64url");
}

function decodeCursor(s: string): Cursor {
  if (s.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(s)) throw bad("invalid_cursor", "cursor");
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(s, "base64url").toString("utf8"));
  } catch {
    throw bad("invalid_cursor", "cursor");
  }
  if (!isObject(v)) throw bad("invalid_cursor", "cursor");
  const keys = Object.keys(v).sort();
  if (keys.length !== CURSOR_KEYS.length || keys.some((k, i) => k !== CURSOR_KEYS[i]))
    throw bad("invalid_cursor", "cursor");
  if (v.v !== 1) throw bad("invalid_cursor", "cursor");
  for (const k of CURSOR_KEYS)
    if (k !== "v" && typeof v[k] !== "string") throw bad("invalid_cursor", "cursor");
  if (Number.isNaN(new Date(v.last_observed_at as string).getTime())) throw bad("invalid_cursor", "cursor");
  return v as unknown as Cursor;
}

interface RecordRow {
  id: string;
  source: string;
  source_instance: string;
  source_object_id: string;
  source_integration_id: string | null;
  collection_id: string;
  present: boolean;
  first_observed_at: Date;
  last_observed_at: Date;
  absent_since: Date | null;
  hostname: string | null;
  ip: string | null;
  mac: string | null;
  serial_number: string | null;
  vendor_name: string | null;
  model: string | null;
  device_type: string | null;
  partition: string;
  management_status: string | null;
  metadata: Record<string, unknown>;
  canonical_device_uid: string | null;
  resolution_error: string | null;
  d_hostname: string | null;
  d_ip: string | null;
  d_mac: string | null;
  d_vendor_name: string | null;
  d_model: string | null;
  d_discovery_sources: string[] | null;
  d_uid: string | null;
  [k: string]: unknown;
}

/** `GET /api/v1/source-inventory`: the current snapshot of one source instance, keyset-paginated. */
export async function readSnapshot(ctx: AppContext, actor: Actor, query: Record<string, unknown>) {
  if (!hasPermission(actor, "devices.view")) {
    throw new ForbiddenError("You do not have permission to view source inventory");
  }
  for (const k of Object.keys(query)) if (!ALLOWED_PARAMS.has(k)) throw bad("unknown_query_parameter", k);
  const get = (
    k: "source" | "instance" | "partition" | "presence" | "collection" | "limit" | "cursor",
  ): string | undefined => {
    const v = query[k];
    if (v === undefined) return undefined;
    if (typeof v !== "string") throw bad(`invalid_${k}` as const, k);
    return v.trim();
  };
  const source = get("source")?.toLowerCase();
  if (!source) throw bad("source_required", "source");
  if (!SOURCE_RE.test(source)) throw bad("invalid_identifier", "source");
  const instance = get("instance");
  if (!instance) throw bad("instance_required", "instance");
  if (!INSTANCE_RE.test(instance)) throw bad("invalid_identifier", "instance");
  const partition = get("partition") || "default";
  if (!INSTANCE_RE.test(partition)) throw bad("invalid_identifier", "partition");
  const presence = get("presence") || "present";
  if (!["present", "absent", "all"].includes(presence)) throw bad("invalid_presence", "presence");
  const collection = get("collection") || null;
  if (collection !== null && !COLLECTION_RE.test(collection)) throw bad("invalid_identifier", "collection");
  const limitText = get("limit");
  let limit = 100;
  if (limitText !== undefined && limitText !== "") {
    if (!/^[0-9]+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 500)
      throw bad("invalid_limit", "limit");
    limit = Number(limitText);
  }
  const cursorText = get("cursor");
  const cursor = cursorText ? decodeCursor(cursorText) : null;
  if (actor.partitions !== null && !actor.partitions.includes(partition)) {
    throw new NotFoundError("No current source inventory exists", { code: "source_snapshot_not_found" });
  }

  const run = async () => {
    const coll = await ctx.db.one<CollectionRow>(
      sql`SELECT * FROM source_inventory_collections
           WHERE source = ${source} AND source_instance = ${instance} AND partition = ${partition}
             AND coalesce(collection, '') = ${collection ?? ""} AND is_current`,
    );
    if (!coll)
      throw new NotFoundError("No current source inventory exists", { code: "source_snapshot_not_found" });
    if (cursor) {
      if (
        cursor.source !== source ||
        cursor.instance !== instance ||
        cursor.partition !== partition ||
        cursor.presence !== presence
      ) {
        throw bad("cursor_query_mismatch", "cursor");
      }
      if (cursor.collection !== coll.id) {
        throw new ConflictError("The current source inventory changed; restart pagination", {
          code: "source_collection_changed",
        });
      }
    }
    const where: SqlFragment[] = [
      sql`r.source = ${source}`,
      sql`r.source_instance = ${instance}`,
      sql`r.partition = ${partition}`,
      sql`coalesce(r.collection, '') = ${collection ?? ""}`,
      sql`r.collection_id = ${coll.id}::uuid`,
    ];
    if (presence === "present") where.push(sql`r.present`);
    if (presence === "absent") where.push(sql`NOT r.present`);
    if (cursor) {
      const lao = new Date(cursor.last_observed_at);
      where.push(
        sql`(r.last_observed_at < ${lao} OR (r.last_observed_at = ${lao} AND r.id > ${cursor.id}::uuid))`,
      );
    }
    const rows = await ctx.db.many<RecordRow>(
      sql`SELECT r.*, d.uid AS d_uid, d.hostname AS d_hostname, d.ip AS d_ip, d.mac AS d_mac,
                 d.vendor_name AS d_vendor_name, d.model AS d_model, d.discovery_sources AS d_discovery_sources
            FROM source_inventory_records r
            LEFT JOIN devices d ON d.uid = r.canonical_device_uid
           WHERE ${join(where, " AND ")}
           ORDER BY r.last_observed_at DESC, r.id ASC
           LIMIT ${limit + 1}`,
    );
    // The snapshot must not have changed while we read it.
    const still = await ctx.db.one<{ id: string }>(
      sql`SELECT id FROM source_inventory_collections WHERE id = ${coll.id}::uuid AND is_current`,
    );
    if (!still) {
      throw new ConflictError("The current source inventory changed; restart pagination", {
        code: "source_collection_changed",
      });
    }
    return { coll, rows };
  };
  const { coll, rows } = await run();
  const plugin = await findPlugin(ctx.db, source, instance, partition);
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    api_version: "v1",
    schema_version: "netmon.source_inventory.v1",
    source,
    source_instance: instance,
    partition,
    // The plugin that reports this source instance (null for snapshots from before plugins).
    plugin: plugin ? { id: plugin.id, name: plugin.name, status: plugin.status } : null,
    collection: collectionJson(coll),
    rows: page.map((r) => ({
      canonical_device_uid: r.canonical_device_uid,
      source: r.source,
      source_instance: r.source_instance,
      source_object_id: r.source_object_id,
      source_integration_id: r.source_integration_id,
      collection_id: r.collection_id,
      present: r.present,
      first_observed_at: r.first_observed_at.toISOString(),
      last_observed_at: r.last_observed_at.toISOString(),
      absent_since: r.absent_since ? r.absent_since.toISOString() : null,
      hostname: r.hostname,
      ip: r.ip,
      mac: r.mac,
      serial_number: r.serial_number,
      vendor_name: r.vendor_name,
      model: r.model,
      device_type: r.device_type,
      partition: r.partition,
      management_status: r.management_status,
      metadata: r.metadata,
      resolution_error: r.resolution_error,
      canonical: r.d_uid
        ? {
            hostname: r.d_hostname,
            ip: r.d_ip,
            mac: r.d_mac,
            vendor_name: r.d_vendor_name,
            model: r.d_model,
            discovery_sources: r.d_discovery_sources ?? [],
          }
        : null,
    })),
    pagination: {
      limit,
      has_more: hasMore,
      next_cursor:
        hasMore && last
          ? encodeCursor({
              collection: coll.id,
              id: last.id,
              instance,
              last_observed_at: last.last_observed_at.toISOString(),
              partition,
              presence,
              source,
              v: 1,
            })
          : null,
    },
  };
}
