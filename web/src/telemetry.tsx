/** Shared by the logs, traces and metrics pages: time ranges, severities, SRQL quoting. */

import { srql } from "./api.ts";
import { usePoll } from "./hooks.ts";

export const TIME_RANGES: Array<[string, string, number]> = [
  ["15m", "Last 15 minutes", 15 * 60],
  ["1h", "Last hour", 3600],
  ["6h", "Last 6 hours", 6 * 3600],
  ["24h", "Last 24 hours", 86400],
  ["7d", "Last 7 days", 7 * 86400],
];

/** The URL's range if it is one of ours, else the fallback. */
export function rangeKey(key: string | undefined, fallback = "1h"): string {
  return TIME_RANGES.some(([k]) => k === key) ? (key as string) : fallback;
}

export function rangeSeconds(key: string | undefined, fallback = "1h"): number {
  const hit = TIME_RANGES.find(([k]) => k === (key ?? fallback)) ?? TIME_RANGES.find(([k]) => k === fallback);
  return hit?.[2] ?? 3600;
}

/** The lower bound of a range as ISO-8601, for `filter[timestamp][greater_than_or_equal]`. */
export function sinceIso(key: string | undefined, fallback = "1h"): string {
  return new Date(Date.now() - rangeSeconds(key, fallback) * 1000).toISOString();
}

export function RangeSelect(props: { value: string; onChange: (v: string) => void; id?: string }) {
  return (
    <label>
      Time range{" "}
      <select id={props.id} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {TIME_RANGES.map(([k, label]) => (
          <option key={k} value={k}>
            {label}
          </option>
        ))}
      </select>
    </label>
  );
}

/**
 * OpenTelemetry severity bands (SeverityNumber 1–24). Filtering on the number, not the text,
 * also catches syslog records and producers that spell the text their own way.
 */
export const SEVERITIES: Array<[string, number]> = [
  ["TRACE", 1],
  ["DEBUG", 5],
  ["INFO", 9],
  ["WARN", 13],
  ["ERROR", 17],
  ["FATAL", 21],
];

/** A Badge tone word (see components/Ui.tsx) for a severity number. */
export function severityTone(n: unknown): string {
  const v = Number(n);
  if (!Number.isFinite(v) || v <= 0) return "unknown";
  if (v >= 17) return "error";
  if (v >= 13) return "warning";
  if (v >= 9) return "info";
  return "inactive";
}

/**
 * A free-text service filter (form field `service`) that suggests the names seen in the last
 * 7 days; `entity` and `field` name the SRQL grouping that lists them.
 */
export function ServiceInput(props: { label: string; entity: string; field: string; value: string }) {
  const names = usePoll(() => srql(`in:${props.entity} time:last_7d by:${props.field} limit:200`), 60_000, [
    props.entity,
    props.field,
  ]);
  const list = `${props.entity}-services`;
  const options = (names.data?.results ?? [])
    .map((r) => r[props.field])
    .filter((s): s is string => typeof s === "string" && s !== "");
  return (
    <>
      <label>
        {props.label} <input name="service" list={list} defaultValue={props.value} size={14} />
      </label>
      <datalist id={list}>
        {options.map((s) => (
          <option key={s} value={s} />
        ))}
      </datalist>
    </>
  );
}
