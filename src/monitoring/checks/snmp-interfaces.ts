/**
 * SNMP interface discovery: walk ifTable and ifXTable and return one record per ifIndex with
 * names, speeds, statuses and the octet/error counters (rates are computed by the core from
 * consecutive samples).
 */
import snmp from "net-snmp";
import { type SnmpSession, snmpGet, snmpSubtree, varbindValue } from "./snmp-session.ts";

export interface SnmpInterface {
  if_index: number;
  if_name: string | null;
  if_descr: string | null;
  if_alias: string | null;
  if_type: number | null;
  if_phys_address: string | null;
  mtu: number | null;
  if_speed: number | null;
  speed_bps: number | null;
  if_admin_status: number | null;
  if_oper_status: number | null;
  counters: {
    in_octets: number | null;
    out_octets: number | null;
    in_errors: number | null;
    out_errors: number | null;
  };
}

const IF = "1.3.6.1.2.1.2.2.1";
const IFX = "1.3.6.1.2.1.31.1.1.1";
const COLUMNS: Record<string, string> = {
  [`${IF}.2`]: "descr",
  [`${IF}.3`]: "type",
  [`${IF}.4`]: "mtu",
  [`${IF}.5`]: "speed",
  [`${IF}.6`]: "phys",
  [`${IF}.7`]: "admin",
  [`${IF}.8`]: "oper",
  [`${IF}.10`]: "in_octets",
  [`${IF}.14`]: "in_errors",
  [`${IF}.16`]: "out_octets",
  [`${IF}.20`]: "out_errors",
  [`${IFX}.1`]: "name",
  [`${IFX}.6`]: "hc_in_octets",
  [`${IFX}.10`]: "hc_out_octets",
  [`${IFX}.15`]: "high_speed",
  [`${IFX}.18`]: "alias",
};

function mac(v: unknown): string | null {
  if (!Buffer.isBuffer(v) || v.length === 0) return null;
  return [...v].map((b) => b.toString(16).padStart(2, "0")).join(":");
}

export async function discoverInterfaces(
  session: SnmpSession,
): Promise<{ sys_descr: string | null; interfaces: SnmpInterface[] }> {
  const rows = new Map<number, Record<string, unknown>>();
  for (const base of [IF, IFX]) {
    let vbs: snmp.Varbind[] = [];
    try {
      vbs = await snmpSubtree(session, base);
    } catch {
      if (base === IF) throw new Error("ifTable walk failed");
      continue; // ifXTable is optional
    }
    for (const vb of vbs) {
      const dot = vb.oid.lastIndexOf(".");
      const col = COLUMNS[vb.oid.slice(0, dot)];
      if (!col) continue;
      const idx = Number(vb.oid.slice(dot + 1));
      const row = rows.get(idx) ?? {};
      row[col] = col === "phys" ? mac(vb.value) : varbindValue(vb);
      rows.set(idx, row);
    }
  }
  let sysDescr: string | null = null;
  try {
    const [vb] = await snmpGet(session, ["1.3.6.1.2.1.1.1.0"]);
    if (vb && !snmp.isVarbindError(vb)) sysDescr = String(varbindValue(vb));
  } catch {}
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null);
  const str = (v: unknown) => (v === undefined || v === null || v === "" ? null : String(v));
  const interfaces = [...rows.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([idx, r]) => {
      const high = num(r.high_speed);
      const speed = num(r.speed);
      return {
        if_index: idx,
        if_name: str(r.name),
        if_descr: str(r.descr),
        if_alias: str(r.alias),
        if_type: num(r.type),
        if_phys_address: (r.phys as string | null) ?? null,
        mtu: num(r.mtu),
        if_speed: speed,
        speed_bps: high && high > 0 ? high * 1_000_000 : speed,
        if_admin_status: num(r.admin),
        if_oper_status: num(r.oper),
        counters: {
          in_octets: num(r.hc_in_octets) ?? num(r.in_octets),
          out_octets: num(r.hc_out_octets) ?? num(r.out_octets),
          in_errors: num(r.in_errors),
          out_errors: num(r.out_errors),
        },
      };
    });
  return { sys_descr: sysDescr, interfaces };
}
