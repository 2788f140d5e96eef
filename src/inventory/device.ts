import type { Row } from "../storage/db.ts";

/** A stored device row (table `devices`). */
export interface DeviceRow extends Row {
  uid: string;
  seq: number;
  partition: string;
  ip: string | null;
  mac: string | null;
  hostname: string | null;
  name: string | null;
  type_id: number;
  type: string | null;
  vendor_name: string | null;
  model: string | null;
  domain: string | null;
  zone: string | null;
  subnet_uid: string | null;
  vlan_uid: string | null;
  region: string | null;
  os: Record<string, unknown> | null;
  owner: Record<string, unknown> | null;
  org: Record<string, unknown> | null;
  hw_info: Record<string, unknown> | null;
  network_interfaces: unknown[] | null;
  groups: unknown[] | null;
  agent_list: unknown[] | null;
  risk_level_id: number | null;
  risk_level: string | null;
  risk_score: number | null;
  is_managed: boolean | null;
  is_available: boolean | null;
  availability_changed_at?: Date | null;
  availability_reason?: string | null;
  is_compliant: boolean | null;
  is_trusted: boolean | null;
  gateway_id: string | null;
  agent_id: string | null;
  management_device_id: string | null;
  group_id: string | null;
  discovery_sources: string[];
  tags: Record<string, unknown>;
  metadata: Record<string, unknown>;
  uid_alt: string | null;
  first_seen_time: Date;
  last_seen_time: Date;
  created_time: Date;
  modified_time: Date;
  deleted_at: Date | null;
  deleted_by: string | null;
  deleted_reason: string | null;
}

const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);

/** The REST device document (spec 2.6, reference §5.3). */
export function deviceJson(d: DeviceRow): Record<string, unknown> {
  return {
    uid: d.uid,
    partition: d.partition,
    type_id: d.type_id,
    type: d.type,
    name: d.name,
    hostname: d.hostname,
    ip: d.ip,
    mac: d.mac,
    uid_alt: d.uid_alt,
    vendor_name: d.vendor_name,
    model: d.model,
    domain: d.domain,
    zone: d.zone,
    subnet_uid: d.subnet_uid,
    vlan_uid: d.vlan_uid,
    region: d.region,
    first_seen: iso(d.first_seen_time),
    last_seen: iso(d.last_seen_time),
    first_seen_time: iso(d.first_seen_time),
    last_seen_time: iso(d.last_seen_time),
    created_time: iso(d.created_time),
    modified_time: iso(d.modified_time),
    risk_level_id: d.risk_level_id,
    risk_level: d.risk_level,
    risk_score: d.risk_score,
    is_managed: d.is_managed,
    is_compliant: d.is_compliant,
    is_trusted: d.is_trusted,
    is_available: d.is_available,
    availability_changed_at: d.availability_changed_at ?? null,
    availability_reason: d.availability_reason ?? null,
    os: d.os,
    hw_info: d.hw_info,
    network_interfaces: d.network_interfaces,
    owner: d.owner,
    org: d.org,
    groups: d.groups,
    agent_list: d.agent_list,
    gateway_id: d.gateway_id,
    agent_id: d.agent_id,
    discovery_sources: d.discovery_sources,
    metadata: d.metadata,
    deleted_at: iso(d.deleted_at),
  };
}
