import net from "node:net";

/**
 * Canonical text form of an IP address (IPv4 dotted quad; IPv6 compressed, lower case),
 * or null when the text is not a strict address. Leading/trailing space is trimmed; zones,
 * prefixes and IPv4 with leading zeros are rejected (as `:inet.parse_strict_address`).
 */
export function normalizeIp(input: unknown): string | null {
  if (typeof input !== "string") return null;
  const s = input.trim();
  if (s.length === 0 || s.length > 45) return null;
  const kind = net.isIP(s);
  if (kind === 4) {
    if (s.split(".").some((p) => p.length > 1 && p.startsWith("0"))) return null;
    return s;
  }
  if (kind === 6) {
    if (s.includes("%")) return null;
    try {
      const host = new URL(`http://[${s}]/`).hostname;
      return host.slice(1, -1);
    } catch {
      return null;
    }
  }
  return null;
}

/** Twelve lower-case hex digits of a MAC (any of `:`, `-`, `.` separators or none), or null. */
export function macHex(input: unknown): string | null {
  if (typeof input !== "string") return null;
  const hex = input.trim().replace(/[:.\-\s]/g, "");
  if (!/^[0-9a-fA-F]{12}$/.test(hex)) return null;
  return hex.toLowerCase();
}

/** Stored/display form: AA:BB:CC:DD:EE:FF. */
export function macColon(hex: string): string {
  return (hex.toUpperCase().match(/../g) as string[]).join(":");
}

export function normalizeMac(input: unknown): string | null {
  const hex = macHex(input);
  return hex ? macColon(hex) : null;
}

/** A locally administered MAC (second-least significant bit of the first octet) is weak evidence. */
export function isLocallyAdministered(hex: string): boolean {
  return (Number.parseInt(hex.slice(0, 2), 16) & 0x02) !== 0;
}

/** The all-zero and broadcast MACs identify nothing. */
export function isUselessMac(hex: string): boolean {
  return hex === "000000000000" || hex === "ffffffffffff";
}
