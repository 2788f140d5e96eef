import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { insertCapacityForecasts, type TelemetryRow } from "./write.ts";

/**
 * Capacity forecasts (issue 15 item 5): per disk (device/host + mount point) and per host's
 * memory, an ordinary least-squares line through the hourly rollups' average usage (percent)
 * over the last WINDOW_DAYS, projected HORIZON ahead: the value at the horizon, when the line
 * crosses 100 % (`projected_exhaustion_at`, only when rising), R² as `confidence`, and a 95 %
 * band from the residuals. Series with fewer than MIN_SAMPLES hours are written as `skipped`
 * with the reason, so the API says why there is no projection. Run hourly by the leader
 * (src/telemetry/feature.ts); forecasts older than KEEP_DAYS are deleted by the same pass.
 *
 * Linear only: seasonality (daily backup peaks) would need weeks of history and a model we
 * cannot yet validate on real data; the band widens instead when the fit is poor.
 */
export const WINDOW_DAYS = 14;
export const MIN_SAMPLES = 6;
export const HORIZON_SECONDS = 7 * 86_400;
export const KEEP_DAYS = 7;
const THRESHOLD = 100;
/** A crossing further out than this is noise on a flat line, not a forecast: left null. */
export const MAX_EXHAUSTION_SECONDS = 365 * 86_400;

export interface Fit {
  slope: number;
  intercept: number;
  r2: number;
  residualStd: number;
}

/** Least squares y = intercept + slope·x. */
export function linearFit(xs: readonly number[], ys: readonly number[]): Fit {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = (xs[i] as number) - mx;
    const dy = (ys[i] as number) - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  const slope = sxx === 0 ? 0 : sxy / sxx;
  const intercept = my - slope * mx;
  let sse = 0;
  for (let i = 0; i < n; i++) sse += ((ys[i] as number) - (intercept + slope * (xs[i] as number))) ** 2;
  const r2 = syy === 0 ? 1 : Math.max(0, 1 - sse / syy);
  return { slope, intercept, r2, residualStd: n > 2 ? Math.sqrt(sse / (n - 2)) : 0 };
}

interface Series {
  resource_key: string;
  resource_type: string;
  resource_id: string;
  resource_label: string;
  metric_name: string;
  points: { t: number; v: number }[];
}

async function loadSeries(db: Queryable, since: Date): Promise<Series[]> {
  const disks = await db.many<{
    device_id: string;
    host_id: string;
    mount_point: string;
    bucket: Date;
    v: number;
  }>(sql`
    SELECT device_id, host_id, mount_point, bucket, avg_usage AS v FROM disk_metrics_hourly
    WHERE bucket >= ${since} AND avg_usage IS NOT NULL ORDER BY bucket`);
  const memory = await db.many<{ device_id: string; host_id: string; bucket: Date; v: number }>(sql`
    SELECT device_id, host_id, bucket, avg_usage AS v FROM memory_metrics_hourly
    WHERE bucket >= ${since} AND avg_usage IS NOT NULL ORDER BY bucket`);
  const series = new Map<string, Series>();
  const add = (key: string, make: () => Omit<Series, "points">, t: Date, v: number) => {
    let s = series.get(key);
    if (!s) {
      s = { ...make(), points: [] };
      series.set(key, s);
    }
    s.points.push({ t: t.getTime() / 1000, v: Number(v) });
  };
  for (const r of disks) {
    const id = r.device_id || r.host_id;
    add(
      `disk:${id}:${r.mount_point}`,
      () => ({
        resource_key: `disk:${id}:${r.mount_point}`,
        resource_type: "disk",
        resource_id: id,
        resource_label: r.mount_point,
        metric_name: "disk_usage_percent",
      }),
      r.bucket,
      r.v,
    );
  }
  for (const r of memory) {
    const id = r.device_id || r.host_id;
    add(
      `memory:${id}`,
      () => ({
        resource_key: `memory:${id}`,
        resource_type: "memory",
        resource_id: id,
        resource_label: "memory",
        metric_name: "memory_usage_percent",
      }),
      r.bucket,
      r.v,
    );
  }
  return [...series.values()];
}

/** One series → its forecast row. */
export function forecastSeries(s: Series, now: Date): TelemetryRow<"capacity_forecasts"> {
  const nowSec = now.getTime() / 1000;
  const base = {
    forecasted_at: now,
    resource_key: s.resource_key,
    metric_name: s.metric_name,
    horizon_seconds: HORIZON_SECONDS,
    resource_type: s.resource_type,
    resource_id: s.resource_id,
    resource_label: s.resource_label,
    metric_class: "utilization",
    horizon_ends_at: new Date((nowSec + HORIZON_SECONDS) * 1000),
    window_started_at: s.points[0] ? new Date((s.points[0].t as number) * 1000) : null,
    window_ended_at: s.points.at(-1) ? new Date((s.points.at(-1)?.t as number) * 1000) : null,
    sample_count: s.points.length,
    model: "linear",
    exhaustion_threshold: THRESHOLD,
    current_value: s.points.at(-1)?.v ?? null,
  };
  if (s.points.length < MIN_SAMPLES) {
    return {
      ...base,
      status: "skipped",
      skip_reason: `needs ${MIN_SAMPLES} hourly samples, has ${s.points.length}`,
    };
  }
  const fit = linearFit(
    s.points.map((p) => p.t),
    s.points.map((p) => p.v),
  );
  const at = (t: number) => fit.intercept + fit.slope * t;
  const projected = at(nowSec + HORIZON_SECONDS);
  const exhaustionSec = fit.slope > 0 ? (THRESHOLD - fit.intercept) / fit.slope : null;
  const band = 1.96 * fit.residualStd;
  return {
    ...base,
    status: "projected",
    slope_per_second: fit.slope,
    // y = intercept + slope_per_second · (unix seconds); value_now in metadata.
    intercept: fit.intercept,
    projected_value: projected,
    projected_exhaustion_at:
      exhaustionSec !== null &&
      Number.isFinite(exhaustionSec) &&
      exhaustionSec < nowSec + MAX_EXHAUSTION_SECONDS
        ? new Date(Math.max(exhaustionSec, nowSec) * 1000)
        : null,
    confidence: Math.round(fit.r2 * 1000) / 1000,
    lower_bound: projected - band,
    upper_bound: projected + band,
    metadata: { window_days: WINDOW_DAYS, r2: fit.r2, residual_std: fit.residualStd, value_now: at(nowSec) },
  };
}

/** Compute and store the forecasts of every disk and memory series; returns how many. */
export async function computeCapacityForecasts(db: Queryable, now: Date): Promise<number> {
  const series = await loadSeries(db, new Date(now.getTime() - WINDOW_DAYS * 86_400_000));
  const rows = series.map((s) => forecastSeries(s, now));
  await insertCapacityForecasts(db, rows);
  await db.query(
    sql`DELETE FROM capacity_forecasts WHERE forecasted_at < ${new Date(now.getTime() - KEEP_DAYS * 86_400_000)}`,
  );
  return rows.length;
}

/** A forecast row as read back (the fields the alert signal needs). */
interface StoredForecast {
  resource_key: string;
  resource_type: string | null;
  resource_id: string | null;
  resource_label: string | null;
  metric_name: string;
  projected_exhaustion_at: Date | null;
  confidence: number | null;
  current_value: number | null;
  [key: string]: unknown;
}

export interface ExhaustionSignal {
  kind: "capacity.exhaustion_forecast" | "capacity.exhaustion_cleared";
  forecast: StoredForecast;
}

/**
 * What the latest run means for alerting: an `exhaustion_forecast` signal for every resource
 * projected to reach 100 % within the horizon, and an `exhaustion_cleared` signal for every
 * resource that was so projected by the previous run but no longer is. The feature emits each
 * as an internal log, so a stateful alert rule (`match: {event_type:
 * "capacity.exhaustion_forecast"}`, `recover_match: {event_type:
 * "capacity.exhaustion_cleared"}`, grouped by `resource_key`) alerts "disk full within 7 days".
 */
export async function exhaustionSignals(db: Queryable, now: Date): Promise<ExhaustionSignal[]> {
  const rows = await db.many<StoredForecast & { run: "current" | "previous" }>(sql`
    WITH runs AS (
      SELECT DISTINCT forecasted_at FROM capacity_forecasts WHERE forecasted_at <= ${now}
      ORDER BY forecasted_at DESC LIMIT 2)
    SELECT f.resource_key, f.resource_type, f.resource_id, f.resource_label, f.metric_name,
           f.projected_exhaustion_at, f.confidence, f.current_value,
           CASE WHEN f.forecasted_at = (SELECT max(forecasted_at) FROM runs) THEN 'current' ELSE 'previous' END AS run
    FROM capacity_forecasts f
    WHERE f.forecasted_at IN (SELECT forecasted_at FROM runs) AND f.status = 'projected'
      AND f.projected_exhaustion_at IS NOT NULL AND f.projected_exhaustion_at <= f.horizon_ends_at`);
  const current = rows.filter((r) => r.run === "current");
  const flagged = new Set(current.map((r) => r.resource_key));
  const cleared = rows.filter((r) => r.run === "previous" && !flagged.has(r.resource_key));
  return [
    ...current.map((forecast) => ({ kind: "capacity.exhaustion_forecast" as const, forecast })),
    ...cleared.map((forecast) => ({ kind: "capacity.exhaustion_cleared" as const, forecast })),
  ];
}
