import { Resolver } from "node:dns/promises";
import net from "node:net";
import { TargetRefusedError } from "../target-policy.ts";
import { applyThresholds, type CheckRunner, cfg, errorMessage, round, timeoutMs } from "./types.ts";

const TYPES = ["A", "AAAA", "CNAME", "MX", "NS", "PTR", "SOA", "SRV", "TXT", "CAA", "NAPTR"] as const;

function parseServer(server: string, port: number | null | undefined): { host: string; port: number } {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(server);
  if (m) return { host: m[1] as string, port: Number(m[2] ?? port ?? 53) };
  if (net.isIPv6(server)) return { host: server, port: port ?? 53 };
  const [h, p] = server.split(":");
  return { host: h as string, port: Number(p ?? port ?? 53) };
}

function flatten(answer: unknown): string[] {
  if (!Array.isArray(answer))
    return answer == null ? [] : [typeof answer === "object" ? JSON.stringify(answer) : String(answer)];
  return answer.map((a) => {
    if (typeof a === "string") return a;
    if (Array.isArray(a)) return a.join("");
    if (a && typeof a === "object") {
      const o = a as Record<string, unknown>;
      return String(o.address ?? o.exchange ?? o.name ?? o.value ?? JSON.stringify(o));
    }
    return String(a);
  });
}

/**
 * DNS check: the target is the name to look up. config: record_type (A), server ("ip[:port]";
 * default the system resolver; the check's port is the server port), expected (string or list:
 * every one must be among the answers).
 */
export const runDns: CheckRunner = async (spec, opts) => {
  const c = cfg(spec);
  const rrtype = String(c.record_type ?? c.query_type ?? "A").toUpperCase();
  if (!(TYPES as readonly string[]).includes(rrtype)) {
    return { status: "error", response_time_ms: null, error: `unsupported record type ${rrtype}` };
  }
  const limit = timeoutMs(spec, 5);
  const resolver = new Resolver({ timeout: limit, tries: 1 });
  let server: string | null = null;
  if (typeof c.server === "string" && c.server) {
    const s = parseServer(c.server, spec.port);
    try {
      const ip = await opts.policy.resolve(s.host, s.port);
      server = net.isIPv6(ip) ? `[${ip}]:${s.port}` : `${ip}:${s.port}`;
      resolver.setServers([server]);
    } catch (err) {
      return {
        status: err instanceof TargetRefusedError ? "error" : "critical",
        response_time_ms: null,
        error: errorMessage(err),
      };
    }
  }
  const started = performance.now();
  let answers: string[];
  try {
    const timer = new Promise<never>((_, rej) =>
      setTimeout(() => rej(new Error(`timed out after ${limit} ms`)), limit + 50).unref(),
    );
    answers = flatten(await Promise.race([resolver.resolve(spec.target, rrtype as "A"), timer]));
  } catch (err) {
    resolver.cancel();
    return {
      status: "critical",
      response_time_ms: null,
      error: errorMessage(err),
      details: { query: spec.target, record_type: rrtype, server },
    };
  }
  const ms = round(performance.now() - started);
  const details = { query: spec.target, record_type: rrtype, server, answers };
  const expected =
    c.expected == null ? [] : Array.isArray(c.expected) ? c.expected.map(String) : [String(c.expected)];
  const missing = expected.filter((e) => !answers.some((a) => a.toLowerCase() === e.toLowerCase()));
  if (missing.length > 0) {
    return {
      status: "critical",
      response_time_ms: ms,
      error: `expected answer ${missing.join(", ")} not in [${answers.join(", ")}]`,
      metrics: { query_ms: ms },
      details,
    };
  }
  return applyThresholds(
    {
      status: "success",
      response_time_ms: ms,
      metrics: { query_ms: ms, answer_count: answers.length },
      details,
    },
    spec,
  );
};
