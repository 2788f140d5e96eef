/**
 * ICMP echo. Preferred: raw sockets (needs root or CAP_NET_RAW) through our own echo engine on
 * the `raw-socket` addon (`icmp-raw.ts`: one socket per address family shared by all concurrent
 * callers, a batch sent in a tight loop, one deadline timer per batch), IPv4 and IPv6. Fallback
 * (unprivileged, the addon unavailable, or NETMON_ICMP_BACKEND=fping): Debian's `fping` as a child
 * process, one invocation for a whole batch.
 *
 * Pacing: batches of loopback addresses go out as fast as the socket takes them (like
 * `fping -i 0`); any other batch is paced to DEFAULT_RATE_PER_SECOND (10,000) echo requests per
 * second per call unless `ratePerSecond` says otherwise (0 = unpaced). Sweeps additionally bound
 * their volume with the sweep's own `rate_per_second`.
 */
import { spawn } from "node:child_process";
import { readVariable } from "../../config/config.ts";
import {
  DEFAULT_RATE_PER_SECOND,
  type EchoReply,
  isLoopback,
  rawEchoOnce,
  rawIcmpAvailable,
} from "./icmp-raw.ts";

export type { EchoReply } from "./icmp-raw.ts";
export { DEFAULT_RATE_PER_SECOND } from "./icmp-raw.ts";

export type IcmpBackend = "raw" | "fping";

/** Which ICMP implementation this process uses (NETMON_ICMP_BACKEND=fping forces the fallback). */
export function icmpBackend(): IcmpBackend {
  if (readVariable("NETMON_ICMP_BACKEND") === "fping") return "fping";
  return rawIcmpAvailable() ? "raw" : "fping";
}

export interface EchoOptions {
  /** Echo requests per target (default 1); rounds are sequential. */
  count?: number;
  /** Per-request timeout (default 1000 ms, at least 50). */
  timeoutMs?: number;
  /** Pause between rounds (default 0). */
  intervalMs?: number;
  /**
   * Send rate of one round across its targets, packets per second; 0 (or Infinity) = as fast as
   * possible.
   * Default: unpaced when every target is loopback, else DEFAULT_RATE_PER_SECOND.
   */
  ratePerSecond?: number;
}

/**
 * Send `count` echo requests to each of `ips` (all targets of a round concurrently) and return
 * the replies per target. Duplicate addresses are probed once; the map has one entry each.
 */
export async function echo(
  ips: readonly string[],
  opts: EchoOptions = {},
): Promise<Map<string, EchoReply[]>> {
  const count = Math.max(1, opts.count ?? 1);
  const timeout = Math.max(50, opts.timeoutMs ?? 1000);
  const targets = [...new Set(ips)];
  const out = new Map<string, EchoReply[]>(targets.map((ip) => [ip, []]));
  const asked = opts.ratePerSecond ?? (targets.every(isLoopback) ? 0 : DEFAULT_RATE_PER_SECOND);
  const rate = Number.isFinite(asked) && asked > 0 ? asked : 0; // 0: unpaced
  if (icmpBackend() === "raw") {
    for (let i = 0; i < count; i++) {
      if (i > 0 && opts.intervalMs) await new Promise((r) => setTimeout(r, opts.intervalMs));
      const replies = await rawEchoOnce(targets, timeout, rate);
      replies.forEach((r, j) => {
        out.get(targets[j] as string)?.push(r);
      });
    }
    return out;
  }
  return fping(targets, count, timeout, opts.intervalMs ?? 0, rate, out);
}

/**
 * `fping -C <count> -q`: stderr lines "<ip> : 0.03 0.04 -" (one column per probe, "-" = lost).
 * -i (gap between any two packets) comes from the rate, -p (gap between rounds) from intervalMs.
 */
function fping(
  ips: readonly string[],
  count: number,
  timeout: number,
  intervalMs: number,
  ratePerSecond: number,
  out: Map<string, EchoReply[]>,
): Promise<Map<string, EchoReply[]>> {
  return new Promise((resolve) => {
    const args = [
      "-C",
      String(count),
      "-q",
      "-t",
      String(timeout),
      "-i",
      ratePerSecond > 0 ? (1000 / ratePerSecond).toFixed(3) : "0",
      "-p",
      String(Math.max(20, intervalMs || 20)),
      "-r",
      "0",
      ...ips,
    ];
    const child = spawn("fping", args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d.toString();
    });
    child.on("error", (err) => {
      for (const ip of ips)
        out.set(
          ip,
          Array.from({ length: count }, () => ({
            alive: false,
            rtt_ms: null,
            error: `fping: ${err.message}`,
          })),
        );
      resolve(out);
    });
    child.on("close", () => {
      for (const line of stderr.split("\n")) {
        const m = /^(\S+)\s+:\s+(.*)$/.exec(line.trim());
        if (!m || !out.has(m[1] as string)) continue;
        const cols = (m[2] as string).trim().split(/\s+/);
        out.set(
          m[1] as string,
          cols
            .slice(0, count)
            .map((c) =>
              c === "-"
                ? { alive: false, rtt_ms: null, error: "timeout" }
                : { alive: true, rtt_ms: Number(c) },
            ),
        );
      }
      for (const [ip, replies] of out) {
        if (replies.length === 0)
          out.set(
            ip,
            Array.from({ length: count }, () => ({ alive: false, rtt_ms: null, error: "no reply" })),
          );
      }
      resolve(out);
    });
  });
}

export function summarize(replies: readonly EchoReply[]): {
  sent: number;
  received: number;
  packet_loss: number;
  rtt_min_ms: number | null;
  rtt_avg_ms: number | null;
  rtt_max_ms: number | null;
} {
  const rtts = replies.filter((r) => r.alive && r.rtt_ms != null).map((r) => r.rtt_ms as number);
  const sent = replies.length;
  const received = rtts.length;
  const avg = received ? rtts.reduce((a, b) => a + b, 0) / received : null;
  return {
    sent,
    received,
    packet_loss: sent ? Math.round(((sent - received) / sent) * 10000) / 100 : 100,
    rtt_min_ms: received ? Math.min(...rtts) : null,
    rtt_avg_ms: avg == null ? null : Math.round(avg * 1000) / 1000,
    rtt_max_ms: received ? Math.max(...rtts) : null,
  };
}
