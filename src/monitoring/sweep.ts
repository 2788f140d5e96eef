/**
 * Network sweeps on the agent: expand CIDRs (IPv4, at most 65,536 addresses per sweep), ICMP
 * echo and TCP connect probes at a bounded rate (`rate_per_second` probes), skipping addresses
 * the SSRF guard refuses. Returns the hosts that answered.
 */
import net from "node:net";
import { echo } from "./checks/icmp.ts";
import type { TargetPolicy } from "./target-policy.ts";

export const MAX_SWEEP_ADDRESSES = 65_536;

export interface SweepSpec {
  id: string;
  name: string;
  cidrs: string[];
  ports: number[];
  rate_per_second: number;
  partition: string;
}

export interface SweepHost {
  ip: string;
  icmp: boolean;
  rtt_ms: number | null;
  open_ports: number[];
}

function ipToInt(ip: string): number {
  return ip.split(".").reduce((a, o) => a * 256 + Number(o), 0);
}
function intToIp(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

/** Every host address of the CIDRs (network/broadcast excluded for prefixes < 31). */
export function expandCidrs(cidrs: readonly string[], max = MAX_SWEEP_ADDRESSES): string[] {
  const out: string[] = [];
  for (const c of cidrs) {
    const [ip, bitsRaw] = c.trim().split("/");
    const bits = bitsRaw === undefined ? 32 : Number(bitsRaw);
    if (!ip || !net.isIPv4(ip) || !Number.isInteger(bits) || bits < 8 || bits > 32) {
      throw new Error(`'${c}' is not an IPv4 CIDR (prefix /8 to /32)`);
    }
    const size = 2 ** (32 - bits);
    const base = Math.floor(ipToInt(ip) / size) * size;
    const [first, last] = bits >= 31 ? [base, base + size - 1] : [base + 1, base + size - 2];
    for (let n = first; n <= last; n++) {
      if (out.length >= max) throw new Error(`sweep covers more than ${max} addresses`);
      out.push(intToIp(n));
    }
  }
  return [...new Set(out)];
}

function tcpOpen(ip: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: ip, port });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(timeoutMs, () => done(false));
    s.once("connect", () => done(true));
    s.once("error", () => done(false));
  });
}

export async function runSweep(
  spec: SweepSpec,
  policy: TargetPolicy,
  opts: { timeoutMs?: number } = {},
): Promise<SweepHost[]> {
  const all = expandCidrs(spec.cidrs).filter((ip) => {
    try {
      policy.vet(ip, null);
      return true;
    } catch {
      return false;
    }
  });
  const rate = Math.max(1, spec.rate_per_second);
  const timeout = opts.timeoutMs ?? 1000;
  const hosts = new Map<string, SweepHost>();
  const get = (ip: string) => {
    let h = hosts.get(ip);
    if (!h) {
      h = { ip, icmp: false, rtt_ms: null, open_ports: [] };
      hosts.set(ip, h);
    }
    return h;
  };
  // ICMP: one chunk of `rate` addresses per second.
  for (let i = 0; i < all.length; i += rate) {
    const t0 = Date.now();
    const chunk = all.slice(i, i + rate);
    // Spread the chunk over its second at the sweep's own rate (echo's default pacing is lower).
    const replies = await echo(chunk, { count: 1, timeoutMs: timeout, ratePerSecond: rate });
    for (const [ip, r] of replies) {
      if (r[0]?.alive) {
        const h = get(ip);
        h.icmp = true;
        h.rtt_ms = r[0].rtt_ms;
      }
    }
    const wait = 1000 - (Date.now() - t0);
    if (i + rate < all.length && wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  // TCP: every (address, port) pair, `rate` probes per second.
  const pairs = spec.ports.length === 0 ? [] : all.flatMap((ip) => spec.ports.map((p) => [ip, p] as const));
  for (let i = 0; i < pairs.length; i += rate) {
    const t0 = Date.now();
    const chunk = pairs.slice(i, i + rate);
    const open = await Promise.all(chunk.map(([ip, p]) => tcpOpen(ip, p, timeout)));
    chunk.forEach(([ip, p], j) => {
      if (open[j]) get(ip).open_ports.push(p);
    });
    const wait = 1000 - (Date.now() - t0);
    if (i + rate < pairs.length && wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  return [...hosts.values()].sort((a, b) => ipToInt(a.ip) - ipToInt(b.ip));
}
