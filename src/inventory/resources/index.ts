/**
 * JSON:API v2 declarations of the inventory domain (spec 2.4, 4.1; reference §3.2):
 * devices, device groups, device cleanup settings, interfaces, interface classification rules
 * and interface settings. Reads need devices.view and respect `actor.partitions`.
 */
import type { Actor } from "../../access/actor.ts";
import type { AttributeDecl, QueryHelpers } from "../../jsonapi/define.ts";
import { defineResource } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { ValidationError } from "../../kernel/errors.ts";
import { type SqlFragment, sql } from "../../storage/sql.ts";
import { refreshGroupCounts } from "../groups.ts";

const VIEW = { permission: "devices.view" } as const;
const CREATE = { permission: "devices.create" } as const;
const UPDATE = { permission: "devices.update" } as const;
const DELETE = { permission: "devices.delete" } as const;
const SETTINGS = { permission: "settings.jobs.manage" } as const;

/** Read-only attribute that is not in the spec's filter schema. */
const ro = (type: AttributeDecl["type"], extra: Partial<AttributeDecl> = {}): AttributeDecl => ({
  type,
  filterable: false,
  ...extra,
});
/** Filterable attribute (spec 2.4 lists them per resource). */
const f = (type: AttributeDecl["type"], extra: Partial<AttributeDecl> = {}): AttributeDecl => ({
  type,
  filterable: true,
  ...extra,
});

function partitionScope(q: QueryHelpers): SqlFragment | null {
  const actor: Actor | null = q.actor;
  if (!actor || actor.partitions === null) return null;
  return sql`${q.col("partition")} = ANY(${[...actor.partitions]}::text[])`;
}

const includeDeleted = {
  include_deleted: {
    type: "boolean" as const,
    description: "Also return soft-deleted devices (default false)",
    where: (v: unknown, q: QueryHelpers) => (v === true ? null : sql`${q.col("deleted_at")} IS NULL`),
  },
};

export const deviceResource = registerResource(
  defineResource({
    type: "device",
    base: "/devices",
    table: "devices",
    tag: "device",
    description: "Devices (OCSF device objects). Created by ingestion, not through this API.",
    id: { column: "uid", type: "string" },
    attributes: {
      uid: ro("string"),
      partition: ro("string"),
      type_id: ro("integer"),
      type: f("string"),
      name: ro("string"),
      hostname: f("string"),
      ip: ro("string"),
      mac: ro("string"),
      uid_alt: f("string"),
      vendor_name: f("string"),
      model: f("string"),
      domain: ro("string"),
      zone: f("string"),
      subnet_uid: ro("string"),
      vlan_uid: ro("string"),
      region: f("string"),
      first_seen_time: f("datetime"),
      last_seen_time: ro("datetime", { sortable: true }),
      created_time: ro("datetime"),
      modified_time: ro("datetime"),
      risk_level_id: ro("integer"),
      risk_level: ro("string"),
      risk_score: ro("integer"),
      is_managed: ro("boolean"),
      is_compliant: f("boolean"),
      is_trusted: ro("boolean"),
      is_available: f("boolean"),
      availability_changed_at: ro("datetime"),
      availability_reason: ro("string", { filterable: false }),
      os: ro("object"),
      hw_info: ro("object"),
      network_interfaces: ro("array", { items: "object" }),
      owner: f("object", { description: "OCSF User object" }),
      org: ro("object"),
      groups: ro("array", { items: "object" }),
      agent_list: ro("array", { items: "object" }),
      gateway_id: ro("string"),
      agent_id: ro("string"),
      management_device_id: ro("string"),
      discovery_sources: ro("array", { items: "string" }),
      deleted_at: ro("datetime"),
      deleted_by: ro("string"),
      deleted_reason: ro("string"),
      tags: ro("object"),
      metadata: ro("object"),
      group_id: ro("uuid", {
        update: true,
        description:
          "The device group (writable: the one member a client sets; monitoring profiles follow it)",
      }),
      seq: ro("integer", { public: false }),
    },
    relationships: {
      group: { type: "device-group", kind: "belongsTo", column: "group_id" },
      interfaces: { type: "interface", kind: "hasMany", foreignColumn: "device_id", localColumn: "uid" },
    },
    defaultSort: "seq",
    pagination: { styles: ["keyset", "offset"], defaultLimit: 100, maxLimit: 5000 },
    readLookup: { query: "uid", attribute: "uid" },
    listParams: includeDeleted,
    readParams: includeDeleted,
    scope: partitionScope,
    policies: { read: { access: VIEW } },
    actions: {
      update: {
        access: UPDATE,
        summary:
          "Move a device into a device group (group_id; null takes it out); everything else comes from ingestion",
      },
    },
    hooks: {
      beforeUpdate: async (c, _actor, _before, input) => {
        if (typeof input.group_id === "string") {
          const found = await c.tx.one(sql`SELECT 1 FROM device_groups WHERE id = ${input.group_id}::uuid`);
          if (!found) {
            throw new ValidationError(
              `group_id '${input.group_id}' does not reference an existing device group`,
              {
                source: { pointer: "/data/attributes/group_id" },
              },
            );
          }
        }
      },
      afterWrite: async (c, _actor, event) => {
        const ids = [event.before?.group_id, event.record?.group_id].filter(
          (g): g is string => typeof g === "string",
        );
        await refreshGroupCounts(c.tx, ids);
      },
    },
  }),
);

export const deviceGroupResource = registerResource(
  defineResource({
    type: "device-group",
    base: "/device-groups",
    table: "device_groups",
    tag: "device-group",
    description: "Device groups, a tree through parent_id",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      name: {
        type: "string",
        required: true,
        update: true,
        nullable: false,
        maxLength: 200,
        filterable: false,
      },
      desc: { type: "string", create: true, update: true, maxLength: 2000, filterable: false },
      type: {
        type: "enum",
        values: ["location", "department", "environment", "function", "custom"],
        default: "custom",
        create: true,
        update: true,
        nullable: false,
        filterable: false,
      },
      parent_id: { type: "uuid", create: true, update: true, filterable: true },
      metadata: {
        type: "object",
        default: {},
        create: true,
        update: true,
        nullable: false,
        filterable: false,
      },
      device_count: ro("integer"),
      inserted_at: ro("datetime", { sortable: true }),
      updated_at: ro("datetime", { sortable: true }),
    },
    relationships: {
      parent: { type: "device-group", kind: "belongsTo", column: "parent_id" },
      children: { type: "device-group", kind: "hasMany", foreignColumn: "parent_id" },
    },
    defaultSort: "inserted_at",
    pagination: { styles: ["offset", "keyset"], defaultLimit: 100, maxLimit: 1000 },
    collections: [
      {
        name: "root_groups",
        path: "/roots",
        summary: "Groups without a parent (no page)",
        paginate: false,
        where: ({ col }) => sql`${col("parent_id")} IS NULL`,
      },
      {
        name: "by_type",
        path: "/by-type/:type",
        summary: "Groups of one type",
        where: ({ col, params }) => sql`${col("type")} = ${params.type}`,
      },
    ],
    policies: { read: { access: VIEW } },
    actions: {
      create: { access: CREATE },
      update: { access: UPDATE },
      delete: { access: DELETE },
    },
    hooks: {
      // The tree must stay a tree: a group may not become its own ancestor.
      afterWrite: async (c, _actor, event) => {
        if (!event.record || event.record.parent_id == null) return;
        const cycle = await c.tx.one(
          sql`WITH RECURSIVE up(id, parent_id, depth) AS (
                SELECT id, parent_id, 1 FROM device_groups WHERE id = ${event.record.parent_id as string}::uuid
                UNION ALL
                SELECT g.id, g.parent_id, up.depth + 1 FROM device_groups g JOIN up ON g.id = up.parent_id
                 WHERE up.depth < 1000)
              SELECT 1 AS hit FROM up WHERE id = ${event.record.id}::uuid LIMIT 1`,
        );
        if (cycle) {
          throw new ValidationError("parent_id would make the group its own ancestor", {
            code: "invalid_parent",
            source: { pointer: "/data/attributes/parent_id" },
          });
        }
      },
    },
    touchColumn: "updated_at",
  }),
);

export const cleanupSettingsResource = registerResource(
  defineResource({
    type: "device_cleanup_settings",
    base: "/device-cleanup-settings",
    table: "device_cleanup_settings",
    tag: "device_cleanup_settings",
    description:
      "The singleton that drives the purge of soft-deleted devices. GET on the base path answers the singleton.",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      retention_days: f("integer", {
        create: true,
        update: true,
        minimum: 1,
        maximum: 3650,
        nullable: false,
      }),
      cleanup_interval_minutes: f("integer", {
        create: true,
        update: true,
        minimum: 5,
        maximum: 43200,
        nullable: false,
      }),
      batch_size: f("integer", { create: true, update: true, minimum: 100, maximum: 50000, nullable: false }),
      enabled: ro("boolean", { create: true, update: true, nullable: false }),
      last_run_at: ro("datetime"),
      last_purged_count: ro("integer"),
      inserted_at: ro("datetime"),
      updated_at: ro("datetime"),
    },
    // The singleton read is the plain GET on the base path (src/inventory/resources/singleton.ts).
    routes: { index: false, read: true },
    policies: { read: { access: VIEW } },
    actions: {
      create: {
        access: SETTINGS,
        summary: "Create the singleton (or replace the given values when it exists)",
        handler: async (c, _actor, _record, input) => {
          const has = (k: string) => input[k] !== undefined;
          const row = await c.tx.one<{ id: string }>(
            sql`INSERT INTO device_cleanup_settings AS s (key, retention_days, cleanup_interval_minutes, batch_size, enabled)
                VALUES ('default', coalesce(${input.retention_days ?? null}::int, 30),
                  coalesce(${input.cleanup_interval_minutes ?? null}::int, 1440),
                  coalesce(${input.batch_size ?? null}::int, 1000), coalesce(${input.enabled ?? null}::boolean, true))
                ON CONFLICT (key) DO UPDATE SET
                  retention_days = CASE WHEN ${has("retention_days")} THEN EXCLUDED.retention_days ELSE s.retention_days END,
                  cleanup_interval_minutes = CASE WHEN ${has("cleanup_interval_minutes")} THEN EXCLUDED.cleanup_interval_minutes ELSE s.cleanup_interval_minutes END,
                  batch_size = CASE WHEN ${has("batch_size")} THEN EXCLUDED.batch_size ELSE s.batch_size END,
                  enabled = CASE WHEN ${has("enabled")} THEN EXCLUDED.enabled ELSE s.enabled END,
                  updated_at = now()
                RETURNING id`,
          );
          return { id: (row as { id: string }).id };
        },
      },
      update: { access: SETTINGS },
    },
    touchColumn: "updated_at",
  }),
);

export const interfaceResource = registerResource(
  defineResource({
    type: "interface",
    base: "/interfaces",
    table: "interfaces",
    tag: "interface",
    description: "Discovered network interfaces",
    id: { column: "id", type: "uuid" },
    attributes: {
      agent_id: f("string"),
      classification_meta: f("object"),
      classification_source: f("string"),
      created_at: f("datetime"),
      device_id: f("string"),
      device_ip: f("string"),
      duplex: f("string"),
      gateway_id: f("string"),
      if_admin_status: f("integer"),
      if_alias: f("string"),
      if_descr: f("string"),
      if_index: f("integer", { description: "SNMP ifIndex" }),
      if_name: f("string"),
      if_oper_status: f("integer"),
      if_phys_address: f("string"),
      if_speed: f("integer"),
      if_type: f("integer"),
      if_type_name: f("string"),
      interface_kind: f("string"),
      interface_uid: f("string"),
      ip_addresses: ro("array", { items: "string" }),
      metadata: f("object"),
      mtu: f("integer"),
      partition: f("string"),
      speed_bps: f("integer", { description: "bits per second" }),
      timestamp: f("datetime"),
    },
    relationships: {
      device: { type: "device", kind: "belongsTo", column: "device_id", targetColumn: "uid" },
    },
    defaultSort: "-timestamp",
    pagination: { styles: ["offset", "keyset"], defaultLimit: 100, maxLimit: 1000 },
    routes: { index: true, read: false },
    scope: partitionScope,
    policies: { read: { access: VIEW } },
  }),
);

export const classificationRuleResource = registerResource(
  defineResource({
    type: "interface_classification_rule",
    base: "/interface-classification-rules",
    table: "interface_classification_rules",
    tag: "interface_classification_rule",
    description: "Rules that classify interfaces (regex patterns over ifName, sysDescr, model)",
    id: { column: "id", type: "uuid" },
    attributes: {
      name: f("string"),
      enabled: f("boolean"),
      priority: ro("integer", { sortable: true }),
      if_name_pattern: f("string"),
      sys_descr_pattern: f("string"),
      model_pattern: f("string"),
      vendor_pattern: ro("string"),
      interface_kind: ro("string"),
      classification: ro("string"),
      metadata: f("object"),
      inserted_at: ro("datetime"),
      updated_at: ro("datetime"),
    },
    defaultSort: "priority",
    pagination: { styles: ["offset", "keyset"], defaultLimit: 100, maxLimit: 1000 },
    policies: { read: { access: VIEW } },
  }),
);

const THRESHOLD_COMPARISONS = ["gt", "lt", "gte", "lte", "eq"] as const;
const THRESHOLD_METRICS = ["bandwidth_in", "bandwidth_out", "utilization", "errors"] as const;
const SEVERITIES = ["info", "warning", "critical", "emergency"] as const;
const settingAttr = (type: AttributeDecl["type"], extra: Partial<AttributeDecl> = {}): AttributeDecl => ({
  type,
  filterable: false,
  create: true,
  update: true,
  ...extra,
});

export const interfaceSettingResource = registerResource(
  defineResource({
    type: "interface_setting",
    base: "/interface-settings",
    table: "interface_settings",
    tag: "interface_setting",
    description: "Per-interface settings (favourite, metrics collection, thresholds)",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      device_id: settingAttr("string", { required: true, update: false, maxLength: 200 }),
      interface_uid: settingAttr("string", { required: true, update: false, maxLength: 500 }),
      favorited: settingAttr("boolean", { nullable: false }),
      metrics_enabled: settingAttr("boolean", { nullable: false }),
      metrics_selected: settingAttr("array", { items: "string", nullable: false }),
      metric_thresholds: settingAttr("object", { nullable: false }),
      metrics_interval_seconds: settingAttr("integer", { minimum: 1, maximum: 86400, nullable: false }),
      threshold_enabled: settingAttr("boolean", { nullable: false }),
      threshold_value: settingAttr("float"),
      threshold_comparison: settingAttr("enum", { values: THRESHOLD_COMPARISONS }),
      threshold_metric: settingAttr("enum", { values: THRESHOLD_METRICS }),
      threshold_duration_seconds: settingAttr("integer", { minimum: 0, nullable: false }),
      threshold_severity: settingAttr("enum", { values: SEVERITIES, nullable: false }),
      tags: settingAttr("array", { items: "string", nullable: false }),
      metric_groups: settingAttr("array", { items: "object", nullable: false }),
      inserted_at: ro("datetime"),
      updated_at: ro("datetime", { sortable: true }),
    },
    defaultSort: "-updated_at",
    pagination: { styles: ["offset", "keyset"], defaultLimit: 100, maxLimit: 1000 },
    routes: { index: true, read: false },
    collections: [
      {
        name: "by_interface",
        path: "/by-interface/:device_id/:interface_uid",
        // The settings of one interface: a single resource document, 404 when none (issue 20).
        summary: "Settings of one interface (404 when it has none)",
        single: true,
        where: ({ col, params }) =>
          sql`${col("device_id")} = ${params.device_id} AND ${col("interface_uid")} = ${params.interface_uid}`,
      },
    ],
    policies: { read: { access: VIEW } },
    actions: {
      create: {
        access: UPDATE,
        summary: "Create or update the settings of an interface (device_id, interface_uid)",
        status: 200,
        handler: async (c, _actor, _record, input) => {
          const cols = Object.keys(input).filter((k) => k !== "device_id" && k !== "interface_uid");
          const json = JSON.stringify(input);
          const row = await c.tx.one<{ id: string }>(
            sql`INSERT INTO interface_settings AS s (device_id, interface_uid, favorited, metrics_enabled,
                  metrics_selected, metric_thresholds, metrics_interval_seconds, threshold_enabled,
                  threshold_value, threshold_comparison, threshold_metric, threshold_duration_seconds,
                  threshold_severity, tags, metric_groups)
                SELECT x.device_id, x.interface_uid, coalesce(x.favorited, false), coalesce(x.metrics_enabled, false),
                  coalesce(x.metrics_selected, '{}'), coalesce(x.metric_thresholds, '{}'::jsonb),
                  coalesce(x.metrics_interval_seconds, 60), coalesce(x.threshold_enabled, false),
                  x.threshold_value, x.threshold_comparison, x.threshold_metric,
                  coalesce(x.threshold_duration_seconds, 0), coalesce(x.threshold_severity, 'warning'),
                  coalesce(x.tags, '{}'), coalesce(x.metric_groups, '[]'::jsonb)
                  FROM jsonb_to_record(${json}::jsonb) AS x(device_id text, interface_uid text, favorited boolean,
                    metrics_enabled boolean, metrics_selected text[], metric_thresholds jsonb,
                    metrics_interval_seconds integer, threshold_enabled boolean, threshold_value double precision,
                    threshold_comparison text, threshold_metric text, threshold_duration_seconds integer,
                    threshold_severity text, tags text[], metric_groups jsonb)
                ON CONFLICT (device_id, interface_uid) DO UPDATE SET
                  favorited = CASE WHEN ${cols.includes("favorited")} THEN EXCLUDED.favorited ELSE s.favorited END,
                  metrics_enabled = CASE WHEN ${cols.includes("metrics_enabled")} THEN EXCLUDED.metrics_enabled ELSE s.metrics_enabled END,
                  metrics_selected = CASE WHEN ${cols.includes("metrics_selected")} THEN EXCLUDED.metrics_selected ELSE s.metrics_selected END,
                  metric_thresholds = CASE WHEN ${cols.includes("metric_thresholds")} THEN EXCLUDED.metric_thresholds ELSE s.metric_thresholds END,
                  metrics_interval_seconds = CASE WHEN ${cols.includes("metrics_interval_seconds")} THEN EXCLUDED.metrics_interval_seconds ELSE s.metrics_interval_seconds END,
                  threshold_enabled = CASE WHEN ${cols.includes("threshold_enabled")} THEN EXCLUDED.threshold_enabled ELSE s.threshold_enabled END,
                  threshold_value = CASE WHEN ${cols.includes("threshold_value")} THEN EXCLUDED.threshold_value ELSE s.threshold_value END,
                  threshold_comparison = CASE WHEN ${cols.includes("threshold_comparison")} THEN EXCLUDED.threshold_comparison ELSE s.threshold_comparison END,
                  threshold_metric = CASE WHEN ${cols.includes("threshold_metric")} THEN EXCLUDED.threshold_metric ELSE s.threshold_metric END,
                  threshold_duration_seconds = CASE WHEN ${cols.includes("threshold_duration_seconds")} THEN EXCLUDED.threshold_duration_seconds ELSE s.threshold_duration_seconds END,
                  threshold_severity = CASE WHEN ${cols.includes("threshold_severity")} THEN EXCLUDED.threshold_severity ELSE s.threshold_severity END,
                  tags = CASE WHEN ${cols.includes("tags")} THEN EXCLUDED.tags ELSE s.tags END,
                  metric_groups = CASE WHEN ${cols.includes("metric_groups")} THEN EXCLUDED.metric_groups ELSE s.metric_groups END,
                  updated_at = now()
                RETURNING id`,
          );
          return { id: (row as { id: string }).id };
        },
      },
      update: { access: UPDATE },
    },
    touchColumn: "updated_at",
  }),
);

import "./plugins.ts";
