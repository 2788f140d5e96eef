import { SYSTEM_ACTOR } from "../access/actor.ts";
import { promoteWrittenLogs } from "../alerting/event-rules.ts";
import { ocsfFromSeverityNumber, ocsfSeverityName } from "../alerting/match.ts";
import { resolveAddresses } from "../inventory/identity.ts";
import type { AppContext } from "../kernel/context.ts";
import type { Queryable } from "../storage/db.ts";
import { spanMetrics } from "./otlp/map.ts";
import {
  insertEvents,
  insertLogs,
  insertMetricPoints,
  insertOtelMetrics,
  insertSpans,
  type LogRow,
  type SpanRow,
  type TelemetryRow,
} from "./write.ts";

/**
 * One unit of ingest: what a receiver accepted from one sender request (an OTLP export, a batch
 * of syslog messages, one trap), already mapped to rows. A unit is stored whole or not at all,
 * and it is the thing that travels through JetStream when NATS_URL is set — so it is plain data
 * that survives `encodeUnit`/`decodeUnit`.
 */
export type IngestUnit =
  | { kind: "logs"; rows: LogRow[] }
  | { kind: "metrics"; rows: TelemetryRow<"otel_metric_points">[] }
  | { kind: "spans"; rows: SpanRow[] }
  /** Syslog rows whose sender is linked to a device by source_ip when they are stored. */
  | { kind: "syslog"; rows: LogRow[] }
  /** One SNMP trap: a log row plus an OCSF event linked to it. */
  | { kind: "trap"; row: LogRow };

export type UnitKind = IngestUnit["kind"];
export const UNIT_KINDS: readonly UnitKind[] = ["logs", "metrics", "spans", "syslog", "trap"];

/** Records in a unit (what the ingest gate counts). */
export function unitSize(unit: IngestUnit): number {
  return unit.kind === "trap" ? 1 : unit.rows.length;
}

// Dates and bigints do not survive JSON; they travel tagged and come back as themselves, so the
// consumer writes exactly the values the receiver mapped.
const DATE_TAG = "$netmon_date";
const BIGINT_TAG = "$netmon_bigint";

export function encodeUnit(unit: IngestUnit): Uint8Array {
  const text = JSON.stringify(unit, function (this: Record<string, unknown>, key, value) {
    const original = this[key];
    if (original instanceof Date) return { [DATE_TAG]: original.toISOString() };
    if (typeof value === "bigint") return { [BIGINT_TAG]: value.toString() };
    return value;
  });
  return new TextEncoder().encode(text);
}

export function decodeUnit(bytes: Uint8Array): IngestUnit {
  const parsed = JSON.parse(new TextDecoder().decode(bytes), (_key, value) => {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      const keys = Object.keys(value);
      if (keys.length === 1 && keys[0] === DATE_TAG) return new Date(value[DATE_TAG]);
      if (keys.length === 1 && keys[0] === BIGINT_TAG) return BigInt(value[BIGINT_TAG]);
    }
    return value;
  }) as { kind?: unknown };
  if (typeof parsed !== "object" || parsed === null || !UNIT_KINDS.includes(parsed.kind as UnitKind)) {
    throw new Error("not an ingest unit");
  }
  return parsed as IngestUnit;
}

/** Device uid per source address (default partition) for rows that name a sender. */
async function devicesByAddress(ctx: AppContext, ips: readonly string[]): Promise<Map<string, string>> {
  const unique = [...new Set(ips)];
  const resolved = await resolveAddresses(
    ctx.db,
    SYSTEM_ACTOR,
    unique.map((ip) => ({ ip, partition: "default" })),
  );
  const device = new Map<string, string>();
  resolved.forEach((r, i) => {
    if (r.ok) device.set(unique[i] as string, r.uid);
  });
  return device;
}

/** A stored log and the row it was written from (promotion matches rules against it). */
interface Written {
  id: string;
  row: LogRow;
}

async function writeLogs(tx: Queryable, rows: readonly LogRow[]): Promise<Written[]> {
  const ids = await insertLogs(tx, rows);
  return ids.map((id, i) => ({ id, row: rows[i] as LogRow }));
}

/**
 * Store one unit in one transaction and run log promotion after the commit; returns the stored
 * log ids. `claim`, when given, runs first inside the transaction and returns false when the
 * unit was stored before (the JetStream writer's redelivery check) — then nothing is written.
 */
export async function storeUnit(
  ctx: AppContext,
  unit: IngestUnit,
  claim?: (tx: Queryable) => Promise<boolean>,
): Promise<{ stored: boolean; logIds: string[] }> {
  let write: (tx: Queryable) => Promise<Written[]>;
  if (unit.kind === "logs") {
    write = (tx) => writeLogs(tx, unit.rows);
  } else if (unit.kind === "metrics") {
    write = async (tx) => {
      await insertMetricPoints(tx, unit.rows);
      return [];
    };
  } else if (unit.kind === "spans") {
    write = async (tx) => {
      await insertSpans(tx, unit.rows);
      await insertOtelMetrics(tx, spanMetrics(unit.rows));
      return [];
    };
  } else if (unit.kind === "syslog") {
    // Resolved outside the transaction: identity lookups read, they need not hold the write open.
    const device = await devicesByAddress(
      ctx,
      unit.rows.map((r) => String(r.source_ip)),
    );
    const rows = unit.rows.map((r) => ({ ...r, device_id: device.get(String(r.source_ip)) ?? null }));
    write = (tx) => writeLogs(tx, rows);
  } else {
    const ip = String(unit.row.source_ip);
    const device = (await devicesByAddress(ctx, [ip])).get(ip) ?? null;
    const row = { ...unit.row, device_id: device };
    write = async (tx) => {
      const [logId] = await insertLogs(tx, [row]);
      const sev = ocsfFromSeverityNumber(Number(row.severity_number));
      await insertEvents(tx, [
        {
          time: row.timestamp,
          message: row.body,
          short_message: row.event_name,
          severity_id: sev,
          severity: ocsfSeverityName(sev),
          log_name: "snmp_trap",
          log_provider: "netmon",
          source: "snmp_trap",
          source_type: "snmp_trap",
          device_uid: device,
          host: ip,
          log_id: logId,
          raw: row.attributes as Record<string, unknown>,
        },
      ]);
      return logId ? [{ id: logId, row }] : [];
    };
  }
  const result = await ctx.db.transaction(async (tx) => {
    if (claim && !(await claim(tx))) return null;
    return write(tx);
  });
  if (result === null) return { stored: false, logIds: [] };
  // Promotion errors are logged per log by the event rules; the logs themselves are stored.
  if (result.length > 0) await promoteWrittenLogs(ctx, result);
  return { stored: true, logIds: result.map((w) => w.id) };
}
