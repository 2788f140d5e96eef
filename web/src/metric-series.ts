/**
 * The Metrics page's data rules (DOM-free, unit-tested in test/web): the SRQL that fetches a
 * metric's points, and how points become chart series.
 */
import { text } from "./format.ts";

type R = Record<string, unknown>;

export interface PointSeries {
  label: string;
  /** Unix seconds → value (null = no single value). */
  points: Array<[number, number | null]>;
}

/** SRQL's own row cap; a longer range shows its newest points up to this many. */
export const MAX_POINTS = 5000;
/** Attribute names SRQL accepts after `attributes.`; anything else is refused before sending. */
const ATTR_KEY = /^[A-Za-z0-9_.-]{1,100}$/;
/** `last_<n><unit>` ranges only: the range comes from the URL and must stay one token. */
const RANGE = /^\d{1,4}[mhd]$/;

/** A value as one SRQL token: always quoted, so spaces, colons and quotes stay inside it. */
export function srqlQuote(v: string): string {
  return `"${v.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** `key=value` → the attribute filter; undefined when empty; "invalid" for a bad key. */
export function parseAttr(s: string | undefined): { key: string; value: string } | "invalid" | undefined {
  if (!s) return undefined;
  const eq = s.indexOf("=");
  const key = (eq < 0 ? "" : s.slice(0, eq)).trim();
  if (!ATTR_KEY.test(key)) return "invalid";
  return { key, value: s.slice(eq + 1).trim() };
}

/** The SRQL for a metric's points, newest first; "" when nothing valid to ask. */
export function metricPointsQuery(opts: {
  metric?: string;
  service?: string;
  attr?: string;
  range: string;
}): string {
  const attr = parseAttr(opts.attr);
  if (!opts.metric || attr === "invalid" || !RANGE.test(opts.range)) return "";
  return [
    "in:otel_metric_points",
    `metric_name:${srqlQuote(opts.metric)}`,
    opts.service ? `service_name:${srqlQuote(opts.service)}` : "",
    attr ? `attributes.${attr.key}:${srqlQuote(attr.value)}` : "",
    `time:last_${opts.range}`,
    "sort:timestamp:desc",
    `limit:${MAX_POINTS}`,
  ]
    .filter(Boolean)
    .join(" ");
}

export function pointValue(r: R): number | null {
  if (typeof r.value === "number") return r.value;
  // Histograms and summaries carry no single value: plot their mean.
  const count = Number(r.count);
  const sum = Number(r.sum);
  return Number.isFinite(count) && count > 0 && Number.isFinite(sum) ? sum / count : null;
}

/** One series per service and attribute set (named by them), points in time order. */
export function seriesOf(rows: R[]): PointSeries[] {
  const out = new Map<string, PointSeries>();
  for (const r of rows) {
    const attrs = r.attributes && typeof r.attributes === "object" ? (r.attributes as R) : {};
    const labels = Object.keys(attrs)
      .sort()
      .map((k) => `${k}=${text(attrs[k])}`)
      .join(", ");
    const name = `${text(r.service_name)}${labels ? ` {${labels}}` : ""}`;
    const s = out.get(name) ?? { label: name, points: [] };
    const t = Date.parse(String(r.timestamp));
    if (Number.isFinite(t)) s.points.push([t / 1000, pointValue(r)]);
    out.set(name, s);
  }
  const list = [...out.values()];
  for (const s of list) s.points.sort((a, b) => a[0] - b[0]);
  return list;
}
