import ipaddr from "ipaddr.js";

/**
 * Address arithmetic for the outbound guard: every address is parsed (all IPv4 spellings —
 * dotted, decimal `2130706433`, hex `0x7f000001`, octal `0177.0.0.1`, short `127.1`) and
 * unwrapped to the address that would really be reached (IPv4-mapped `::ffff:a.b.c.d`,
 * IPv4-compatible `::a.b.c.d`, NAT64 well-known prefix `64:ff9b::/96`), so the guard compares
 * addresses, never strings.
 */
export type Address = ipaddr.IPv4 | ipaddr.IPv6;

export type AddressClass = "unspecified" | "loopback" | "link-local" | "other";

const NAT64 = ipaddr.parseCIDR("64:ff9b::/96");

function embeddedV4(a: ipaddr.IPv6): ipaddr.IPv4 {
  const b = a.toByteArray();
  return new ipaddr.IPv4(b.slice(12, 16));
}

/** Parse and unwrap; null when `text` is not an IP address in any accepted spelling. */
export function parseAddress(text: string): Address | null {
  let t = text.trim();
  if (t.startsWith("[") && t.endsWith("]")) t = t.slice(1, -1);
  const zone = t.indexOf("%");
  if (zone > 0) t = t.slice(0, zone);
  let a: Address;
  try {
    a = ipaddr.parse(t);
  } catch {
    return null;
  }
  if (a.kind() === "ipv6") {
    const v6 = a as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
    if (v6.match(NAT64)) return embeddedV4(v6);
    const parts = v6.parts;
    // IPv4-compatible ::a.b.c.d (deprecated, still routed by some stacks); not :: or ::1.
    if (parts.slice(0, 6).every((p) => p === 0) && (parts[6] !== 0 || (parts[7] ?? 0) > 1))
      return embeddedV4(v6);
  }
  return a;
}

export function classify(a: Address): AddressClass {
  const range = a.range();
  if (range === "unspecified") return "unspecified";
  if (range === "loopback") return "loopback";
  if (range === "linkLocal") return "link-local";
  if (a.kind() === "ipv4" && (a as ipaddr.IPv4).octets[0] === 0) return "unspecified"; // 0.0.0.0/8: "this network"
  return "other";
}

export function sameAddress(a: Address, b: Address): boolean {
  return a.kind() === b.kind() && a.toNormalizedString() === b.toNormalizedString();
}

/** Canonical text (IPv4 dotted quad, IPv6 compressed) of an address. */
export function canonical(a: Address): string {
  return a.kind() === "ipv4" ? a.toString() : (a as ipaddr.IPv6).toRFC5952String();
}
