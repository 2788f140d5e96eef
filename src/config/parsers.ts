import { parseDurationSeconds } from "../kernel/duration.ts";
/** Value parsers for environment variables. Each throws a plain Error whose message completes "<VAR> ...". */

export type Parser<T> = (raw: string) => T;

export const str: Parser<string> = (raw) => {
  if (raw.trim() === "") throw new Error("must not be empty");
  return raw;
};

export const int =
  (min: number, max: number): Parser<number> =>
  (raw) => {
    if (!/^-?\d+$/.test(raw.trim())) throw new Error(`must be an integer, got '${raw}'`);
    const n = Number(raw);
    if (n < min || n > max) throw new Error(`must be between ${min} and ${max}, got ${n}`);
    return n;
  };

const TRUE = new Set(["1", "true", "yes", "on"]);
const FALSE = new Set(["0", "false", "no", "off", ""]);

export const bool: Parser<boolean> = (raw) => {
  const v = raw.trim().toLowerCase();
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  throw new Error(`must be true or false, got '${raw}'`);
};

export const oneOf =
  <T extends string>(...values: readonly T[]): Parser<T> =>
  (raw) => {
    if ((values as readonly string[]).includes(raw)) return raw as T;
    throw new Error(`must be one of ${values.join(", ")}, got '${raw}'`);
  };

export const url =
  (...protocols: string[]): Parser<string> =>
  (raw) => {
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw new Error(`must be a URL, got '${redactUrl(raw)}'`);
    }
    if (protocols.length > 0 && !protocols.includes(u.protocol.replace(/:$/, ""))) {
      throw new Error(`must use ${protocols.join(" or ")}, got '${u.protocol}'`);
    }
    return raw;
  };

export interface Rate {
  requests: number;
  windowSeconds: number;
}

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600 };

/** `<requests>/<window>` such as `120/60s`, `10/1m`. */
export const rate: Parser<Rate> = (raw) => {
  const m = /^(\d+)\/(\d+)(s|m|h)?$/.exec(raw.trim());
  if (!m) throw new Error(`must look like <requests>/<window>, e.g. 120/60s, got '${raw}'`);
  const requests = Number(m[1]);
  const windowSeconds = Number(m[2]) * (UNIT_SECONDS[m[3] ?? "s"] ?? 1);
  if (requests < 1 || windowSeconds < 1)
    throw new Error(`must have at least 1 request and a 1s window, got '${raw}'`);
  return { requests, windowSeconds };
};

/** Comma-separated list of IPs or CIDRs. */
export const list: Parser<string[]> = (raw) =>
  raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");

/** Durations such as 30s, 15m, 12h, 7d → seconds. */
export const duration: Parser<number> = (raw) => parseDurationSeconds(raw);

/** Hide the password part of a URL before it is printed. */
export function redactUrl(raw: string): string {
  return raw.replace(/\/\/([^:/@]+):([^@/]*)@/, "//$1:***@");
}
