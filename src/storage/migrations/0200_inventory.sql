-- Inventory domain: devices (OCSF-aligned), strong identifiers, source inventory snapshots,
-- device groups, cleanup settings, interfaces and their classification rules and settings.
-- Column names follow the reference system (OCSF device attributes) so SRQL, JSON:API and
-- monitoring can read these tables directly.

CREATE SEQUENCE IF NOT EXISTS devices_seq_seq;

CREATE TABLE devices (
  -- `sr:` followed by a lowercase UUID.
  uid text PRIMARY KEY CHECK (uid ~ '^sr:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  -- Insertion order: the stable sort key of the devices list (new devices append at the end).
  seq bigint NOT NULL DEFAULT nextval('devices_seq_seq') UNIQUE,
  partition text NOT NULL DEFAULT 'default',
  -- Canonical text form (IPv4 dotted quad, IPv6 compressed lowercase).
  ip text,
  -- Colon form, upper case: AA:BB:CC:DD:EE:FF.
  mac text,
  hostname text,
  name text,
  -- OCSF device type: 0 Unknown, 1 Server, ... 15 Load Balancer, 99 Other (type holds the caption).
  type_id integer NOT NULL DEFAULT 0,
  type text,
  vendor_name text,
  model text,
  domain text,
  zone text,
  subnet_uid text,
  vlan_uid text,
  region text,
  -- OCSF OS object {name, type_id, type, version, ...}.
  os jsonb,
  -- OCSF User object.
  owner jsonb,
  org jsonb,
  hw_info jsonb,
  network_interfaces jsonb,
  groups jsonb,
  agent_list jsonb,
  risk_level_id integer,
  risk_level text,
  risk_score integer,
  is_managed boolean,
  is_available boolean,
  is_compliant boolean,
  is_trusted boolean,
  gateway_id text,
  agent_id text,
  management_device_id text,
  group_id uuid,
  discovery_sources text[] NOT NULL DEFAULT '{}',
  tags jsonb NOT NULL DEFAULT '{}'::jsonb,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  uid_alt text,
  first_seen_time timestamptz NOT NULL DEFAULT now(),
  last_seen_time timestamptz NOT NULL DEFAULT now(),
  created_time timestamptz NOT NULL DEFAULT now(),
  modified_time timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz,
  deleted_by text,
  deleted_reason text
);

-- One live device per IP and partition (soft-deleted devices keep their last IP).
CREATE UNIQUE INDEX devices_partition_ip_live_idx ON devices (partition, ip)
  WHERE deleted_at IS NULL AND ip IS NOT NULL;
CREATE INDEX devices_partition_mac_idx ON devices (partition, mac) WHERE mac IS NOT NULL;
CREATE INDEX devices_last_seen_idx ON devices (last_seen_time DESC);
CREATE INDEX devices_first_seen_idx ON devices (first_seen_time);
CREATE INDEX devices_gateway_idx ON devices (gateway_id) WHERE gateway_id IS NOT NULL;
CREATE INDEX devices_type_idx ON devices (type);
CREATE INDEX devices_deleted_idx ON devices (deleted_at) WHERE deleted_at IS NOT NULL;
-- Substring search (ILIKE '%term%') over hostname, IP, MAC and uid.
CREATE INDEX devices_hostname_trgm_idx ON devices USING gin (hostname gin_trgm_ops);
CREATE INDEX devices_ip_trgm_idx ON devices USING gin (ip gin_trgm_ops);
CREATE INDEX devices_mac_trgm_idx ON devices USING gin (mac gin_trgm_ops);
CREATE INDEX devices_uid_trgm_idx ON devices USING gin (uid gin_trgm_ops);

-- Strong (and medium) identifiers that map a sighting to a device. An IP is never stored here.
CREATE TABLE device_identifiers (
  id bigserial PRIMARY KEY,
  device_uid text NOT NULL REFERENCES devices (uid) ON DELETE CASCADE,
  partition text NOT NULL DEFAULT 'default',
  -- agent_id | armis_device_id | integration_id | netbox_device_id | mac
  identifier_type text NOT NULL,
  identifier_value text NOT NULL,
  -- strong | medium (a locally administered MAC is medium and never merges alone)
  confidence text NOT NULL DEFAULT 'strong' CHECK (confidence IN ('strong', 'medium', 'weak')),
  source text,
  first_seen timestamptz NOT NULL DEFAULT now(),
  last_seen timestamptz NOT NULL DEFAULT now(),
  UNIQUE (partition, identifier_type, identifier_value)
);
CREATE INDEX device_identifiers_device_idx ON device_identifiers (device_uid);

-- Source inventory: what an approved inventory source (NetBox, CSV, an integration) reported.
CREATE TABLE source_inventory_sources (
  source text NOT NULL,
  source_instance text NOT NULL,
  partition text NOT NULL DEFAULT 'default',
  approved boolean NOT NULL DEFAULT true,
  display_name text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source, source_instance, partition)
);

CREATE TABLE source_inventory_collections (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  source text NOT NULL,
  source_instance text NOT NULL,
  partition text NOT NULL DEFAULT 'default',
  collection text,
  content_hash text NOT NULL,
  query_hash text,
  observed_at timestamptz NOT NULL,
  completed_at timestamptz,
  expected_present_count integer NOT NULL DEFAULT 0,
  absent_count integer NOT NULL DEFAULT 0,
  complete boolean NOT NULL DEFAULT true,
  is_current boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX source_inventory_collections_current_idx
  ON source_inventory_collections (source, source_instance, partition, coalesce(collection, ''))
  WHERE is_current;

CREATE TABLE source_inventory_records (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  source text NOT NULL,
  source_instance text NOT NULL,
  partition text NOT NULL DEFAULT 'default',
  collection text,
  collection_id uuid NOT NULL REFERENCES source_inventory_collections (id) ON DELETE CASCADE,
  source_object_id text NOT NULL,
  source_integration_id text,
  present boolean NOT NULL DEFAULT true,
  first_observed_at timestamptz NOT NULL,
  last_observed_at timestamptz NOT NULL,
  absent_since timestamptz,
  hostname text,
  ip text,
  mac text,
  serial_number text,
  vendor_name text,
  model text,
  device_type text,
  management_status text,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  canonical_device_uid text,
  resolution_error text,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX source_inventory_records_key_idx
  ON source_inventory_records (source, source_instance, partition, coalesce(collection, ''), source_object_id);
CREATE INDEX source_inventory_records_page_idx
  ON source_inventory_records (source, source_instance, partition, present, last_observed_at DESC, id);

-- Device groups: a tree through parent_id.
CREATE TABLE device_groups (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  "desc" text,
  type text NOT NULL DEFAULT 'custom'
    CHECK (type IN ('location', 'department', 'environment', 'function', 'custom')),
  parent_id uuid REFERENCES device_groups (id) ON DELETE SET NULL,
  partition text NOT NULL DEFAULT 'default',
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  device_count integer NOT NULL DEFAULT 0,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (parent_id IS NULL OR parent_id <> id)
);
CREATE INDEX device_groups_parent_idx ON device_groups (parent_id);

-- Singleton: how long soft-deleted devices are kept and how the purge runs.
CREATE TABLE device_cleanup_settings (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  key text NOT NULL DEFAULT 'default' UNIQUE CHECK (key = 'default'),
  retention_days integer NOT NULL DEFAULT 30 CHECK (retention_days BETWEEN 1 AND 3650),
  cleanup_interval_minutes integer NOT NULL DEFAULT 1440 CHECK (cleanup_interval_minutes BETWEEN 5 AND 43200),
  batch_size integer NOT NULL DEFAULT 1000 CHECK (batch_size BETWEEN 100 AND 50000),
  enabled boolean NOT NULL DEFAULT true,
  last_run_at timestamptz,
  last_purged_count integer NOT NULL DEFAULT 0,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Discovered network interfaces (SNMP/agent discovery).
CREATE TABLE interfaces (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- Stable unique key: <device_id>/<interface_uid>.
  uid text NOT NULL UNIQUE,
  device_id text NOT NULL,
  device_ip text,
  interface_uid text NOT NULL,
  partition text NOT NULL DEFAULT 'default',
  agent_id text,
  gateway_id text,
  if_index integer,
  if_name text,
  if_descr text,
  if_alias text,
  if_type integer,
  if_type_name text,
  if_phys_address text,
  if_admin_status integer,
  if_oper_status integer,
  if_speed bigint,
  speed_bps bigint,
  mtu integer,
  duplex text,
  interface_kind text,
  ip_addresses text[] NOT NULL DEFAULT '{}',
  classification_source text,
  classification_meta jsonb NOT NULL DEFAULT '{}'::jsonb,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  "timestamp" timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (device_id, interface_uid)
);
CREATE INDEX interfaces_timestamp_idx ON interfaces ("timestamp" DESC);
CREATE INDEX interfaces_partition_idx ON interfaces (partition);

CREATE TABLE interface_classification_rules (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  enabled boolean NOT NULL DEFAULT true,
  priority integer NOT NULL DEFAULT 100,
  if_name_pattern text,
  sys_descr_pattern text,
  model_pattern text,
  vendor_pattern text,
  interface_kind text,
  classification text,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE interface_settings (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  device_id text NOT NULL,
  interface_uid text NOT NULL,
  favorited boolean NOT NULL DEFAULT false,
  metrics_enabled boolean NOT NULL DEFAULT false,
  metrics_selected text[] NOT NULL DEFAULT '{}',
  metric_thresholds jsonb NOT NULL DEFAULT '{}'::jsonb,
  metrics_interval_seconds integer NOT NULL DEFAULT 60 CHECK (metrics_interval_seconds > 0),
  threshold_enabled boolean NOT NULL DEFAULT false,
  threshold_value double precision,
  threshold_comparison text CHECK (threshold_comparison IN ('gt', 'lt', 'gte', 'lte', 'eq')),
  threshold_metric text CHECK (threshold_metric IN ('bandwidth_in', 'bandwidth_out', 'utilization', 'errors')),
  threshold_duration_seconds integer NOT NULL DEFAULT 0 CHECK (threshold_duration_seconds >= 0),
  threshold_severity text NOT NULL DEFAULT 'warning'
    CHECK (threshold_severity IN ('info', 'warning', 'critical', 'emergency')),
  tags text[] NOT NULL DEFAULT '{}',
  metric_groups jsonb NOT NULL DEFAULT '[]'::jsonb,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (device_id, interface_uid)
);
CREATE INDEX interface_settings_updated_idx ON interface_settings (updated_at DESC);
