/**
 * What route and silence matchers are evaluated against (issue 13): the alert itself, and —
 * read fresh from the inventory when the alert names them — its device (with its group and
 * tags) and its check. Silences for "everything in group core-switches" or "the checks named
 * https-*" therefore need no copy of those facts on the alert, and moving a device into a
 * group takes effect at the next notification.
 */
import type { Queryable } from "../../storage/db.ts";
import { sql } from "../../storage/sql.ts";
import type { AlertRow } from "../types.ts";

export interface MatchDevice {
  [column: string]: unknown;
  uid: string;
  hostname: string | null;
  name: string | null;
  ip: string | null;
  type: string | null;
  vendor_name: string | null;
  zone: string | null;
  group_id: string | null;
  group: string | null;
  tags: Record<string, unknown>;
}

export interface MatchCheck {
  [column: string]: unknown;
  id: string;
  name: string;
  check_type: string;
  target: string;
  agent_uid: string | null;
  gateway_id: string | null;
}

export interface AlertMatchContext {
  alert: Record<string, unknown>;
  device: Partial<Omit<MatchDevice, "uid">> & { uid: string | null };
  check: MatchCheck | null;
  [root: string]: unknown;
}

/** The alert part alone (no I/O): dedupe keys and callers without a database use this. */
export function alertOnlyContext(alert: AlertRow): AlertMatchContext {
  const { incident_key: _k, ...rest } = alert;
  return {
    alert: { ...rest, alert_class: alert.metadata?.alert_class ?? alert.source_type },
    device: { uid: alert.device_uid ?? null },
    check: null,
  };
}

/** The full context: alert, its device (with group name and tags) and its check. */
export async function alertMatchContext(q: Queryable, alert: AlertRow): Promise<AlertMatchContext> {
  const base = alertOnlyContext(alert);
  const [device, check] = await Promise.all([
    alert.device_uid
      ? q.one<MatchDevice>(sql`
          SELECT d.uid, d.hostname, d.name, d.ip, d.type, d.vendor_name, d.zone, d.group_id::text AS group_id,
                 g.name AS "group", d.tags
          FROM devices d LEFT JOIN device_groups g ON g.id = d.group_id
          WHERE d.uid = ${alert.device_uid}`)
      : undefined,
    alert.service_check_id
      ? q.one<MatchCheck>(sql`
          SELECT id::text AS id, name, check_type, target, agent_uid, gateway_id
          FROM service_checks WHERE id = ${alert.service_check_id}`)
      : undefined,
  ]);
  return { ...base, device: device ?? base.device, check: check ?? null };
}
