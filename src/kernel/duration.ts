const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86400 } as const;

/**
 * The one duration syntax: `90s`, `15m`, `12h`, `7d` → seconds. With `bareSeconds`, a plain
 * number is seconds too (credential lifetimes accept `3600`). Throws an Error whose message
 * completes "X must …" for the caller's own error.
 */
export function parseDurationSeconds(raw: string, opts: { bareSeconds?: boolean } = {}): number {
  const m = /^(\d+)(s|m|h|d)?$/.exec(raw.trim());
  if (!m || (m[2] === undefined && !opts.bareSeconds)) {
    throw new Error(
      `must be a duration like ${opts.bareSeconds ? "3600, " : ""}90s, 15m, 12h or 7d, got '${raw}'`,
    );
  }
  return Number(m[1]) * UNIT_SECONDS[(m[2] ?? "s") as keyof typeof UNIT_SECONDS];
}
