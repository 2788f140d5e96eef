import { createHash } from "node:crypto";

/**
 * The ONE declaration of every SRQL entity. The planner, the compiler, the `/api/srql/catalog`
 * document and the `viz` hints are all derived from it; nothing re-declares a field.
 * Table and column names here are spliced with `ident()` (they come from code, never requests).
 */

export type FieldKind = "text" | "int" | "float" | "bool" | "time" | "ip" | "uuid" | "text_array" | "json";

export interface FieldDecl {
  name: string;
  column: string;
  kind: FieldKind;
  /** False when the column is NOT NULL (lets keyset cursors use a row comparison). */
  nullable: boolean;
  /** May be used in `stats … by` / `by:` / `group:`. */
  groupable: boolean;
  /** Array fields: how a list value matches (`all` = contains-all, `any` = overlaps). */
  listMode?: "all" | "any";
  /** Array held in a jsonb column (agents.capabilities) instead of text[]. */
  jsonArray?: boolean;
  /** Fixed JSON sub-path (e.g. `os.name` → column os, path [name]). */
  jsonPath?: string[];
  /** A computed boolean (SQL from code), e.g. capacity_forecasts has_exhaustion. */
  expr?: string;
  /** Value normaliser applied before binding (e.g. MAC addresses). */
  normalize?: "mac";
  /**
   * Equality ignores case (names people type: hostnames, vendors, models). Scalar values match
   * with ILIKE (the hostname trigram index serves it), lists with lower() on both sides.
   */
  caseInsensitive?: boolean;
  /** Accepted but without effect (interfaces `latest`: the table holds one row per interface). */
  noop?: boolean;
}

export interface DownsampleDecl {
  valueFields: string[];
  defaultValue: string;
  seriesFields: string[];
  defaultSeries: string | null;
  defaultAgg: "avg" | "min" | "max" | "sum" | "count" | "rate";
  defaultBucket: string;
}

export type PartitionRule =
  /** Rows carry a partition column. */
  | { column: string }
  /** Rows point at a device; the device's partition decides. */
  | { deviceColumn: string }
  /** Not partitioned data (control-plane objects visible to any caller of the entity). */
  | null;

export interface EntityDecl {
  name: string;
  label: string;
  aliases: string[];
  table: string;
  permission: string;
  /** Field the `time:` token applies to (null: the entity has no time dimension). */
  timeField: string | null;
  defaultSort: { field: string; direction: "asc" | "desc" };
  /** Unique, NOT NULL column appended to every ordering (keyset cursor tie-breaker). */
  tieBreaker: string;
  defaultTime: string | null;
  defaultFilterField: string;
  partition: PartitionRule;
  /** Is a metrics entity: stats/downsample may cover up to 395 days instead of 90. */
  longRange: boolean;
  fields: Map<string, FieldDecl>;
  fieldAliases: Map<string, string>;
  /** Columns whose dynamic keys are reachable as `<prefix>.<key>`. */
  jsonPrefixes: Map<string, string>;
  /** JSON prefixes whose keys may be grouped by (`tags.<key>`). */
  groupableJsonPrefixes: Set<string>;
  /** Columns returned for each row, in order. */
  resultColumns: string[];
  downsample: DownsampleDecl | null;
  /** Devices: soft-deleted rows hidden unless `include_deleted:true`. */
  softDeleteColumn: string | null;
  enums: Record<string, string[]>;
  /** How messages name the entity ("composite results"); default its name. */
  noun: string;
  /** Stats group fields when the entity has its own stats grammar (advertised in the catalog). */
  statsFields: string[] | null;
  /** Devices: `composite.<slug>` / `composite.<slug>.status` read the device's latest composite result. */
  compositeFilters: boolean;
}

interface EntitySpec {
  name: string;
  label: string;
  aliases?: string[];
  table: string;
  permission: string;
  timeField: string | null;
  defaultSort: [string, "asc" | "desc"];
  tieBreaker: string;
  defaultTime?: string | null;
  defaultFilterField: string;
  partition: PartitionRule;
  longRange?: boolean;
  text?: string[];
  int?: string[];
  float?: string[];
  bool?: string[];
  time?: string[];
  ip?: string[];
  uuid?: string[];
  array?: string[];
  anyArray?: string[];
  jsonArray?: string[];
  json?: string[];
  /** Columns declared NOT NULL in the migration. */
  notNull?: string[];
  groupable?: string[];
  fieldAliases?: Record<string, string>;
  jsonPrefixes?: string[];
  groupableJsonPrefixes?: string[];
  jsonPaths?: Record<string, [string, ...string[]]>;
  computed?: Record<string, string>;
  noop?: string[];
  normalize?: Record<string, "mac">;
  /** Text fields whose equality ignores case. */
  caseInsensitive?: string[];
  downsample?: DownsampleDecl;
  softDeleteColumn?: string;
  enums?: Record<string, string[]>;
  noun?: string;
  statsFields?: string[];
  compositeFilters?: boolean;
}

function define(spec: EntitySpec): EntityDecl {
  const fields = new Map<string, FieldDecl>();
  const notNull = new Set(spec.notNull ?? []);
  const groupable = new Set(spec.groupable ?? []);
  const resultColumns: string[] = [];
  const add = (name: string, kind: FieldKind, extra: Partial<FieldDecl> = {}) => {
    if (fields.has(name)) throw new Error(`srql catalog: ${spec.name}.${name} declared twice`);
    fields.set(name, {
      name,
      column: name,
      kind,
      nullable: !notNull.has(name),
      groupable: groupable.has(name),
      ...extra,
    });
    if (!extra.expr && !extra.noop && !extra.jsonPath) resultColumns.push(extra.column ?? name);
  };
  for (const n of spec.uuid ?? []) add(n, "uuid");
  const ci = new Set(spec.caseInsensitive ?? []);
  for (const n of spec.text ?? [])
    add(n, "text", {
      ...(spec.normalize?.[n] ? { normalize: spec.normalize[n] } : {}),
      ...(ci.has(n) ? { caseInsensitive: true } : {}),
    });
  for (const n of ci) {
    if (fields.get(n)?.kind !== "text")
      throw new Error(`srql catalog: ${spec.name}.${n} is case-insensitive but not a text field`);
  }
  for (const n of spec.ip ?? []) add(n, "ip");
  for (const n of spec.int ?? []) add(n, "int");
  for (const n of spec.float ?? []) add(n, "float");
  for (const n of spec.bool ?? []) add(n, "bool");
  for (const n of spec.time ?? []) add(n, "time");
  for (const n of spec.array ?? []) add(n, "text_array", { listMode: "all" });
  for (const n of spec.anyArray ?? []) add(n, "text_array", { listMode: "any" });
  for (const n of spec.jsonArray ?? []) add(n, "text_array", { listMode: "all", jsonArray: true });
  for (const n of spec.json ?? []) add(n, "json");
  for (const [n, [column, ...path]] of Object.entries(spec.jsonPaths ?? {})) {
    add(n, "text", { column, jsonPath: path });
  }
  for (const [n, expr] of Object.entries(spec.computed ?? {})) add(n, "bool", { expr, nullable: false });
  for (const n of spec.noop ?? []) add(n, "bool", { noop: true });
  for (const g of groupable) {
    if (!fields.has(g)) throw new Error(`srql catalog: ${spec.name} groupable field ${g} is not declared`);
  }
  const fieldAliases = new Map(Object.entries(spec.fieldAliases ?? {}));
  for (const [a, target] of fieldAliases) {
    if (!fields.has(target)) throw new Error(`srql catalog: ${spec.name} alias ${a} → unknown ${target}`);
  }
  const entity: EntityDecl = {
    name: spec.name,
    label: spec.label,
    aliases: spec.aliases ?? [],
    table: spec.table,
    permission: spec.permission,
    timeField: spec.timeField,
    defaultSort: { field: spec.defaultSort[0], direction: spec.defaultSort[1] },
    tieBreaker: spec.tieBreaker,
    defaultTime: spec.defaultTime ?? null,
    defaultFilterField: spec.defaultFilterField,
    partition: spec.partition,
    longRange: spec.longRange ?? false,
    fields,
    fieldAliases,
    jsonPrefixes: new Map((spec.jsonPrefixes ?? []).map((p) => [p, p])),
    groupableJsonPrefixes: new Set(spec.groupableJsonPrefixes ?? []),
    resultColumns,
    downsample: spec.downsample ?? null,
    softDeleteColumn: spec.softDeleteColumn ?? null,
    enums: spec.enums ?? {},
    noun: spec.noun ?? spec.name,
    statsFields: spec.statsFields ?? null,
    compositeFilters: spec.compositeFilters ?? false,
  };
  for (const f of [spec.timeField, spec.defaultSort[0], spec.tieBreaker, spec.defaultFilterField]) {
    if (f !== null && !fields.has(f)) throw new Error(`srql catalog: ${spec.name} names unknown field ${f}`);
  }
  const tb = fields.get(spec.tieBreaker) as FieldDecl;
  if (tb.nullable) throw new Error(`srql catalog: ${spec.name} tie-breaker ${tb.name} must be NOT NULL`);
  if (spec.downsample) {
    for (const f of [...spec.downsample.valueFields, ...spec.downsample.seriesFields]) {
      if (!fields.has(f)) throw new Error(`srql catalog: ${spec.name} downsample names unknown field ${f}`);
    }
  }
  return entity;
}

export const COMPOSITE_VERDICTS = ["healthy", "degraded", "down", "unknown"] as const;
const COMPOSITE_FIELDS = ["composite.<slug>", "composite.<slug>.status"];

/** composite_results stats group fields, in the reference's order (its error lists them so). */
export const COMPOSITE_STATS_FIELDS = [
  "check",
  "check_slug",
  "check_name",
  "verdict",
  "status",
  "input_key",
  "input_value",
  "input_stale",
];

const HOST_COMMON = {
  uuid: ["id"],
  time: ["timestamp", "created_at"],
  notNull: ["id", "timestamp", "created_at", "partition"],
  partition: { column: "partition" },
  permission: "observability.metrics.view",
  timeField: "timestamp",
  defaultSort: ["timestamp", "desc"] as [string, "desc"],
  tieBreaker: "id",
  defaultTime: "last_24h",
  longRange: true,
  fieldAliases: { uid: "device_id", time: "timestamp", ingest_partition: "partition" },
} satisfies Partial<EntitySpec>;

const HOST_ID_FIELDS = ["gateway_id", "agent_id", "host_id", "device_id", "partition"];

function hourly(
  name: string,
  label: string,
  aliases: string[],
  keys: { text?: string[]; int?: string[] },
  values: { float: string[]; int?: string[] },
  series: string[],
): EntityDecl {
  return define({
    name,
    label,
    aliases,
    table: name,
    permission: "observability.metrics.view",
    timeField: "bucket",
    defaultSort: ["bucket", "desc"],
    tieBreaker: "id",
    defaultTime: "last_7d",
    defaultFilterField: "device_id",
    partition: { column: "partition" },
    longRange: true,
    uuid: ["id"],
    text: ["device_id", "gateway_id", "agent_id", "partition", ...(keys.text ?? [])],
    int: [...(keys.int ?? []), ...(values.int ?? []), "sample_count"],
    float: values.float,
    time: ["bucket"],
    notNull: [
      "id",
      "bucket",
      "device_id",
      "partition",
      "sample_count",
      ...(keys.text ?? []),
      ...(keys.int ?? []),
    ],
    groupable: ["device_id", "agent_id", "gateway_id", ...(keys.text ?? []), ...(keys.int ?? [])],
    fieldAliases: { uid: "device_id", timestamp: "bucket", time: "bucket" },
    downsample: {
      valueFields: [...values.float, ...(values.int ?? [])],
      defaultValue: values.float[0] as string,
      seriesFields: series,
      defaultSeries: series[0] ?? null,
      defaultAgg: "avg",
      defaultBucket: "1h",
    },
  });
}

/** Hourly rollups (src/telemetry/rollup.ts), queryable like their raw tables. */
function hourlyEntities(): EntityDecl[] {
  const agg = ["avg_value", "min_value", "max_value", "sum_value"];
  return [
    hourly(
      "timeseries_metrics_hourly",
      "Timeseries metrics (hourly)",
      ["timeseries_hourly"],
      { text: ["metric_name", "metric_type"] },
      { float: agg },
      ["metric_name", "device_id", "metric_type"],
    ),
    hourly(
      "timeseries_metrics_interface_hourly",
      "Interface metrics (hourly)",
      ["timeseries_metric_interface_hourly", "interface_metrics_hourly"],
      { text: ["metric_name", "metric_type"], int: ["if_index"] },
      { float: agg },
      ["metric_name", "if_index", "device_id"],
    ),
    hourly(
      "cpu_metrics_hourly",
      "CPU metrics (hourly)",
      ["cpu_hourly"],
      { text: ["host_id"], int: ["core_id"] },
      { float: ["avg_usage", "max_usage", "min_usage", "avg_frequency_hz"] },
      ["device_id", "host_id", "core_id"],
    ),
    hourly(
      "memory_metrics_hourly",
      "Memory metrics (hourly)",
      ["memory_hourly"],
      { text: ["host_id"] },
      { float: ["avg_usage", "max_usage", "avg_used_bytes"], int: ["max_used_bytes", "total_bytes"] },
      ["device_id", "host_id"],
    ),
    hourly(
      "disk_metrics_hourly",
      "Disk metrics (hourly)",
      ["disk_hourly"],
      { text: ["host_id", "mount_point"] },
      { float: ["avg_usage", "max_usage", "avg_used_bytes"], int: ["max_used_bytes", "total_bytes"] },
      ["mount_point", "device_id", "host_id"],
    ),
    hourly(
      "process_metrics_hourly",
      "Process metrics (hourly)",
      ["process_hourly"],
      { text: ["host_id", "name"] },
      { float: ["avg_cpu_usage", "max_cpu_usage", "avg_memory_usage"], int: ["max_memory_usage"] },
      ["name", "device_id", "host_id"],
    ),
  ];
}

export const ENTITIES: EntityDecl[] = [
  define({
    name: "devices",
    label: "Devices",
    aliases: ["device", "device_inventory"],
    table: "devices",
    permission: "devices.view",
    timeField: "last_seen_time",
    defaultSort: ["last_seen_time", "desc"],
    tieBreaker: "uid",
    defaultFilterField: "hostname",
    compositeFilters: true,
    partition: { column: "partition" },
    caseInsensitive: ["hostname", "name", "type", "vendor_name", "model", "domain", "zone", "region"],
    text: [
      "uid",
      "partition",
      "mac",
      "hostname",
      "name",
      "type",
      "vendor_name",
      "model",
      "domain",
      "zone",
      "region",
      "subnet_uid",
      "vlan_uid",
      "risk_level",
      "gateway_id",
      "agent_id",
      "management_device_id",
      "uid_alt",
      "deleted_by",
      "deleted_reason",
    ],
    ip: ["ip"],
    int: ["type_id", "risk_level_id", "risk_score"],
    bool: ["is_available", "is_managed", "is_compliant", "is_trusted"],
    time: ["first_seen_time", "last_seen_time", "created_time", "modified_time", "deleted_at"],
    array: ["discovery_sources"],
    json: ["os", "hw_info", "owner", "org", "tags", "metadata"],
    notNull: [
      "uid",
      "partition",
      "type_id",
      "discovery_sources",
      "tags",
      "metadata",
      "first_seen_time",
      "last_seen_time",
      "created_time",
      "modified_time",
    ],
    groupable: [
      "type",
      "type_id",
      "vendor_name",
      "risk_level",
      "is_available",
      "is_managed",
      "gateway_id",
      "agent_id",
      "partition",
      "model",
      "zone",
      "region",
    ],
    jsonPrefixes: ["os", "hw_info", "tags", "metadata", "owner", "org"],
    groupableJsonPrefixes: ["tags", "metadata"],
    jsonPaths: {
      "os.name": ["os", "name"],
      "os.version": ["os", "version"],
      "os.type": ["os", "type"],
      "hw_info.serial_number": ["hw_info", "serial_number"],
      "hw_info.cpu_type": ["hw_info", "cpu_type"],
      "hw_info.cpu_architecture": ["hw_info", "cpu_architecture"],
    },
    normalize: { mac: "mac" },
    fieldAliases: {
      device_id: "uid",
      last_seen: "last_seen_time",
      first_seen: "first_seen_time",
      vendor: "vendor_name",
      device_type: "type",
      available: "is_available",
      gateway: "gateway_id",
      risk: "risk_level",
    },
    softDeleteColumn: "deleted_at",
    enums: {
      discovery_sources: ["agent", "sweep", "armis", "proxmox", "mapper", "sighting", "sysmon", "manual"],
    },
  }),
  define({
    name: "interfaces",
    label: "Interfaces",
    aliases: ["interface", "discovered_interfaces"],
    table: "interfaces",
    permission: "devices.view",
    timeField: "timestamp",
    defaultSort: ["timestamp", "desc"],
    tieBreaker: "id",
    defaultTime: "last_7d",
    defaultFilterField: "uid",
    partition: { column: "partition" },
    uuid: ["id"],
    text: [
      "uid",
      "device_id",
      "interface_uid",
      "partition",
      "agent_id",
      "gateway_id",
      "if_name",
      "if_descr",
      "if_alias",
      "if_type_name",
      "if_phys_address",
      "duplex",
      "interface_kind",
      "classification_source",
    ],
    ip: ["device_ip"],
    int: ["if_index", "if_type", "if_admin_status", "if_oper_status", "if_speed", "speed_bps", "mtu"],
    time: ["timestamp", "created_at", "updated_at"],
    anyArray: ["ip_addresses"],
    json: ["metadata", "classification_meta"],
    noop: ["latest"],
    notNull: ["id", "uid", "device_id", "interface_uid", "partition", "ip_addresses", "timestamp"],
    groupable: [
      "device_id",
      "if_oper_status",
      "if_admin_status",
      "if_type",
      "if_type_name",
      "interface_kind",
      "agent_id",
      "gateway_id",
      "partition",
    ],
    jsonPrefixes: ["metadata"],
    normalize: { if_phys_address: "mac" },
    fieldAliases: {
      ip: "device_ip",
      description: "if_descr",
      mac: "if_phys_address",
      status: "if_oper_status",
      oper_status: "if_oper_status",
      admin_status: "if_admin_status",
      speed: "if_speed",
      ip_address: "ip_addresses",
      name: "if_name",
    },
  }),
  define({
    name: "services",
    label: "Services",
    aliases: ["service", "service_status"],
    table: "service_status",
    permission: "services.view",
    timeField: "timestamp",
    defaultSort: ["timestamp", "desc"],
    tieBreaker: "id",
    defaultTime: "last_7d",
    defaultFilterField: "service_type",
    partition: { column: "partition" },
    uuid: ["id", "service_check_id"],
    text: [
      "service_name",
      "service_type",
      "status",
      "message",
      "device_uid",
      "agent_id",
      "gateway_id",
      "protocol",
      "partition",
    ],
    int: ["port"],
    float: ["response_time_ms"],
    bool: ["available"],
    time: ["timestamp", "created_at"],
    json: ["details"],
    notNull: ["id", "timestamp", "service_name", "service_type", "available", "status", "partition"],
    groupable: [
      "service_name",
      "service_type",
      "status",
      "available",
      "device_uid",
      "agent_id",
      "gateway_id",
    ],
    jsonPrefixes: ["details"],
    fieldAliases: {
      uid: "device_uid",
      device_id: "device_uid",
      name: "service_name",
      type: "service_type",
      service_status: "status",
      service_id: "service_check_id",
      time: "timestamp",
    },
  }),
  define({
    name: "logs",
    label: "Logs",
    table: "logs",
    permission: "observability.logs.view",
    timeField: "timestamp",
    defaultSort: ["timestamp", "desc"],
    tieBreaker: "id",
    defaultTime: "last_24h",
    defaultFilterField: "body",
    partition: { column: "partition" },
    uuid: ["id"],
    text: [
      "trace_id",
      "span_id",
      "severity_text",
      "body",
      "event_name",
      "service_name",
      "service_version",
      "service_instance",
      "scope_name",
      "scope_version",
      "device_id",
      "gateway_id",
      "agent_id",
      "source",
      "host",
      "facility",
      "ingest_identity",
      "ingest_agent_id",
      "partition",
    ],
    ip: ["source_ip"],
    int: ["severity_number"],
    time: ["timestamp", "observed_timestamp", "created_at"],
    json: ["attributes", "resource_attributes"],
    notNull: ["id", "timestamp", "partition", "attributes", "resource_attributes"],
    groupable: [
      "severity_text",
      "severity_number",
      "service_name",
      "host",
      "source",
      "device_id",
      "scope_name",
      "gateway_id",
      "agent_id",
      "event_name",
    ],
    jsonPrefixes: ["attributes", "resource_attributes"],
    fieldAliases: {
      severity: "severity_text",
      level: "severity_text",
      message: "body",
      service: "service_name",
      hostname: "host",
      uid: "device_id",
      source_device_uid: "device_id",
      ingest_partition: "partition",
      time: "timestamp",
    },
    enums: { severity_text: ["FATAL", "ERROR", "WARN", "INFO", "DEBUG"] },
  }),
  define({
    name: "events",
    label: "Events",
    aliases: ["activity"],
    table: "events",
    permission: "observability.events.view",
    timeField: "time",
    defaultSort: ["time", "desc"],
    tieBreaker: "id",
    defaultTime: "last_7d",
    defaultFilterField: "message",
    partition: { column: "partition" },
    uuid: ["id", "log_id"],
    text: [
      "event_id",
      "activity_name",
      "severity",
      "message",
      "short_message",
      "status",
      "status_code",
      "status_detail",
      "log_level",
      "log_name",
      "log_provider",
      "source",
      "source_type",
      "addon_id",
      "trace_id",
      "span_id",
      "device_uid",
      "host",
      "partition",
    ],
    int: ["class_uid", "category_uid", "type_uid", "activity_id", "severity_id", "status_id"],
    time: ["time", "created_at"],
    json: ["metadata", "unmapped", "raw"],
    notNull: [
      "id",
      "time",
      "class_uid",
      "category_uid",
      "type_uid",
      "activity_id",
      "severity_id",
      "partition",
    ],
    groupable: [
      "severity",
      "severity_id",
      "class_uid",
      "category_uid",
      "type_uid",
      "activity_id",
      "status",
      "source",
      "source_type",
      "log_name",
      "log_provider",
      "log_level",
      "device_uid",
    ],
    jsonPrefixes: ["metadata", "unmapped"],
    fieldAliases: {
      uid: "device_uid",
      device_id: "device_uid",
      source_device_uid: "device_uid",
      service_radar_device_uid: "device_uid",
      timestamp: "time",
    },
  }),
  define({
    name: "alerts",
    label: "Alerts",
    aliases: ["alert"],
    table: "alerts",
    permission: "observability.alerts.view",
    timeField: "triggered_at",
    defaultSort: ["triggered_at", "desc"],
    tieBreaker: "id",
    defaultTime: "last_7d",
    defaultFilterField: "title",
    partition: { deviceColumn: "device_uid" },
    uuid: ["id", "service_check_id", "event_id"],
    text: [
      "title",
      "description",
      "severity",
      "status",
      "source_type",
      "source_id",
      "device_uid",
      "agent_uid",
      "metric_name",
      "comparison",
      "acknowledged_by",
      "resolved_by",
      "escalation_reason",
      // incident_key is internal (decision 0500: never serialised), so it is not a field here.
    ],
    float: ["metric_value", "threshold_value"],
    int: ["escalation_level", "notification_count"],
    time: [
      "triggered_at",
      "acknowledged_at",
      "resolved_at",
      "escalated_at",
      "event_time",
      "suppressed_until",
      "snooze_until",
      "last_notification_at",
      "created_at",
      "updated_at",
    ],
    array: ["tags"],
    json: ["metadata"],
    notNull: ["id", "title", "severity", "status", "triggered_at", "created_at", "updated_at", "tags"],
    groupable: ["severity", "status", "source_type", "device_uid", "agent_uid", "metric_name"],
    jsonPrefixes: ["metadata"],
    fieldAliases: { timestamp: "triggered_at", uid: "device_uid", device_id: "device_uid" },
    enums: {
      severity: ["info", "warning", "critical", "emergency"],
      status: ["pending", "acknowledged", "escalated", "suppressed", "resolved"],
    },
  }),
  define({
    name: "gateways",
    label: "Gateways",
    aliases: ["gateway"],
    table: "gateways",
    permission: "infrastructure.view",
    timeField: "last_seen",
    defaultSort: ["last_seen", "desc"],
    tieBreaker: "gateway_id",
    defaultFilterField: "gateway_id",
    partition: null,
    uuid: ["partition_id"],
    text: [
      "gateway_id",
      "component_id",
      "registration_source",
      "status",
      "status_reason",
      "spiffe_identity",
      "created_by",
    ],
    bool: ["is_healthy"],
    int: ["agent_count", "checker_count"],
    time: ["first_registered", "first_seen", "last_seen", "updated_at"],
    json: ["metadata"],
    notNull: ["gateway_id", "status", "metadata", "is_healthy", "agent_count", "checker_count", "updated_at"],
    groupable: ["status", "is_healthy", "registration_source", "component_id"],
    jsonPrefixes: ["metadata"],
    fieldAliases: { id: "gateway_id", last_seen_time: "last_seen", timestamp: "last_seen" },
    enums: {
      status: ["inactive", "healthy", "degraded", "offline", "recovering", "maintenance", "draining"],
    },
  }),
  define({
    name: "agents",
    label: "Agents",
    aliases: ["agent", "ocsf_agents"],
    table: "agents",
    permission: "infrastructure.view",
    timeField: "last_seen_time",
    defaultSort: ["last_seen_time", "desc"],
    tieBreaker: "uid",
    defaultFilterField: "uid",
    partition: null,
    text: [
      "uid",
      "name",
      "type",
      "uid_alt",
      "vendor_name",
      "version",
      "desired_version",
      "gateway_id",
      "device_uid",
      "host",
      "spiffe_identity",
      "status",
      "status_reason",
      "release_rollout_state",
      "last_update_error",
      "config_source",
      "config_health",
    ],
    int: [
      "type_id",
      "port",
      "plugin_engine_max_memory_mb",
      "plugin_engine_max_cpu_ms",
      "plugin_engine_max_concurrent",
      "plugin_engine_max_open_connections",
    ],
    bool: ["is_healthy"],
    time: [
      "first_seen_time",
      "last_seen_time",
      "created_time",
      "modified_time",
      "last_update_at",
      "config_pushed_at",
    ],
    jsonArray: ["capabilities"],
    json: ["policies", "metadata"],
    notNull: ["uid", "type_id", "status", "is_healthy", "metadata", "capabilities", "config_health"],
    groupable: [
      "status",
      "is_healthy",
      "gateway_id",
      "version",
      "config_source",
      "release_rollout_state",
      "type",
    ],
    jsonPrefixes: ["metadata"],
    fieldAliases: {
      ip: "host",
      last_seen: "last_seen_time",
      first_seen: "first_seen_time",
      device_id: "device_uid",
      timestamp: "last_seen_time",
    },
    enums: { status: ["connecting", "connected", "degraded", "disconnected", "unavailable"] },
  }),
  define({
    name: "poll_jobs",
    label: "Poll jobs",
    aliases: ["poll_job", "jobs"],
    table: "poll_jobs",
    permission: "services.view",
    timeField: "inserted_at",
    defaultSort: ["inserted_at", "desc"],
    tieBreaker: "id",
    defaultFilterField: "status",
    partition: null,
    uuid: ["id", "schedule_id"],
    text: ["schedule_name", "status", "agent_id", "gateway_id", "error_code", "error_message"],
    int: [
      "check_count",
      "success_count",
      "failure_count",
      "priority",
      "retry_count",
      "max_retries",
      "timeout_seconds",
      "duration_ms",
    ],
    time: ["dispatched_at", "started_at", "completed_at", "inserted_at", "updated_at"],
    json: ["results", "metadata"],
    notNull: ["id", "schedule_id", "status", "inserted_at", "updated_at"],
    groupable: ["status", "agent_id", "gateway_id", "schedule_name", "error_code"],
    fieldAliases: { timestamp: "inserted_at" },
    enums: { status: ["pending", "dispatching", "running", "completed", "failed", "timeout", "cancelled"] },
  }),
  define({
    name: "otel_traces",
    label: "Spans",
    aliases: ["traces", "trace_spans"],
    table: "otel_traces",
    permission: "observability.traces.view",
    timeField: "timestamp",
    defaultSort: ["timestamp", "desc"],
    tieBreaker: "id",
    defaultTime: "last_24h",
    defaultFilterField: "trace_id",
    partition: { column: "partition" },
    uuid: ["id"],
    text: [
      "trace_id",
      "span_id",
      "parent_span_id",
      "name",
      "service_name",
      "service_version",
      "service_instance",
      "scope_name",
      "scope_version",
      "status_message",
      "ingest_identity",
      "ingest_agent_id",
      "partition",
    ],
    int: ["kind", "status_code", "start_time_unix_nano", "end_time_unix_nano"],
    float: ["duration_ms"],
    time: ["timestamp", "created_at"],
    json: ["attributes", "resource_attributes", "events", "links"],
    notNull: ["id", "timestamp", "trace_id", "span_id", "partition"],
    groupable: ["service_name", "name", "kind", "status_code"],
    jsonPrefixes: ["attributes", "resource_attributes"],
    fieldAliases: {
      span_name: "name",
      span_kind: "kind",
      service: "service_name",
      ingest_partition: "partition",
      time: "timestamp",
    },
  }),
  define({
    name: "otel_trace_summaries",
    label: "Traces",
    aliases: ["trace_summaries", "traces_summaries"],
    table: "otel_trace_summaries",
    permission: "observability.traces.view",
    timeField: "timestamp",
    defaultSort: ["timestamp", "desc"],
    tieBreaker: "id",
    defaultTime: "last_24h",
    defaultFilterField: "trace_id",
    partition: { column: "partition" },
    uuid: ["id"],
    text: ["trace_id", "root_span_id", "root_span_name", "root_service_name", "partition"],
    int: [
      "root_span_kind",
      "status_code",
      "span_count",
      "error_count",
      "start_time_unix_nano",
      "end_time_unix_nano",
    ],
    float: ["duration_ms"],
    time: ["timestamp", "updated_at"],
    array: ["service_set"],
    notNull: [
      "id",
      "trace_id",
      "timestamp",
      "duration_ms",
      "status_code",
      "span_count",
      "error_count",
      "partition",
    ],
    groupable: ["root_service_name", "root_span_name", "status_code"],
    fieldAliases: { service_name: "root_service_name", time: "timestamp" },
  }),
  define({
    name: "otel_metrics",
    label: "Metrics",
    aliases: ["metrics"],
    table: "otel_metrics",
    permission: "observability.metrics.view",
    timeField: "timestamp",
    defaultSort: ["timestamp", "desc"],
    tieBreaker: "id",
    defaultTime: "last_24h",
    defaultFilterField: "service_name",
    partition: { column: "partition" },
    longRange: true,
    uuid: ["id"],
    text: [
      "trace_id",
      "span_id",
      "service_name",
      "span_name",
      "span_kind",
      "metric_type",
      "component",
      "level",
      "http_method",
      "http_route",
      "http_status_code",
      "grpc_service",
      "grpc_method",
      "grpc_status_code",
      "unit",
      "partition",
    ],
    float: ["duration_ms", "duration_seconds"],
    bool: ["is_slow"],
    time: ["timestamp", "created_at"],
    notNull: ["id", "timestamp", "is_slow", "partition"],
    groupable: [
      "service_name",
      "span_name",
      "metric_type",
      "http_method",
      "http_route",
      "http_status_code",
      "is_slow",
      "component",
    ],
    fieldAliases: { service: "service_name", type: "metric_type", time: "timestamp" },
    downsample: {
      valueFields: ["duration_ms", "duration_seconds"],
      defaultValue: "duration_ms",
      seriesFields: ["service_name", "span_name", "metric_type", "http_route", "component"],
      defaultSeries: "service_name",
      defaultAgg: "avg",
      defaultBucket: "5m",
    },
  }),
  define({
    name: "otel_metric_points",
    label: "OTLP Metrics",
    aliases: ["metric_points"],
    table: "otel_metric_points",
    permission: "observability.metrics.view",
    timeField: "timestamp",
    defaultSort: ["timestamp", "desc"],
    tieBreaker: "id",
    defaultTime: "last_24h",
    defaultFilterField: "metric_name",
    partition: { column: "partition" },
    longRange: true,
    uuid: ["id"],
    text: [
      "metric_name",
      "metric_type",
      "description",
      "unit",
      "temporality",
      "service_name",
      "ingest_identity",
      "ingest_agent_id",
      "partition",
    ],
    float: ["value", "sum", "min", "max"],
    int: ["count"],
    bool: ["is_monotonic"],
    time: ["timestamp", "created_at"],
    json: ["attributes", "resource_attributes"],
    notNull: ["id", "timestamp", "metric_name", "partition"],
    groupable: ["metric_name", "metric_type", "service_name", "unit"],
    jsonPrefixes: ["attributes", "resource_attributes"],
    fieldAliases: { time: "timestamp", service: "service_name" },
    downsample: {
      valueFields: ["value", "sum", "count", "min", "max"],
      defaultValue: "value",
      seriesFields: ["metric_name", "service_name", "metric_type"],
      defaultSeries: "metric_name",
      defaultAgg: "avg",
      defaultBucket: "5m",
    },
  }),
  define({
    name: "timeseries_metrics",
    label: "Timeseries metrics",
    aliases: ["timeseries"],
    table: "timeseries_metrics",
    permission: "observability.metrics.view",
    timeField: "timestamp",
    defaultSort: ["timestamp", "desc"],
    tieBreaker: "id",
    defaultTime: "last_24h",
    defaultFilterField: "metric_name",
    partition: { column: "partition" },
    longRange: true,
    uuid: ["id"],
    text: ["gateway_id", "agent_id", "metric_name", "metric_type", "device_id", "unit", "partition"],
    ip: ["target_device_ip"],
    int: ["if_index"],
    float: ["value"],
    time: ["timestamp", "created_at"],
    json: ["tags", "metadata"],
    notNull: ["id", "timestamp", "metric_name", "metric_type", "value", "partition"],
    groupable: ["metric_name", "metric_type", "device_id", "agent_id", "gateway_id", "if_index"],
    jsonPrefixes: ["tags", "metadata"],
    fieldAliases: { uid: "device_id", time: "timestamp", ingest_partition: "partition" },
    downsample: {
      valueFields: ["value"],
      defaultValue: "value",
      seriesFields: ["metric_name", "device_id", "metric_type", "if_index", "target_device_ip", "agent_id"],
      defaultSeries: "metric_name",
      defaultAgg: "avg",
      defaultBucket: "5m",
    },
  }),
  define({
    ...HOST_COMMON,
    name: "cpu_metrics",
    label: "CPU metrics",
    aliases: ["cpu"],
    table: "cpu_metrics",
    defaultFilterField: "device_id",
    text: [...HOST_ID_FIELDS, "cluster", "label"],
    int: ["core_id"],
    float: ["usage_percent", "frequency_hz"],
    groupable: ["device_id", "host_id", "agent_id", "gateway_id", "core_id", "cluster", "label"],
    downsample: {
      valueFields: ["usage_percent", "frequency_hz"],
      defaultValue: "usage_percent",
      seriesFields: ["device_id", "host_id", "core_id", "cluster", "label", "agent_id"],
      defaultSeries: "device_id",
      defaultAgg: "avg",
      defaultBucket: "5m",
    },
  }),
  define({
    ...HOST_COMMON,
    name: "memory_metrics",
    label: "Memory metrics",
    aliases: ["memory"],
    table: "memory_metrics",
    defaultFilterField: "device_id",
    text: HOST_ID_FIELDS,
    float: ["usage_percent"],
    int: ["total_bytes", "used_bytes", "available_bytes"],
    groupable: ["device_id", "host_id", "agent_id", "gateway_id"],
    downsample: {
      valueFields: ["usage_percent", "total_bytes", "used_bytes", "available_bytes"],
      defaultValue: "usage_percent",
      seriesFields: ["device_id", "host_id", "agent_id"],
      defaultSeries: "device_id",
      defaultAgg: "avg",
      defaultBucket: "5m",
    },
  }),
  define({
    ...HOST_COMMON,
    name: "disk_metrics",
    label: "Disk metrics",
    aliases: ["disk"],
    table: "disk_metrics",
    defaultFilterField: "device_id",
    text: [...HOST_ID_FIELDS, "mount_point", "device_name"],
    float: ["usage_percent"],
    int: ["total_bytes", "used_bytes", "available_bytes"],
    groupable: ["device_id", "host_id", "agent_id", "gateway_id", "mount_point", "device_name"],
    downsample: {
      valueFields: ["usage_percent", "total_bytes", "used_bytes", "available_bytes"],
      defaultValue: "usage_percent",
      seriesFields: ["mount_point", "device_id", "host_id", "device_name"],
      defaultSeries: "mount_point",
      defaultAgg: "avg",
      defaultBucket: "5m",
    },
  }),
  define({
    ...HOST_COMMON,
    name: "process_metrics",
    label: "Process metrics",
    aliases: ["processes", "process"],
    table: "process_metrics",
    defaultFilterField: "name",
    text: [...HOST_ID_FIELDS, "name", "command_line", "status", "start_time"],
    int: ["pid", "memory_usage"],
    float: ["cpu_usage"],
    groupable: ["device_id", "host_id", "agent_id", "gateway_id", "name", "status"],
    downsample: {
      valueFields: ["cpu_usage", "memory_usage"],
      defaultValue: "cpu_usage",
      seriesFields: ["name", "device_id", "host_id", "pid"],
      defaultSeries: "name",
      defaultAgg: "avg",
      defaultBucket: "5m",
    },
  }),
  ...hourlyEntities(),
  define({
    name: "capacity_forecasts",
    label: "Capacity Forecasts",
    aliases: ["forecasts"],
    table: "capacity_forecasts",
    permission: "observability.metrics.view",
    timeField: "forecasted_at",
    defaultSort: ["projected_exhaustion_at", "asc"],
    tieBreaker: "id",
    defaultFilterField: "resource_label",
    partition: { column: "partition" },
    uuid: ["id"],
    text: [
      "resource_key",
      "metric_name",
      "resource_type",
      "resource_id",
      "resource_label",
      "metric_class",
      "model",
      "status",
      "skip_reason",
      "partition",
    ],
    int: ["horizon_seconds", "sample_count"],
    float: [
      "current_value",
      "slope_per_second",
      "intercept",
      "projected_value",
      "exhaustion_threshold",
      "confidence",
      "lower_bound",
      "upper_bound",
    ],
    time: [
      "forecasted_at",
      "horizon_ends_at",
      "window_started_at",
      "window_ended_at",
      "projected_exhaustion_at",
      "inserted_at",
      "updated_at",
    ],
    json: ["metadata"],
    computed: { has_exhaustion: "(projected_exhaustion_at IS NOT NULL)" },
    notNull: [
      "id",
      "forecasted_at",
      "resource_key",
      "metric_name",
      "horizon_seconds",
      "sample_count",
      "model",
      "status",
      "partition",
    ],
    groupable: ["metric_name", "resource_type", "status", "metric_class", "model"],
    fieldAliases: { timestamp: "forecasted_at" },
    enums: { status: ["projected", "skipped"] },
  }),
  define({
    // One row per evaluation of a composite check (src/monitoring/composite.ts).
    name: "composite_results",
    label: "Composite results",
    aliases: ["composite_result"],
    table: "composite_results",
    permission: "services.view",
    timeField: "evaluated_at",
    defaultSort: ["evaluated_at", "desc"],
    tieBreaker: "id",
    defaultFilterField: "check_slug",
    partition: { deviceColumn: "device_uid" },
    uuid: ["id", "composite_id"],
    text: ["check_slug", "check_name", "verdict", "status", "message", "device_uid"],
    int: ["stale_inputs"],
    time: ["evaluated_at"],
    json: ["inputs"],
    notNull: [
      "id",
      "composite_id",
      "check_slug",
      "check_name",
      "verdict",
      "status",
      "stale_inputs",
      "inputs",
      "evaluated_at",
    ],
    groupable: ["check_slug", "check_name", "verdict", "status"],
    fieldAliases: {
      check: "check_slug",
      slug: "check_slug",
      timestamp: "evaluated_at",
      device_id: "device_uid",
    },
    enums: {
      verdict: [...COMPOSITE_VERDICTS],
      status: [...COMPOSITE_VERDICTS],
    },
    noun: "composite results",
    statsFields: COMPOSITE_STATS_FIELDS,
  }),
  define({
    // Installed dashboard packages (migration 0700): the same rows GET /api/v1/dashboard-packages lists.
    name: "dashboards",
    label: "Dashboards",
    aliases: ["dashboard_packages"],
    table: "dashboard_packages",
    permission: "dashboards.packages.view_all",
    timeField: "updated_at",
    defaultSort: ["name", "asc"],
    tieBreaker: "id",
    defaultTime: null,
    defaultFilterField: "name",
    partition: null,
    uuid: ["id"],
    text: ["dashboard_id", "name", "version", "route_slug", "status", "verification_status", "content_hash"],
    int: ["renderer_size"],
    time: ["created_at", "updated_at"],
    notNull: [
      "id",
      "dashboard_id",
      "name",
      "version",
      "status",
      "verification_status",
      "content_hash",
      "renderer_size",
      "created_at",
      "updated_at",
    ],
    groupable: ["status", "verification_status", "dashboard_id"],
    caseInsensitive: ["name"],
    fieldAliases: {
      title: "name",
      slug: "route_slug",
      dashboard_ref: "dashboard_id",
      timestamp: "updated_at",
    },
    enums: {
      status: ["staged", "enabled", "disabled"],
      verification_status: ["pending", "verified", "failed"],
    },
  }),
];

const BY_NAME = new Map<string, EntityDecl>();
for (const e of ENTITIES) {
  for (const n of [e.name, ...e.aliases]) {
    if (BY_NAME.has(n)) throw new Error(`srql catalog: entity name ${n} declared twice`);
    BY_NAME.set(n, e);
  }
}

export function findEntity(name: string): EntityDecl | undefined {
  return BY_NAME.get(name.toLowerCase());
}

/** Spec 2.9 control tokens and operators. */
export const CONTROL_TOKENS = ["by:", "group:", "in:", "limit:", "sort:", "time:", "where"];
export const OPERATORS = [":", ":contains", ":equals", "!=", ">", ">=", "<", "<="];

function sorted(xs: Iterable<string>): string[] {
  return [...xs].sort();
}

function entityDocument(e: EntityDecl): Record<string, unknown> {
  const groups = {
    boolean: [] as string[],
    numeric: [] as string[],
    text: [] as string[],
    time: [] as string[],
  };
  const address: string[] = [];
  const array: string[] = [];
  const json: string[] = [];
  for (const f of e.fields.values()) {
    if (f.kind === "bool") groups.boolean.push(f.name);
    else if (f.kind === "int" || f.kind === "float") groups.numeric.push(f.name);
    else if (f.kind === "time") groups.time.push(f.name);
    else if (f.kind === "json") json.push(f.name);
    else groups.text.push(f.name);
    if (f.kind === "ip") address.push(f.name);
    if (f.kind === "text_array") array.push(f.name);
  }
  return {
    label: e.label,
    aliases: [...e.aliases],
    fields: {
      boolean: sorted(groups.boolean),
      numeric: sorted(groups.numeric),
      text: sorted(groups.text),
      time: sorted(groups.time),
    },
    field_aliases: Object.fromEntries([...e.fieldAliases].sort(([a], [b]) => a.localeCompare(b))),
    address: sorted(address),
    array: sorted(array),
    json: sorted(json),
    json_paths: sorted([
      ...[...e.jsonPrefixes.keys()].map((p) => `${p}.<key>`),
      ...(e.compositeFilters ? COMPOSITE_FIELDS : []),
    ]),
    stats: sorted(
      e.statsFields ?? [
        ...[...e.fields.values()].filter((f) => f.groupable).map((f) => f.name),
        ...[...e.groupableJsonPrefixes].map((p) => `${p}.<key>`),
      ],
    ),
    default_sort: { field: e.defaultSort.field, direction: e.defaultSort.direction },
    default_time: e.defaultTime,
    default_filter_field: e.defaultFilterField,
    time_field: e.timeField,
    downsample: e.downsample
      ? {
          value_fields: sorted(e.downsample.valueFields),
          default_value_field: e.downsample.defaultValue,
          series_fields: sorted(e.downsample.seriesFields),
          default_series: e.downsample.defaultSeries,
          default_agg: e.downsample.defaultAgg,
          default_bucket: e.downsample.defaultBucket,
        }
      : null,
    enums: e.compositeFilters
      ? { ...e.enums, ...Object.fromEntries(COMPOSITE_FIELDS.map((f) => [f, [...COMPOSITE_VERDICTS]])) }
      : e.enums,
    permission: e.permission,
  };
}

/** Canonical JSON: object keys sorted, arrays in order, no whitespace. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const obj = value as Record<string, unknown>;
  return `{${Object.keys(obj)
    .sort()
    .filter((k) => obj[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`)
    .join(",")}}`;
}

export interface CatalogDocument {
  version: string;
  control_tokens: string[];
  operators: string[];
  entities: Record<string, Record<string, unknown>>;
}

let cached: { doc: CatalogDocument; body: string } | null = null;

/** The catalog document (spec 2.9); `version` = SHA-256 hex of the canonical JSON without it. */
export function catalogDocument(): { doc: CatalogDocument; body: string } {
  if (cached) return cached;
  const payload = {
    control_tokens: [...CONTROL_TOKENS],
    operators: [...OPERATORS],
    entities: Object.fromEntries(ENTITIES.map((e) => [e.name, entityDocument(e)])),
  };
  const version = createHash("sha256").update(canonicalJson(payload)).digest("hex");
  const doc: CatalogDocument = { version, ...payload };
  cached = { doc, body: JSON.stringify(doc) };
  return cached;
}
