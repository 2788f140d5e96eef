import * as grpc from "@grpc/grpc-js";
import { type Actor, hasPermission } from "../../access/actor.ts";
import { authenticateApiKey } from "../../access/api-keys.ts";
import { accessState } from "../../access/feature.ts";
import { withOutageGrace } from "../../access/outage-credentials.ts";
import { authenticateBearer } from "../../access/tokens.ts";
import type { AppContext } from "../../kernel/context.ts";
import { AppError } from "../../kernel/errors.ts";
import type { Intake } from "../sink.ts";
import { decodeOtlp } from "./decode.ts";
import { storeOtlp } from "./ingest.ts";
import { responseType, type SignalKind } from "./schema.ts";

/**
 * The OTLP/gRPC receiver (OTLP specification, "OTLP/gRPC"): LogsService, MetricsService and
 * TraceService `Export` on NETMON_OTLP_GRPC_PORT. Requests are taken as raw bytes and decoded
 * by the same code as OTLP/HTTP (`decode.ts`, the vendored official definitions), stored by
 * the same `storeOtlp` (one transaction, answered after commit). Credentials come from the
 * call metadata (`authorization: Bearer …` or `x-api-key`) and need `telemetry.ingest`; calls
 * draw from the credential's `ingest` budget. Status codes: UNAUTHENTICATED, PERMISSION_DENIED,
 * INVALID_ARGUMENT (malformed), RESOURCE_EXHAUSTED (budget, message size), UNAVAILABLE
 * (capacity or storage down — retryable, OTLP senders back off and retry).
 */
const SERVICES: Record<SignalKind, string> = {
  logs: "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
  metrics: "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
  traces: "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
};

export interface OtlpGrpcServer {
  readonly port: number;
  close(): Promise<void>;
}

function statusFor(err: unknown): { code: grpc.status; details: string } {
  if (err instanceof AppError) {
    const code =
      err.status === 401
        ? grpc.status.UNAUTHENTICATED
        : err.status === 403
          ? grpc.status.PERMISSION_DENIED
          : err.status === 429 || err.status === 413
            ? grpc.status.RESOURCE_EXHAUSTED
            : err.status === 503
              ? grpc.status.UNAVAILABLE
              : err.status < 500
                ? grpc.status.INVALID_ARGUMENT
                : grpc.status.INTERNAL;
    return { code, details: err.message };
  }
  return { code: grpc.status.INTERNAL, details: "An unexpected error occurred" };
}

function limiterOf(ctx: AppContext): ReturnType<typeof accessState>["limiter"] | null {
  try {
    return accessState(ctx).limiter;
  } catch {
    return null; // no access feature (a test composition): nothing to charge
  }
}

/** Client address of a call ("ipv4:1.2.3.4:567" / "ipv6:[::1]:567" → the address). */
function peerIp(peer: string): string {
  const m = /^ipv[46]:\[?([^\]]+?)\]?:\d+$/.exec(peer);
  return m ? (m[1] as string) : peer;
}

/**
 * Credential guessing is budgeted per client IP as on HTTP (NETMON_RATE_LIMIT_AUTH_FAILURES):
 * once spent, calls presenting credentials get RESOURCE_EXHAUSTED before any lookup.
 */
async function authenticate(ctx: AppContext, md: grpc.Metadata, peer: string): Promise<Actor> {
  const limiter = limiterOf(ctx);
  const ip = peerIp(peer);
  const failures = ctx.config.rateLimitAuthFailures;
  const seen = limiter ? await limiter.peek("auth_failures", `ip:${ip}`, failures).catch(() => null) : null;
  if (seen && !seen.allowed) {
    throw new AppError(
      429,
      "rate_limited",
      `too many failed authentications; retry after ${seen.retryAfter}s`,
      "Too many requests",
    );
  }
  try {
    return await authenticateCredentials(ctx, md);
  } catch (err) {
    if (
      err instanceof AppError &&
      err.status === 401 &&
      (md.get("authorization").length > 0 || md.get("x-api-key").length > 0)
    ) {
      await limiter?.consume("auth_failures", `ip:${ip}`, failures).catch(() => undefined);
    }
    throw err;
  }
}

async function authenticateCredentials(ctx: AppContext, md: grpc.Metadata): Promise<Actor> {
  const first = (k: string) => {
    const v = md.get(k)[0];
    return typeof v === "string" ? v : undefined;
  };
  const authz = first("authorization");
  const key = first("x-api-key");
  let actor: Actor | null = null;
  if (authz) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authz);
    const token = m?.[1];
    actor = token
      ? await withOutageGrace(ctx, token, async () => (await authenticateBearer(ctx, token)).actor)
      : null;
  } else if (key) {
    actor = await withOutageGrace(ctx, key, () => authenticateApiKey(ctx, key));
  }
  if (!actor) {
    throw new AppError(401, "authentication_required", "Authentication required", "Unauthorized");
  }
  if (actor.kind !== "user" || !hasPermission(actor, "telemetry.ingest")) {
    throw new AppError(403, "forbidden", "telemetry.ingest permission required", "Forbidden");
  }
  return actor;
}

async function chargeBudget(ctx: AppContext, actor: Actor): Promise<void> {
  const limiter = limiterOf(ctx);
  if (!limiter) return;
  const decision = await limiter
    .consume("ingest", `cred:${actor.tokenJti ?? actor.id}`, ctx.config.ingest.rateLimit)
    .catch(() => null);
  if (decision && !decision.allowed) {
    throw new AppError(
      429,
      "rate_limited",
      `ingest budget spent; retry after ${decision.retryAfter}s`,
      "Too many requests",
    );
  }
}

/** Start the gRPC server on host:port (port 0: ephemeral, for tests). */
export async function startOtlpGrpc(
  ctx: AppContext,
  intake: Intake,
  host: string,
  port: number,
): Promise<OtlpGrpcServer> {
  const limit = ctx.config.ingest.otlpBodyLimit;
  const server = new grpc.Server({
    "grpc.max_receive_message_length": limit,
    "grpc.max_concurrent_streams": 100,
  });
  for (const kind of ["logs", "metrics", "traces"] as const) {
    const type = responseType(kind);
    const definition: grpc.ServiceDefinition = {
      Export: {
        path: SERVICES[kind],
        requestStream: false,
        responseStream: false,
        requestSerialize: (b: Buffer) => b,
        requestDeserialize: (b: Buffer) => b,
        responseSerialize: (v: Record<string, unknown>) =>
          Buffer.from(type.encode(type.fromObject(v)).finish()),
        responseDeserialize: (b: Buffer) => b,
      },
    };
    const handler: grpc.handleUnaryCall<Buffer, Record<string, unknown>> = (call, callback) => {
      (async () => {
        const actor = await authenticate(ctx, call.metadata, call.getPeer());
        await chargeBudget(ctx, actor);
        const message = decodeOtlp(kind, call.request, "protobuf");
        const r = await storeOtlp(ctx, intake, kind, message, actor.email ?? actor.id);
        const field =
          kind === "logs"
            ? "rejectedLogRecords"
            : kind === "metrics"
              ? "rejectedDataPoints"
              : "rejectedSpans";
        return r.rejected > 0
          ? { partialSuccess: { [field]: r.rejected, errorMessage: r.errorMessage } }
          : {};
      })().then(
        (response) => callback(null, response),
        (err: unknown) => {
          const s = statusFor(err);
          if (s.code === grpc.status.INTERNAL || s.code === grpc.status.UNAVAILABLE)
            ctx.log.warn({ err, kind }, "OTLP/gRPC export failed");
          callback({ code: s.code, details: s.details });
        },
      );
    };
    server.addService(definition, { Export: handler as grpc.UntypedHandleCall });
  }
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      `${host.includes(":") ? `[${host}]` : host}:${port}`,
      grpc.ServerCredentials.createInsecure(),
      (err, p) => (err ? reject(err) : resolve(p)),
    ),
  );
  ctx.log.info({ host, port: bound }, "OTLP/gRPC receiver listening");
  return {
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 5000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}
