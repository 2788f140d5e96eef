import { spawn } from "node:child_process";
import path from "node:path";
import { type CheckResult, type CheckRunner, type CheckStatus, cfg, round, timeoutMs } from "./types.ts";

export interface PerfDatum {
  label: string;
  value: number;
  uom: string;
  warn?: string;
  crit?: string;
  min?: number;
  max?: number;
}

/** Nagios perfdata: `'label'=value[UOM];[warn];[crit];[min];[max]`, space-separated. */
export function parsePerfdata(text: string): PerfDatum[] {
  const out: PerfDatum[] = [];
  const re = /('([^']|'')+'|[^\s=']+)=(-?[\d.]+(?:[eE][-+]?\d+)?)([a-zA-Z%/]*)((?:;[^;\s]*){0,4})/g;
  for (const m of text.matchAll(re)) {
    let label = m[1] as string;
    if (label.startsWith("'")) label = label.slice(1, -1).replace(/''/g, "'");
    const rest = (m[5] ?? "").split(";").slice(1);
    const num = (s?: string) =>
      s !== undefined && s !== "" && !Number.isNaN(Number(s)) ? Number(s) : undefined;
    out.push({
      label,
      value: Number(m[3]),
      uom: m[4] ?? "",
      warn: rest[0] || undefined,
      crit: rest[1] || undefined,
      min: num(rest[2]),
      max: num(rest[3]),
    });
  }
  return out;
}

const EXIT: Record<number, CheckStatus> = { 0: "success", 1: "warning", 2: "critical", 3: "unknown" };

/**
 * Run an allow-listed local executable (no shell) with Nagios semantics: exit 0 OK → success,
 * 1 → warning, 2 → critical, 3 → unknown, anything else → error. The first output line is
 * "summary | perfdata"; perfdata values become metrics. config: command (absolute path, must be
 * in NETMON_CUSTOM_CHECK_ALLOWLIST), args (list of strings; "$TARGET"/"$PORT" are substituted).
 */
export const runCustom: CheckRunner = async (spec, opts) => {
  const c = cfg(spec);
  const command = typeof c.command === "string" ? c.command : spec.target;
  const allowed = (opts.customAllowList ?? []).map((p) => path.resolve(p));
  if (!path.isAbsolute(command) || !allowed.includes(path.resolve(command))) {
    return {
      status: "error",
      response_time_ms: null,
      error: `command '${command}' is not in the custom check allow-list`,
    };
  }
  const args = (Array.isArray(c.args) ? c.args : []).map((a) =>
    String(a)
      .replaceAll("$TARGET", spec.target)
      .replaceAll("$PORT", String(spec.port ?? "")),
  );
  const limit = timeoutMs(spec);
  const started = performance.now();
  return await new Promise<CheckResult>((resolve) => {
    const child = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, limit);
    child.stdout.on("data", (d) => {
      if (stdout.length < 65536) stdout += d.toString();
    });
    child.stderr.on("data", (d) => {
      if (stderr.length < 65536) stderr += d.toString();
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      resolve({ status: "error", response_time_ms: null, error: `cannot run ${command}: ${err.message}` });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      const ms = round(performance.now() - started);
      if (timedOut) {
        resolve({ status: "critical", response_time_ms: null, error: `timed out after ${limit} ms` });
        return;
      }
      const lines = stdout.split("\n");
      const [summary, firstPerf] = (lines[0] ?? "").split("|");
      const longPerf = lines.slice(1).join("\n").split("|")[1] ?? "";
      const perf = parsePerfdata(`${firstPerf ?? ""} ${longPerf}`);
      const metrics: Record<string, number> = { exec_ms: ms };
      for (const p of perf) metrics[p.label] = p.value;
      const status: CheckStatus = code != null && code in EXIT ? (EXIT[code] as CheckStatus) : "error";
      const text = (summary ?? "").trim();
      resolve({
        status,
        response_time_ms: ms,
        error: status === "success" ? undefined : text || stderr.trim() || `exit code ${code}`,
        metrics,
        details: { exit_code: code, output: text, perfdata: perf },
      });
    });
  });
};
