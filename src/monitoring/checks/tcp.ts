import net from "node:net";
import { TargetRefusedError } from "../target-policy.ts";
import {
  applyThresholds,
  type CheckResult,
  type CheckRunner,
  cfg,
  errorMessage,
  round,
  timeoutMs,
} from "./types.ts";

/**
 * TCP connect check: the time to complete the handshake. Optional `config.send` is written
 * after connecting and `config.expect` must then appear in what the peer sends back.
 */
export const runTcp: CheckRunner = async (spec, opts) => {
  const c = cfg(spec);
  const port = spec.port ?? (typeof c.port === "number" ? c.port : null);
  if (!port) return { status: "error", response_time_ms: null, error: "tcp check needs a port" };
  const limit = timeoutMs(spec);
  let ip: string;
  try {
    ip = await opts.policy.resolve(spec.target, port);
  } catch (err) {
    return {
      status: err instanceof TargetRefusedError ? "error" : "critical",
      response_time_ms: null,
      error: errorMessage(err),
    };
  }
  const send = typeof c.send === "string" ? c.send : null;
  const expect = typeof c.expect === "string" ? c.expect : null;
  const started = performance.now();
  const result = await new Promise<CheckResult>((resolve) => {
    const socket = net.connect({ host: ip, port });
    let connectMs = 0;
    let received = "";
    let settled = false;
    const finish = (r: CheckResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(r);
    };
    const timer = setTimeout(
      () => finish({ status: "critical", response_time_ms: null, error: `timed out after ${limit} ms` }),
      limit,
    );
    opts.signal?.addEventListener("abort", () =>
      finish({ status: "unknown", response_time_ms: null, error: "aborted" }),
    );
    socket.once("connect", () => {
      connectMs = round(performance.now() - started);
      if (!expect) {
        finish({
          status: "success",
          response_time_ms: connectMs,
          metrics: { connect_ms: connectMs },
          details: { address: ip, port },
        });
        return;
      }
      if (send) socket.write(send);
    });
    socket.on("data", (d) => {
      received += d.toString("utf8");
      if (expect && received.includes(expect)) {
        const total = round(performance.now() - started);
        finish({
          status: "success",
          response_time_ms: total,
          metrics: { connect_ms: connectMs, response_ms: total },
          details: { address: ip, port },
        });
      } else if (received.length > 65536) {
        finish({
          status: "critical",
          response_time_ms: null,
          error: `expected '${expect}' not found in response`,
        });
      }
    });
    socket.once("end", () =>
      finish({
        status: "critical",
        response_time_ms: null,
        error: `connection closed before '${expect}' was received`,
      }),
    );
    socket.once("error", (err) =>
      finish({ status: "critical", response_time_ms: null, error: errorMessage(err) }),
    );
  });
  return applyThresholds(result, spec);
};
