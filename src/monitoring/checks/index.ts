import { runCustom } from "./custom.ts";
import { runDns } from "./dns.ts";
import { runGrpc } from "./grpc.ts";
import { runHttp } from "./http.ts";
import { runMtr } from "./mtr.ts";
import { runPing } from "./ping.ts";
import { runSnmp } from "./snmp.ts";
import { runTcp } from "./tcp.ts";
import {
  type CheckResult,
  type CheckRunner,
  type CheckSpec,
  type CheckType,
  errorMessage,
  type RunOptions,
  timeoutMs,
} from "./types.ts";

export const RUNNERS: Record<CheckType, CheckRunner> = {
  ping: runPing,
  tcp: runTcp,
  http: runHttp,
  dns: runDns,
  grpc: runGrpc,
  snmp: runSnmp,
  mtr: runMtr,
  custom: runCustom,
};

/**
 * Run one check. Never throws and never outlives its timeout (plus a grace second): a
 * runner that hangs is abandoned with status `critical`, so one slow target cannot stall others.
 */
export async function runCheck(spec: CheckSpec, opts: RunOptions): Promise<CheckResult> {
  const runner = RUNNERS[spec.check_type];
  if (!runner)
    return { status: "error", response_time_ms: null, error: `unknown check type ${spec.check_type}` };
  const hardLimit = timeoutMs(spec, spec.check_type === "mtr" ? 30 : 10) + 1000;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      runner(spec, opts).catch(
        (err): CheckResult => ({ status: "error", response_time_ms: null, error: errorMessage(err) }),
      ),
      new Promise<CheckResult>((resolve) => {
        timer = setTimeout(
          () =>
            resolve({
              status: "critical",
              response_time_ms: null,
              error: `check exceeded its ${hardLimit} ms limit`,
            }),
          hardLimit,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export type { CheckResult, CheckSpec, RunOptions } from "./types.ts";
