import net from "node:net";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { protoPath } from "grpc-health-check";
import { TargetRefusedError } from "../target-policy.ts";
import { applyThresholds, type CheckRunner, cfg, errorMessage, round, timeoutMs } from "./types.ts";

type HealthClient = grpc.Client & {
  check(
    req: { service: string },
    opts: grpc.CallOptions,
    cb: (err: grpc.ServiceError | null, res?: { status: string | number }) => void,
  ): void;
};
let HealthCtor: (new (address: string, creds: grpc.ChannelCredentials) => HealthClient) | null = null;

function healthCtor() {
  if (!HealthCtor) {
    const def = protoLoader.loadSync(protoPath, { keepCase: true, enums: String, defaults: true });
    const pkg = grpc.loadPackageDefinition(def) as unknown as {
      grpc: { health: { v1: { Health: new (a: string, c: grpc.ChannelCredentials) => HealthClient } } };
    };
    HealthCtor = pkg.grpc.health.v1.Health;
  }
  return HealthCtor;
}

/**
 * gRPC check with the standard health protocol (grpc.health.v1.Health/Check).
 * config: service ("" = the whole server), tls (false), insecure (skip verification with tls).
 * SERVING → success; NOT_SERVING → critical; UNKNOWN → unknown; unknown service (NOT_FOUND) → critical.
 */
export const runGrpc: CheckRunner = async (spec, opts) => {
  const c = cfg(spec);
  if (!spec.port) return { status: "error", response_time_ms: null, error: "grpc check needs a port" };
  let ip: string;
  try {
    ip = await opts.policy.resolve(spec.target, spec.port);
  } catch (err) {
    return {
      status: err instanceof TargetRefusedError ? "error" : "critical",
      response_time_ms: null,
      error: errorMessage(err),
    };
  }
  const service = typeof c.service === "string" ? c.service : "";
  const creds =
    c.tls === true
      ? grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: c.insecure !== true })
      : grpc.credentials.createInsecure();
  const address = net.isIPv6(ip) ? `[${ip}]:${spec.port}` : `${ip}:${spec.port}`;
  const client = new (healthCtor())(address, creds);
  const started = performance.now();
  const limit = timeoutMs(spec);
  try {
    const res = await new Promise<{ status: string | number }>((resolve, reject) => {
      client.check({ service }, { deadline: Date.now() + limit }, (err, r) =>
        err ? reject(err) : resolve(r as { status: string }),
      );
    });
    const ms = round(performance.now() - started);
    const status = String(res.status);
    const details = { address, service, serving_status: status };
    if (status === "SERVING")
      return applyThresholds(
        { status: "success", response_time_ms: ms, metrics: { rpc_ms: ms }, details },
        spec,
      );
    if (status === "NOT_SERVING")
      return {
        status: "critical",
        response_time_ms: ms,
        error: `service '${service}' is NOT_SERVING`,
        details,
      };
    return {
      status: "unknown",
      response_time_ms: ms,
      error: `service '${service}' health is ${status}`,
      details,
    };
  } catch (err) {
    const e = err as grpc.ServiceError;
    const msg =
      e.code === grpc.status.NOT_FOUND
        ? `service '${service}' is unknown to the server`
        : e.code === grpc.status.DEADLINE_EXCEEDED
          ? `timed out after ${limit} ms`
          : errorMessage(err);
    return {
      status: "critical",
      response_time_ms: null,
      error: msg,
      details: { address, service, grpc_code: e.code },
    };
  } finally {
    client.close();
  }
};
