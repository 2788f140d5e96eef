import type protobuf from "protobufjs";
import type { AppContext } from "../../kernel/context.ts";
import type { Intake } from "../sink.ts";
import type { IngestUnit } from "../units.ts";
import { type Mapped, mapLogs, mapMetrics, mapSpans } from "./map.ts";
import type { SignalKind } from "./schema.ts";

/**
 * Store one decoded OTLP export request — the part both transports (HTTP and gRPC) share.
 * All accepted records of a request form ONE unit for the sink: the sender is answered success
 * only after it was committed (or durably queued in JetStream) — "acknowledged means stored" —
 * and on any failure nothing counts and the sender is told to retry (503 / UNAVAILABLE).
 */
export interface StoreResult {
  accepted: number;
  rejected: number;
  /** OTLP partial_success.error_message ("" when nothing was rejected). */
  errorMessage: string;
}

export async function storeOtlp(
  ctx: AppContext,
  intake: Intake,
  kind: SignalKind,
  message: protobuf.Message,
  identity: string,
): Promise<StoreResult> {
  const origin = { identity, now: ctx.now() };
  const req = message as unknown as Record<string, unknown>;
  let unit: IngestUnit;
  let mapped: Mapped<object>;
  if (kind === "logs") {
    const m = mapLogs(req, origin);
    mapped = m;
    unit = { kind: "logs", rows: m.rows };
  } else if (kind === "metrics") {
    const m = mapMetrics(req, origin);
    mapped = m;
    unit = { kind: "metrics", rows: m.rows };
  } else {
    const m = mapSpans(req, origin);
    mapped = m;
    unit = { kind: "spans", rows: m.rows };
  }
  const result: StoreResult = {
    accepted: mapped.rows.length,
    rejected: mapped.rejected,
    errorMessage: mapped.rejected > 0 ? (mapped.reason ?? "records rejected") : "",
  };
  if (mapped.rows.length === 0) return result;
  await intake.gate.run(mapped.rows.length, () => intake.sink.accept(unit));
  return result;
}
