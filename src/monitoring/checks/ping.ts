import { TargetRefusedError } from "../target-policy.ts";
import { echo, icmpBackend, summarize } from "./icmp.ts";
import { applyThresholds, type CheckRunner, cfg, errorMessage, timeoutMs } from "./types.ts";

/**
 * ICMP ping check. config: count (3), interval_ms (0), loss_warning_percent (1: any loss warns),
 * loss_critical_percent (100). Response time is the average RTT.
 */
export const runPing: CheckRunner = async (spec, opts) => {
  const c = cfg(spec);
  const count = Math.min(20, Math.max(1, Number(c.count ?? 3) || 3));
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
  const perProbe = Math.min(timeoutMs(spec, 5), Math.max(200, Math.floor(timeoutMs(spec, 5) / count)));
  const replies =
    (await echo([ip], { count, timeoutMs: perProbe, intervalMs: Number(c.interval_ms ?? 0) })).get(ip) ?? [];
  const s = summarize(replies);
  const metrics: Record<string, number> = { packet_loss: s.packet_loss, sent: s.sent, received: s.received };
  if (s.rtt_avg_ms != null) {
    metrics.rtt_avg_ms = s.rtt_avg_ms;
    metrics.rtt_min_ms = s.rtt_min_ms as number;
    metrics.rtt_max_ms = s.rtt_max_ms as number;
  }
  const details = { address: ip, backend: icmpBackend(), available: s.received > 0 };
  const lossCrit = Number(c.loss_critical_percent ?? 100);
  const lossWarn = Number(c.loss_warning_percent ?? 1);
  if (s.packet_loss >= lossCrit) {
    return {
      status: "critical",
      response_time_ms: null,
      error: `${s.packet_loss}% packet loss (${replies[0]?.error ?? "no reply"})`,
      metrics,
      details,
    };
  }
  const base = { status: "success" as const, response_time_ms: s.rtt_avg_ms, metrics, details };
  if (s.packet_loss >= lossWarn)
    return { ...base, status: "warning", error: `${s.packet_loss}% packet loss` };
  return applyThresholds(base, spec);
};
