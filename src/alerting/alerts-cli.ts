/**
 * `netmon alerts list|show|ack|resolve|escalate|suppress|reopen`: the alert queue from a
 * terminal (or a script on the host), for when the console is out of reach. Every change runs
 * the alert resource's declared action through the action runner (src/alerting/actions.ts), so
 * its transition check and notification hooks are those of `POST /api/v2/alerts/{id}/…`; the
 * CLI acts as the system actor and records who acted as `cli:<user>` unless `--by` says.
 */
import os from "node:os";
import { SYSTEM_ACTOR } from "../access/actor.ts";
import { flag, flagAll, type ParsedArgs, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { withContext } from "../cli/database.ts";
import { cliIo, stderr, stdout } from "../cli/io.ts";
import { parseDurationSeconds } from "../kernel/duration.ts";
import { isUuid } from "../kernel/ids.ts";
import { join, raw, sql } from "../storage/sql.ts";
import { acknowledgeAlert, escalateAlert, reopenAlert, resolveAlert, suppressAlert } from "./actions.ts";
import { ACTIVE_STATUSES, ALERT_SEVERITIES, ALERT_STATUSES, type AlertRow } from "./types.ts";

const MAX_LIST = 10_000;

function oneOf<T extends string>(what: string, allowed: readonly T[], values: string[]): T[] {
  const out = values
    .flatMap((v) => v.split(","))
    .map((v) => v.trim())
    .filter((v) => v !== "");
  for (const v of out) {
    if (!(allowed as readonly string[]).includes(v)) {
      throw new UsageError(`--${what} must be one of ${allowed.join(", ")}, got '${v}'`);
    }
  }
  return out as T[];
}

function limitOf(args: ParsedArgs): number {
  const raw = flag(args, "limit") ?? "50";
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIST) {
    throw new UsageError(`--limit must be an integer from 1 to ${MAX_LIST}, got '${raw}'`);
  }
  return n;
}

/** Who acted, as the alert records it: --by, else the operating-system account. */
function byOf(args: ParsedArgs): string {
  const by = flag(args, "by")?.trim();
  if (by) return by;
  const env = cliIo().env;
  // A forwarded command runs in the server, whose account is the caller's (the channel's
  // socket is private to it), so the process's own user name is right in both cases.
  return `cli:${env.USER ?? env.LOGNAME ?? os.userInfo().username}`;
}

function untilOf(args: ParsedArgs, now: Date): Date | undefined {
  const until = flag(args, "until");
  const forRaw = flag(args, "for");
  if (until && forRaw) throw new UsageError("give --until or --for, not both");
  let d: Date;
  if (forRaw) {
    try {
      d = new Date(now.getTime() + parseDurationSeconds(forRaw) * 1000);
    } catch (err) {
      throw new UsageError(`--for ${(err as Error).message}`);
    }
  } else if (until) {
    d = new Date(until);
  } else {
    return undefined;
  }
  // Years 1-9999 only: what PostgreSQL stores and ISO 8601 prints (a huge --for overflows Date).
  const y = d.getUTCFullYear();
  if (Number.isNaN(d.getTime()) || y < 1 || y > 9999) {
    const name = forRaw ? "--for" : "--until";
    throw new UsageError(`${name} must give a time in the years 1-9999, got '${forRaw ?? until}'`);
  }
  return d;
}

const iso = (d: Date | null) => (d ? d.toISOString().replace(/\.\d{3}Z$/, "Z") : "-");

function line(a: AlertRow): string {
  return `${a.id}\t${a.severity}\t${a.status}\t${iso(a.triggered_at)}\t${a.device_uid ?? "-"}\t${a.title}\n`;
}

function details(a: AlertRow): string {
  const rows: [string, unknown][] = [
    ["id", a.id],
    ["title", a.title],
    ["severity", a.severity],
    ["status", a.status],
    ["source", a.source_type ? `${a.source_type}${a.source_id ? ` ${a.source_id}` : ""}` : null],
    ["device", a.device_uid],
    ["triggered", iso(a.triggered_at)],
    ["acknowledged", a.acknowledged_at ? `${iso(a.acknowledged_at)} by ${a.acknowledged_by}` : null],
    ["note", a.acknowledge_note],
    ["escalated", a.escalated_at ? `${iso(a.escalated_at)} level ${a.escalation_level}` : null],
    ["suppressed until", a.suppressed_until ? iso(a.suppressed_until) : null],
    ["resolved", a.resolved_at ? `${iso(a.resolved_at)} by ${a.resolved_by}` : null],
    ["resolution", a.resolution_note],
    ["notifications", a.notification_count],
    ["description", a.description],
  ];
  return rows
    .filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => `${`${k}:`.padEnd(18)}${String(v)}\n`)
    .join("");
}

export const alertsCommand: Command = {
  name: "alerts",
  summary: "List, show, acknowledge, resolve, escalate, suppress and reopen alerts",
  usage: `netmon alerts list [--status S[,S]...] [--severity S[,S]...] [--all] [--limit 50]
netmon alerts show ID
netmon alerts ack ID [--note TEXT] [--by NAME]
netmon alerts resolve ID [--note TEXT] [--by NAME]
netmon alerts escalate ID [--reason TEXT]
netmon alerts suppress ID (--for 2h | --until 2026-12-01T08:00:00Z)   (no option: indefinitely)
netmon alerts reopen ID

'list' shows open alerts (pending, acknowledged, escalated), newest first, one per line:
ID, severity, status, triggered, device, title (tab-separated). --all includes suppressed and
resolved ones. Changes run the same actions as the API: the transition is checked, and
acknowledging or resolving stops the alert's notifications. --by defaults to cli:$USER.`,
  booleanFlags: ["all"],
  async run(args) {
    const [action, id] = args.positionals;
    if (action === "list") {
      const statuses = oneOf("status", ALERT_STATUSES, flagAll(args, "status"));
      const severities = oneOf("severity", ALERT_SEVERITIES, flagAll(args, "severity"));
      const limit = limitOf(args);
      const wanted = statuses.length > 0 ? statuses : args.flags.has("all") ? [] : [...ACTIVE_STATUSES];
      const where = [
        ...(wanted.length > 0 ? [sql`status = ANY(${wanted}::text[])`] : []),
        ...(severities.length > 0 ? [sql`severity = ANY(${severities}::text[])`] : []),
      ];
      const rows = await withContext((ctx) =>
        ctx.db.many<AlertRow>(sql`
          SELECT * FROM alerts ${where.length > 0 ? sql`WHERE ${join(where, " AND ")}` : raw("")}
          ORDER BY triggered_at DESC, id LIMIT ${limit}`),
      );
      for (const r of rows) stdout(line(r));
      return 0;
    }
    if (!action) throw new UsageError("expected list, show, ack, resolve, escalate, suppress or reopen");
    if (!["show", "ack", "resolve", "escalate", "suppress", "reopen"].includes(action)) {
      throw new UsageError(`unknown action '${action}' (see netmon alerts --help)`);
    }
    if (!id) throw new UsageError("ID is required");
    if (!isUuid(id)) {
      stderr(`error: no alert ${id}\n`);
      return 1;
    }
    // Flags are checked before the database is opened: bad input fails at once.
    const until = action === "suppress" ? untilOf(args, new Date()) : undefined;
    const row = await withContext(async (ctx) => {
      switch (action) {
        case "show":
          return ctx.db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${id}`);
        case "ack":
          return acknowledgeAlert(ctx, SYSTEM_ACTOR, id, {
            acknowledged_by: byOf(args),
            ...(flag(args, "note") ? { note: flag(args, "note") } : {}),
          });
        case "resolve":
          return resolveAlert(ctx, SYSTEM_ACTOR, id, {
            resolved_by: byOf(args),
            ...(flag(args, "note") ? { resolution_note: flag(args, "note") } : {}),
          });
        case "escalate":
          return escalateAlert(ctx, SYSTEM_ACTOR, id, {
            ...(flag(args, "reason") ? { reason: flag(args, "reason") } : {}),
          });
        case "suppress":
          return suppressAlert(ctx, SYSTEM_ACTOR, id, until ? { until } : {});
        default:
          return reopenAlert(ctx, SYSTEM_ACTOR, id);
      }
    });
    if (!row) {
      stderr(`error: no alert ${id}\n`);
      return 1;
    }
    stdout(action === "show" ? details(row) : line(row));
    return 0;
  },
};
