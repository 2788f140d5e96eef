import { execFile } from "node:child_process";
import { TargetRefusedError } from "../target-policy.ts";
import { applyThresholds, type CheckRunner, cfg, errorMessage, timeoutMs } from "./types.ts";

export interface MtrHop {
  hop: number;
  host: string;
  loss_percent: number;
  sent: number;
  last_ms: number;
  avg_ms: number;
  best_ms: number;
  worst_ms: number;
}

/** Parse `mtr --json` output into hops. */
export function parseMtrJson(text: string): MtrHop[] {
  const doc = JSON.parse(text) as { report?: { hubs?: Record<string, unknown>[] } };
  return (doc.report?.hubs ?? []).map((h) => ({
    hop: Number(h.count),
    host: String(h.host),
    loss_percent: Number(h["Loss%"]),
    sent: Number(h.Snt),
    last_ms: Number(h.Last),
    avg_ms: Number(h.Avg),
    best_ms: Number(h.Best),
    worst_ms: Number(h.Wrst),
  }));
}

/**
 * MTR check through Debian's `mtr` (mtr-tiny) in report mode with JSON output: per-hop loss
 * and latency. config: count (3 probes per hop), max_hops (30), loss_critical_percent (100 at
 * the last hop). Target reached = the last hop is the target address with < 100 % loss.
 */
export const runMtr: CheckRunner = async (spec, opts) => {
  const c = cfg(spec);
  let ip: string;
  try {
    ip = await opts.policy.resolve(spec.target, null);
  } catch (err) {
    return {
      status: err instanceof TargetRefusedError ? "error" : "critical",
      response_time_ms: null,
      error: errorMessage(err),
    };
  }
  const count = Math.min(10, Math.max(1, Number(c.count ?? 3) || 3));
  const maxHops = Math.min(64, Math.max(1, Number(c.max_hops ?? 30) || 30));
  const limit = timeoutMs(spec, 30);
  const args = [
    "--json",
    "-n",
    "-c",
    String(count),
    "-m",
    String(maxHops),
    "-Z",
    "1",
    ...(process.getuid?.() === 0 ? ["-i", "0.2"] : []),
    ip,
  ];
  let out: string;
  try {
    out = await new Promise<string>((resolve, reject) => {
      execFile("mtr", args, { timeout: limit, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
        if (err) reject(new Error(stderr.trim() || err.message));
        else resolve(stdout);
      });
    });
  } catch (err) {
    return { status: "error", response_time_ms: null, error: `mtr: ${errorMessage(err)}` };
  }
  let hops: MtrHop[];
  try {
    hops = parseMtrJson(out);
  } catch (err) {
    return { status: "error", response_time_ms: null, error: `mtr output: ${errorMessage(err)}` };
  }
  const last = hops[hops.length - 1];
  const reached = !!last && last.host === ip && last.loss_percent < 100;
  const metrics: Record<string, number> = { hop_count: hops.length };
  if (last) {
    metrics.last_hop_loss_percent = last.loss_percent;
    metrics.last_hop_avg_ms = last.avg_ms;
  }
  const details = { target_ip: ip, target_reached: reached, protocol: "icmp", hops };
  if (!reached)
    return {
      status: "critical",
      response_time_ms: null,
      error: `target ${ip} not reached`,
      metrics,
      details,
    };
  const lossCrit = Number(c.loss_critical_percent ?? 100);
  if (last.loss_percent >= lossCrit)
    return {
      status: "critical",
      response_time_ms: last.avg_ms,
      error: `${last.loss_percent}% loss at the target`,
      metrics,
      details,
    };
  const base = { status: "success" as const, response_time_ms: last.avg_ms, metrics, details };
  if (last.loss_percent > 0)
    return { ...base, status: "warning", error: `${last.loss_percent}% loss at the target` };
  return applyThresholds(base, spec);
};
