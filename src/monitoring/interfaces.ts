/**
 * SNMP interface discovery results → `interfaces` (inventory's table), with the interface
 * classification rules applied, and counter samples → per-second rates in timeseries_metrics
 * (metric_type `snmp_interface`, one row per interface and metric; raw counters are kept only
 * as the previous sample in the interface's metadata). Counter wraps/resets give no rate.
 */
import type { AppContext } from "../kernel/context.ts";
import { join, sql } from "../storage/sql.ts";
import type { SnmpInterface } from "./checks/snmp-interfaces.ts";

interface Rule {
  [k: string]: unknown;
  id: string;
  name: string;
  if_name_pattern: string | null;
  sys_descr_pattern: string | null;
  interface_kind: string | null;
  classification: string | null;
}

function matches(pattern: string | null, value: string | null): boolean {
  if (!pattern) return true;
  if (value == null) return false;
  try {
    return new RegExp(pattern, "i").test(value);
  } catch {
    return false;
  }
}

export function classify(rules: Rule[], iface: SnmpInterface, sysDescr: string | null): Rule | null {
  for (const r of rules) {
    if (!r.if_name_pattern && !r.sys_descr_pattern) continue;
    if (matches(r.if_name_pattern, iface.if_name ?? iface.if_descr) && matches(r.sys_descr_pattern, sysDescr))
      return r;
  }
  return null;
}

const IANA_TYPES: Record<number, string> = {
  1: "other",
  6: "ethernetCsmacd",
  24: "softwareLoopback",
  53: "propVirtual",
  131: "tunnel",
  161: "ieee8023adLag",
  71: "ieee80211",
};

export async function recordInterfaces(
  ctx: AppContext,
  input: {
    deviceId: string;
    deviceIp: string | null;
    agentId: string | null;
    gatewayId: string | null;
    sysDescr: string | null;
    interfaces: SnmpInterface[];
    at: Date;
  },
): Promise<{ interfaces: number; rates: number }> {
  if (!Array.isArray(input.interfaces) || input.interfaces.length === 0) return { interfaces: 0, rates: 0 };
  const rules = await ctx.db.many<Rule>(sql`
    SELECT id, name, if_name_pattern, sys_descr_pattern, interface_kind, classification
    FROM interface_classification_rules WHERE enabled ORDER BY priority, name`);
  return ctx.db.transaction(async (tx) => {
    const prev = new Map(
      (
        await tx.many<{
          if_index: number;
          metadata: { counters?: Record<string, number | null> & { at?: string } };
        }>(sql`SELECT if_index, metadata FROM interfaces WHERE device_id = ${input.deviceId} FOR UPDATE`)
      ).map((r) => [r.if_index, r.metadata?.counters]),
    );
    const series: ReturnType<typeof sql>[] = [];
    for (const i of input.interfaces.slice(0, 4096)) {
      const rule = classify(rules, i, input.sysDescr);
      const interfaceUid = `ifindex:${i.if_index}`;
      const counters = { ...i.counters, at: input.at.toISOString() };
      await tx.query(sql`
        INSERT INTO interfaces (uid, device_id, device_ip, interface_uid, agent_id, gateway_id, if_index, if_name, if_descr,
          if_alias, if_type, if_type_name, if_phys_address, if_admin_status, if_oper_status, if_speed, speed_bps, mtu,
          interface_kind, classification_source, classification_meta, metadata, "timestamp", updated_at)
        VALUES (${`${input.deviceId}/${interfaceUid}`}, ${input.deviceId}, ${input.deviceIp}, ${interfaceUid}, ${input.agentId},
          ${input.gatewayId}, ${i.if_index}, ${i.if_name}, ${i.if_descr}, ${i.if_alias}, ${i.if_type},
          ${i.if_type == null ? null : (IANA_TYPES[i.if_type] ?? null)}, ${i.if_phys_address}, ${i.if_admin_status},
          ${i.if_oper_status}, ${i.if_speed}, ${i.speed_bps}, ${i.mtu}, ${rule?.interface_kind ?? null},
          ${rule ? `rule:${rule.name}` : null},
          ${JSON.stringify(rule ? { rule_id: rule.id, classification: rule.classification } : {})}::jsonb,
          ${JSON.stringify({ counters })}::jsonb, ${input.at}, ${input.at})
        ON CONFLICT (device_id, interface_uid) DO UPDATE SET
          device_ip = EXCLUDED.device_ip, agent_id = EXCLUDED.agent_id, gateway_id = EXCLUDED.gateway_id,
          if_index = EXCLUDED.if_index, if_name = EXCLUDED.if_name, if_descr = EXCLUDED.if_descr, if_alias = EXCLUDED.if_alias,
          if_type = EXCLUDED.if_type, if_type_name = EXCLUDED.if_type_name, if_phys_address = EXCLUDED.if_phys_address,
          if_admin_status = EXCLUDED.if_admin_status, if_oper_status = EXCLUDED.if_oper_status, if_speed = EXCLUDED.if_speed,
          speed_bps = EXCLUDED.speed_bps, mtu = EXCLUDED.mtu, interface_kind = EXCLUDED.interface_kind,
          classification_source = EXCLUDED.classification_source, classification_meta = EXCLUDED.classification_meta,
          metadata = interfaces.metadata || EXCLUDED.metadata, "timestamp" = EXCLUDED."timestamp", updated_at = EXCLUDED.updated_at`);
      const before = prev.get(i.if_index);
      const dt = before?.at ? (input.at.getTime() - Date.parse(before.at)) / 1000 : 0;
      if (!before || !(dt > 0)) continue;
      const rate = (name: string, cur: number | null, old: number | null | undefined, factor: number) => {
        if (cur == null || old == null || cur < old) return;
        series.push(sql`(${input.at}, ${input.gatewayId}, ${input.agentId}, ${name}, 'snmp_interface', ${input.deviceId},
          ${input.deviceIp}, ${i.if_index}, ${((cur - old) * factor) / dt}, ${factor === 8 ? "bit/s" : "1/s"},
          ${JSON.stringify({ if_name: i.if_name ?? i.if_descr })}::jsonb)`);
      };
      rate("if_in_bps", i.counters.in_octets, before.in_octets, 8);
      rate("if_out_bps", i.counters.out_octets, before.out_octets, 8);
      rate("if_in_errors_per_s", i.counters.in_errors, before.in_errors, 1);
      rate("if_out_errors_per_s", i.counters.out_errors, before.out_errors, 1);
    }
    if (series.length > 0) {
      await tx.query(sql`
        INSERT INTO timeseries_metrics ("timestamp", gateway_id, agent_id, metric_name, metric_type, device_id,
          target_device_ip, if_index, value, unit, tags)
        VALUES ${join(series)}`);
    }
    return { interfaces: input.interfaces.length, rates: series.length };
  });
}
