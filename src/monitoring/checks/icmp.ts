/**
 * ICMP echo. Preferred: raw sockets through `net-ping` (needs root or CAP_NET_RAW), one shared
 * session for any number of concurrent targets. Fallback (unprivileged, or the native addon
 * unavailable): Debian's `fping` as a child process, one invocation for a whole batch.
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

export interface EchoReply {
  alive: boolean;
  rtt_ms: number | null;
  error?: string;
}

interface NetPingSession {
  pingHost(target: string, cb: (err: Error | null, target: string, sent?: Date, rcvd?: Date) => void): void;
  close(): void;
  on(ev: string, cb: (err: Error) => void): void;
}

let session: NetPingSession | null | undefined;
let sessionTimeout = 0;

export type IcmpBackend = "raw" | "fping";

/** Which ICMP implementation this process uses (NETMON_ICMP_BACKEND=fping forces the fallback). */
export function icmpBackend(): IcmpBackend {
  if (process.env.NETMON_ICMP_BACKEND === "fping") return "fping";
  return rawSession(1000) ? "raw" : "fping";
}

function rawSession(timeout: number): NetPingSession | null {
  if (session !== undefined && (session === null || sessionTimeout === timeout)) return session;
  if (process.getuid?.() !== 0) {
    session = null;
    return null;
  }
  try {
    const netPing = require("net-ping") as {
      createSession(o: Record<string, unknown>): NetPingSession;
    };
    session?.close();
    session = netPing.createSession({ timeout, retries: 0, packetSize: 16 });
    session.on("error", () => {
      session = undefined;
    });
    sessionTimeout = timeout;
    return session;
  } catch {
    session = null;
    return null;
  }
}

function rawEcho(s: NetPingSession, ip: string): Promise<EchoReply> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    s.pingHost(ip, (err) => {
      const rtt = performance.now() - t0;
      if (err) resolve({ alive: false, rtt_ms: null, error: err.message || err.constructor.name });
      else resolve({ alive: true, rtt_ms: Math.round(rtt * 1000) / 1000 });
    });
  });
}

/**
 * Send `count` echo requests to each of `ips` (all targets concurrently) and return the
 * replies per target, in order.
 */
export async function echo(
  ips: readonly string[],
  opts: { count?: number; timeoutMs?: number; intervalMs?: number } = {},
): Promise<Map<string, EchoReply[]>> {
  const count = Math.max(1, opts.count ?? 1);
  const timeout = Math.max(50, opts.timeoutMs ?? 1000);
  const out = new Map<string, EchoReply[]>(ips.map((ip) => [ip, []]));
  const s = process.env.NETMON_ICMP_BACKEND === "fping" ? null : rawSession(timeout);
  if (s) {
    for (let i = 0; i < count; i++) {
      if (i > 0 && opts.intervalMs) await new Promise((r) => setTimeout(r, opts.intervalMs));
      const replies = await Promise.all(ips.map((ip) => rawEcho(s, ip)));
      replies.forEach((r, j) => {
        out.get(ips[j] as string)?.push(r);
      });
    }
    return out;
  }
  return fping(ips, count, timeout, opts.intervalMs ?? 0, out);
}

/** `fping -C <count> -q`: stderr lines "<ip> : 0.03 0.04 -" (one column per probe, "-" = lost). */
function fping(
  ips: readonly string[],
  count: number,
  timeout: number,
  intervalMs: number,
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
      String(Math.max(0, intervalMs)),
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
