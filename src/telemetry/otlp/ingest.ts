import type protobuf from "protobufjs";
import { promoteStoredLogs } from "../../alerting/event-rules.ts";
import type { AppContext } from "../../kernel/context.ts";
import { AppError } from "../../kernel/errors.ts";
import type { Queryable } from "../../storage/db.ts";
import { type IngestGate, storageUnavailable } from "../ingest-gate.ts";
import { insertLogs, insertMetricPoints, insertOtelMetrics, insertSpans } from "../write.ts";
import { type Mapped, mapLogs, mapMetrics, mapSpans, spanMetrics } from "./map.ts";
import type { SignalKind } from "./schema.ts";

/**
 * Store one decoded OTLP export request — the part both transports (HTTP and gRPC) share.
 * All accepted records of a request are written in ONE transaction: the sender is answered
 * success only after it committed ("acknowledged means stored"), and on any storage failure
 * nothing is kept and the sender is told to retry (503 / UNAVAILABLE). Logs then go through
 * the event rules (log promotion), after the commit, as every ingest path does.
 */
export interface StoreResult {
  accepted: number;
  rejected: number;
  /** OTLP partial_success.error_message ("" when nothing was rejected). */
  errorMessage: string;
}

export async function storeOtlp(
  ctx: AppContext,
  gate: IngestGate,
  kind: SignalKind,
  message: protobuf.Message,
  identity: string,
): Promise<StoreResult> {
  const origin = { identity, now: ctx.now() };
  const req = message as unknown as Record<string, unknown>;
  let write: (tx: Queryable) => Promise<string[]>;
  let mapped: Mapped<object>;
  if (kind === "logs") {
    const m = mapLogs(req, origin);
    mapped = m;
    write = (tx) => insertLogs(tx, m.rows);
  } else if (kind === "metrics") {
    const m = mapMetrics(req, origin);
    mapped = m;
    write = async (tx) => {
      await insertMetricPoints(tx, m.rows);
      return [];
    };
  } else {
    const m = mapSpans(req, origin);
    mapped = m;
    write = async (tx) => {
      await insertSpans(tx, m.rows);
      await insertOtelMetrics(tx, spanMetrics(m.rows));
      return [];
    };
  }
  const result: StoreResult = {
    accepted: mapped.rows.length,
    rejected: mapped.rejected,
    errorMessage: mapped.rejected > 0 ? (mapped.reason ?? "records rejected") : "",
  };
  if (mapped.rows.length === 0) return result;
  await gate.run(mapped.rows.length, async () => {
    let logIds: string[] = [];
    try {
      logIds = await ctx.db.transaction((tx) => write(tx));
    } catch (err) {
      if (err instanceof AppError) throw err;
      ctx.log.warn({ err, kind, records: mapped.rows.length }, "OTLP write failed; sender told to retry");
      throw storageUnavailable(err);
    }
    // Promotion errors are logged per log by promoteLogs; the logs themselves are stored.
    if (kind === "logs") await promoteStoredLogs(ctx, logIds);
  });
  return result;
}
