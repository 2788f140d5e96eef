import path from "node:path";
import protobuf from "protobufjs";

/**
 * The OTLP protobuf definitions, loaded with protobufjs from the published `.proto` files of
 * opentelemetry-proto v1.9.0 vendored in `./proto` (Apache-2.0; see decision 0310 for why
 * these and not `@opentelemetry/otlp-transformer`, whose 0.2xx line no longer ships a decoder).
 * The HTTP receiver decodes with these types; the gRPC receiver loads the same files through
 * `@grpc/proto-loader`, so both transports read one definition.
 */
export const PROTO_DIR = path.join(import.meta.dirname, "proto");

export const SERVICE_FILES = [
  "opentelemetry/proto/collector/logs/v1/logs_service.proto",
  "opentelemetry/proto/collector/metrics/v1/metrics_service.proto",
  "opentelemetry/proto/collector/trace/v1/trace_service.proto",
] as const;

export type SignalKind = "logs" | "metrics" | "traces";

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => path.join(PROTO_DIR, target);
root.loadSync([...SERVICE_FILES, "google/rpc/status.proto"], { keepCase: false });
root.resolveAll();

const REQUEST: Record<SignalKind, string> = {
  logs: "opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest",
  metrics: "opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest",
  traces: "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest",
};
const RESPONSE: Record<SignalKind, string> = {
  logs: "opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse",
  metrics: "opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceResponse",
  traces: "opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse",
};

/** The Export*ServiceRequest type of a signal. */
export function requestType(kind: SignalKind): protobuf.Type {
  return root.lookupType(REQUEST[kind]);
}

/** The Export*ServiceResponse type of a signal. */
export function responseType(kind: SignalKind): protobuf.Type {
  return root.lookupType(RESPONSE[kind]);
}

/** google.rpc.Status: the body of a failed OTLP/HTTP protobuf request. */
export const STATUS_TYPE: protobuf.Type = root.lookupType("google.rpc.Status");
