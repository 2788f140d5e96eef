import parseSyslog from "nsyslog-parser";
import { cleanText } from "../otlp/map.ts";
import type { LogRow } from "../write.ts";
import { parseRfc5424 } from "./rfc5424.ts";

/**
 * One syslog message (RFC 5424 or RFC 3164, detected per message) → a `logs` row. RFC 5424 is
 * parsed by `rfc5424.ts`, RFC 3164 (and anything else) by nsyslog-parser (decision 0310); this
 * module bounds the input, maps facility and severity, and keeps structured data in
 * null-prototype objects (SD-IDs and names are sender data).
 *
 * Severity (RFC 5424 §6.2.1) → OTel severity number/text: 0–2 FATAL(21), 3 ERROR(17),
 * 4 WARN(13), 5–6 INFO(9/10), 7 DEBUG(5).
 */

/** Longest message parsed (RFC 5424 §6.1: receivers SHOULD accept 2048 octets, MAY truncate). */
export const MAX_SYSLOG_MESSAGE = 8192;

const FACILITIES = [
  "kern",
  "user",
  "mail",
  "daemon",
  "auth",
  "syslog",
  "lpr",
  "news",
  "uucp",
  "cron",
  "authpriv",
  "ftp",
  "ntp",
  "security",
  "console",
  "solaris-cron",
  "local0",
  "local1",
  "local2",
  "local3",
  "local4",
  "local5",
  "local6",
  "local7",
] as const;

const SEVERITY: readonly [text: string, number: number][] = [
  ["FATAL", 21], // 0 emergency
  ["FATAL", 22], // 1 alert
  ["FATAL", 21], // 2 critical
  ["ERROR", 17], // 3 error
  ["WARN", 13], // 4 warning
  ["INFO", 10], // 5 notice
  ["INFO", 9], // 6 informational
  ["DEBUG", 5], // 7 debug
];
const SEVERITY_NAMES = [
  "emergency",
  "alert",
  "critical",
  "error",
  "warning",
  "notice",
  "informational",
  "debug",
];

interface Parsed {
  type?: string;
  prival?: number | null;
  facilityval?: number;
  levelval?: number;
  ts?: string | Date;
  host?: string;
  appName?: string;
  pid?: string;
  messageid?: string;
  message?: string;
  structuredData?: Record<string, unknown>[];
  version?: number;
}

const text = (v: unknown): string | null =>
  typeof v === "string" && v !== "" && v !== "-" ? cleanText(v) : null;

function structured(sd: unknown): Record<string, Record<string, string>> {
  const out = Object.create(null) as Record<string, Record<string, string>>;
  if (!Array.isArray(sd)) return out;
  for (const el of sd) {
    if (!el || typeof el !== "object") continue;
    const params = Object.create(null) as Record<string, string>;
    let id = "";
    for (const [k, v] of Object.entries(el as Record<string, unknown>)) {
      if (k === "$id") id = String(v);
      else params[cleanText(k)] = cleanText(String(v));
    }
    if (id) out[cleanText(id)] = params;
  }
  return out;
}

/** Parse one message received from `sourceIp` at `now`. Never throws. */
export function syslogToLog(
  raw: string,
  sourceIp: string,
  transport: "udp" | "tcp" | "tls",
  now: Date,
): LogRow {
  const truncated = raw.length > MAX_SYSLOG_MESSAGE;
  const line = (truncated ? raw.slice(0, MAX_SYSLOG_MESSAGE) : raw).replace(/[\r\n]+$/, "");
  let p: Parsed = {};
  const r5424 = parseRfc5424(line);
  if (r5424) {
    p = {
      type: "RFC5424",
      prival: r5424.pri,
      facilityval: r5424.pri >> 3,
      levelval: r5424.pri & 7,
      ts: r5424.timestamp ?? undefined,
      host: r5424.hostname ?? undefined,
      appName: r5424.appName ?? undefined,
      pid: r5424.procId ?? undefined,
      messageid: r5424.msgId ?? undefined,
      message: r5424.message,
    };
  } else {
    try {
      p = parseSyslog(line) as Parsed;
    } catch {
      p = {};
    }
  }
  const known = p.type === "RFC5424" || p.type === "BSD";
  const hasPri = typeof p.prival === "number" && p.prival >= 0 && p.prival <= 191;
  const sev = hasPri ? (p.levelval ?? 6) : 6;
  const fac = hasPri ? (p.facilityval ?? 1) : 1;
  const ts = known && p.ts ? new Date(p.ts) : null;
  // A sender clock decades off (or an unparsable date) keeps the message, at receipt time.
  const time =
    ts && Number.isFinite(ts.getTime()) && Math.abs(ts.getTime() - now.getTime()) < 366 * 86_400_000
      ? ts
      : now;
  const attributes = Object.create(null) as Record<string, unknown>;
  attributes["syslog.format"] = p.type === "RFC5424" ? "rfc5424" : p.type === "BSD" ? "rfc3164" : "unknown";
  attributes["syslog.facility"] = fac;
  attributes["syslog.severity"] = sev;
  attributes["syslog.severity_name"] = SEVERITY_NAMES[sev] ?? null;
  attributes["syslog.transport"] = transport;
  const procid = text(p.pid);
  const msgid = text(p.messageid);
  if (procid) attributes["syslog.procid"] = procid;
  if (msgid) attributes["syslog.msgid"] = msgid;
  if (truncated) attributes["syslog.truncated"] = true;
  const sd = r5424 ? r5424.structuredData : structured(p.structuredData);
  if (Object.keys(sd).length > 0) attributes["syslog.structured_data"] = sd;
  const [sevText, sevNum] = SEVERITY[sev] ?? ["INFO", 9];
  return {
    timestamp: time,
    observed_timestamp: now,
    severity_text: sevText,
    severity_number: sevNum,
    body: cleanText(known ? (p.message ?? "") : line),
    service_name: known ? text(p.appName) : null,
    host: known ? text(p.host) : null,
    facility: FACILITIES[fac] ?? String(fac),
    source: "syslog",
    source_ip: sourceIp,
    attributes,
    ingest_identity: `syslog:${sourceIp}`,
  };
}
