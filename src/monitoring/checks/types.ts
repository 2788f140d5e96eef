import type { TargetPolicy } from "../target-policy.ts";

export const CHECK_TYPES = ["ping", "http", "tcp", "snmp", "grpc", "dns", "mtr", "custom"] as const;
export type CheckType = (typeof CHECK_TYPES)[number];

export const CHECK_STATUSES = ["success", "warning", "critical", "unknown", "error"] as const;
export type CheckStatus = (typeof CHECK_STATUSES)[number];

/** What a runner needs to know about a check: the service check's definition, no DB state. */
export interface CheckSpec {
  id?: string;
  name?: string;
  check_type: CheckType;
  target: string;
  port?: number | null;
  timeout_seconds?: number | null;
  config?: Record<string, unknown> | null;
  warning_threshold_ms?: number | null;
  critical_threshold_ms?: number | null;
}

export interface CheckResult {
  status: CheckStatus;
  response_time_ms: number | null;
  error?: string;
  /** Numeric measurements (become time series). */
  metrics?: Record<string, number>;
  /** Anything else worth showing (answers, hops, varbinds, certificate…). */
  details?: Record<string, unknown>;
}

export interface RunOptions {
  /** SSRF guard; every runner resolves and vets its destination through it. */
  policy: TargetPolicy;
  /** Absolute paths of executables `custom` checks may run. */
  customAllowList?: readonly string[];
  signal?: AbortSignal;
}

export type CheckRunner = (spec: CheckSpec, opts: RunOptions) => Promise<CheckResult>;

export const FAILING_STATUSES: ReadonlySet<CheckStatus> = new Set(["critical", "unknown", "error"]);

export function timeoutMs(spec: CheckSpec, fallbackSeconds = 10): number {
  const s = spec.timeout_seconds && spec.timeout_seconds > 0 ? spec.timeout_seconds : fallbackSeconds;
  return Math.round(s * 1000);
}

export function cfg(spec: CheckSpec): Record<string, unknown> {
  return spec.config && typeof spec.config === "object" ? spec.config : {};
}

/**
 * Response-time classification: at or above critical → critical, at or above warning →
 * warning. Only a successful (or already warning) result is downgraded; failures stay.
 */
export function applyThresholds(result: CheckResult, spec: CheckSpec): CheckResult {
  const rt = result.response_time_ms;
  if (rt == null || (result.status !== "success" && result.status !== "warning")) return result;
  if (spec.critical_threshold_ms != null && rt >= spec.critical_threshold_ms) {
    return {
      ...result,
      status: "critical",
      error: result.error ?? `response time ${rt} ms ≥ critical threshold ${spec.critical_threshold_ms} ms`,
    };
  }
  if (spec.warning_threshold_ms != null && rt >= spec.warning_threshold_ms) {
    return {
      ...result,
      status: "warning",
      error: result.error ?? `response time ${rt} ms ≥ warning threshold ${spec.warning_threshold_ms} ms`,
    };
  }
  return result;
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

export function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
