import type { TimeNode } from "./ast.ts";
import { SrqlError } from "./errors.ts";

export const DAY_MS = 86_400_000;
/** Maximum window of a `time:` token (reference §1.4). */
export const MAX_RANGE_DAYS = 90;
/** Stats and downsampling over metrics entities may look back further. */
export const MAX_LONG_RANGE_DAYS = 395;

export interface TimeRange {
  from: Date | null;
  to: Date | null;
}

const ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?(Z|[+-]\d{2}:?\d{2})?$/i;

/** RFC 3339 / `YYYY-MM-DD HH:MM:SS` (UTC when no offset) / `YYYY-MM-DD`, or null. */
export function parseTimestamp(text: string): Date | null {
  const t = text.trim();
  const m = ISO.exec(t);
  if (!m) return null;
  const [, y, mo, d, h = "00", mi = "00", s = "00", frac = "0", zone] = m;
  const month = Number(mo);
  const day = Number(d);
  if (month < 1 || month > 12 || day < 1 || day > 31 || Number(h) > 23 || Number(mi) > 59 || Number(s) > 60) {
    return null;
  }
  const ms = Number(frac.padEnd(3, "0").slice(0, 3));
  let iso = `${y}-${mo}-${d}T${h}:${mi}:${s}.${String(ms).padStart(3, "0")}`;
  if (!zone || zone.toUpperCase() === "Z") iso += "Z";
  else iso += zone.length === 5 ? `${zone.slice(0, 3)}:${zone.slice(3)}` : zone;
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return null;
  const year = date.getUTCFullYear();
  if (year < 1 || year > 9999) return null;
  return date;
}

function utcMidnight(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
}

/** Resolve a `time:` token against `now`, enforcing the maximum range. */
export function resolveTime(node: TimeNode, now: Date, maxDays: number): TimeRange {
  const err = (msg: string) => new SrqlError(msg, node.token, node.span);
  let from: Date | null;
  let to: Date | null;
  switch (node.kind) {
    case "relative":
      if (node.seconds * 1000 > maxDays * DAY_MS) throw err(`time range cannot exceed ${maxDays} days`);
      return { from: new Date(now.getTime() - node.seconds * 1000), to: null };
    case "today":
      return { from: utcMidnight(now), to: null };
    case "yesterday": {
      const mid = utcMidnight(now);
      return { from: new Date(mid.getTime() - DAY_MS), to: mid };
    }
    case "range": {
      from = node.from === null ? null : parseTimestamp(node.from);
      to = node.to === null ? null : parseTimestamp(node.to);
      if (node.from !== null && from === null) throw err(`invalid time literal '${node.from}'`);
      if (node.to !== null && to === null) throw err(`invalid time literal '${node.to}'`);
      if (from === null && to !== null) from = new Date(to.getTime() - maxDays * DAY_MS);
      if (from && to && from.getTime() >= to.getTime()) throw err("time range start must be before end");
      const end = to ?? now;
      if (from && end.getTime() - from.getTime() > maxDays * DAY_MS) {
        throw err(`time range cannot exceed ${maxDays} days`);
      }
      return { from, to };
    }
  }
}
