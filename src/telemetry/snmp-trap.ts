import snmp from "net-snmp";
import type { TrapUser } from "../config/snmp-users.ts";
import type { AppContext } from "../kernel/context.ts";
import { cleanText } from "./otlp/map.ts";
import type { Intake } from "./sink.ts";
import type { LogRow } from "./write.ts";

/**
 * The SNMP trap receiver (net-snmp's `Receiver`, UDP): v2c traps/informs from the configured
 * communities and v3 from the configured USM users. Each notification becomes one `logs` row
 * (source `snmp_trap`, varbinds as attributes, linked to the device holding the sender's IP)
 * and one OCSF event linked to it, written in one transaction; the log then goes through the
 * event rules like every log (a matching rule adds its own event and alert). UDP cannot be
 * slowed: a trap refused for capacity is counted and logged.
 */
const SNMP_TRAP_OID = "1.3.6.1.6.3.1.1.4.1.0";
const SYS_UPTIME = "1.3.6.1.2.1.1.3.0";
const WELL_KNOWN: Record<string, [name: string, severity: "INFO" | "WARN"]> = {
  "1.3.6.1.6.3.1.1.5.1": ["coldStart", "INFO"],
  "1.3.6.1.6.3.1.1.5.2": ["warmStart", "INFO"],
  "1.3.6.1.6.3.1.1.5.3": ["linkDown", "WARN"],
  "1.3.6.1.6.3.1.1.5.4": ["linkUp", "INFO"],
  "1.3.6.1.6.3.1.1.5.5": ["authenticationFailure", "WARN"],
};
const MAX_VARBINDS = 256;

interface Varbind {
  oid: string;
  type: number;
  value: unknown;
}

function plain(v: unknown): unknown {
  if (Buffer.isBuffer(v)) {
    const text = v.toString("utf8");
    // Printable text stays text; anything else (MACs, counters64) is hex.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for control bytes
    return /^[^\x00-\x08\x0e-\x1f\x7f]*$/.test(text) && !text.includes("\ufffd")
      ? cleanText(text)
      : v.toString("hex");
  }
  if (typeof v === "bigint") return String(v);
  if (typeof v === "number" || typeof v === "string" || typeof v === "boolean") return v;
  return v === null || v === undefined ? null : String(v);
}

/** A notification PDU → a log row (no device yet). */
export function trapToLog(
  pdu: { type?: number; varbinds?: Varbind[] },
  sourceIp: string,
  version: string,
  now: Date,
): LogRow {
  const attrs = Object.create(null) as Record<string, unknown>;
  const varbinds = Object.create(null) as Record<string, unknown>;
  let trapOid = "";
  for (const vb of (pdu.varbinds ?? []).slice(0, MAX_VARBINDS)) {
    if (typeof vb?.oid !== "string") continue;
    if (vb.oid === SNMP_TRAP_OID) trapOid = String(vb.value);
    else if (vb.oid !== SYS_UPTIME) varbinds[vb.oid] = plain(vb.value);
    else attrs["snmp.sys_uptime"] = plain(vb.value);
  }
  const known = WELL_KNOWN[trapOid];
  attrs["snmp.version"] = version;
  attrs["snmp.trap_oid"] = trapOid || null;
  attrs["snmp.pdu_type"] = pdu.type === snmp.PduType.InformRequest ? "inform" : "trap";
  attrs["snmp.varbinds"] = varbinds;
  const severity = known?.[1] ?? "INFO";
  return {
    timestamp: now,
    observed_timestamp: now,
    severity_text: severity,
    severity_number: severity === "WARN" ? 13 : 9,
    body: `SNMP trap ${known ? `${known[0]} (${trapOid})` : trapOid || "(no snmpTrapOID)"} from ${sourceIp}`,
    event_name: known?.[0] ?? (trapOid || null),
    source: "snmp_trap",
    source_ip: sourceIp,
    host: sourceIp,
    attributes: attrs,
    ingest_identity: `snmp:${sourceIp}`,
  };
}

export interface TrapReceiver {
  readonly stats: { received: number; stored: number; dropped: number; refused: number };
  /** Resolves when every trap received so far is stored. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export function startTrapReceiver(
  ctx: AppContext,
  intake: Intake,
  opts: { host: string; port: number; communities: readonly string[]; users: readonly TrapUser[] },
): TrapReceiver {
  const stats = { received: 0, stored: 0, dropped: 0, refused: 0 };
  const inflight = new Set<Promise<void>>();

  async function store(row: LogRow): Promise<void> {
    await intake.sink.accept({ kind: "trap", row });
    stats.stored++;
  }

  const receiver = snmp.createReceiver(
    {
      port: opts.port,
      address: opts.host,
      transport: opts.host.includes(":") ? "udp6" : "udp4",
      disableAuthorization: false,
      includeAuthentication: false,
    },
    (
      error: Error | null,
      notification: { pdu: { type?: number; varbinds?: Varbind[] }; rinfo: { address: string } } | null,
    ) => {
      if (error || !notification) {
        stats.refused++;
        ctx.log.debug({ err: error }, "SNMP trap refused");
        return;
      }
      stats.received++;
      if (!intake.gate.tryAcquire(1)) {
        stats.dropped++;
        ctx.log.warn({ dropped: stats.dropped }, "SNMP trap dropped: ingest at capacity");
        return;
      }
      const ip = notification.rinfo.address.replace(/^::ffff:(?=\d+\.)/, "");
      const isV3 = (notification.pdu as { scoped?: boolean }).scoped === true;
      const row = trapToLog(notification.pdu, ip, isV3 ? "3" : "2c", ctx.now());
      const p: Promise<void> = store(row)
        .catch((err) => {
          stats.dropped++;
          ctx.log.warn({ err, source_ip: ip }, "SNMP trap could not be stored");
        })
        .finally(() => {
          intake.gate.release(1);
          inflight.delete(p);
        });
      inflight.add(p);
    },
  );
  const auth = receiver.getAuthorizer();
  for (const c of opts.communities) auth.addCommunity(c);
  for (const u of opts.users) {
    auth.addUser({
      name: u.name,
      level: u.privProtocol
        ? snmp.SecurityLevel.authPriv
        : u.authProtocol
          ? snmp.SecurityLevel.authNoPriv
          : snmp.SecurityLevel.noAuthNoPriv,
      authProtocol: u.authProtocol ? snmp.AuthProtocols[u.authProtocol] : undefined,
      authKey: u.authKey,
      privProtocol: u.privProtocol ? snmp.PrivProtocols[u.privProtocol] : undefined,
      privKey: u.privKey,
    });
  }
  ctx.log.info({ host: opts.host, port: opts.port }, "SNMP trap receiver listening");
  return {
    stats,
    async flush() {
      while (inflight.size > 0) await Promise.all([...inflight]);
    },
    async close() {
      await new Promise<void>((r) => receiver.close(() => r()));
      while (inflight.size > 0) await Promise.all([...inflight]);
    },
  };
}
