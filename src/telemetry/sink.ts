import type { AppContext } from "../kernel/context.ts";
import { AppError } from "../kernel/errors.ts";
import { type IngestGate, storageUnavailable } from "./ingest-gate.ts";
import { type IngestUnit, storeUnit } from "./units.ts";

/**
 * Where receivers hand what they accepted. `accept` resolves only once the unit is durable —
 * committed to the database (direct) or acknowledged by JetStream (buffered) — so a receiver
 * may acknowledge its sender then and not before. On failure it throws a 503-class
 * ServiceUnavailableError and nothing of the unit counts as accepted.
 */
export interface TelemetrySink {
  readonly name: "database" | "jetstream";
  accept(unit: IngestUnit): Promise<void>;
  close(): Promise<void>;
}

/** Without NATS_URL: one transaction per unit, straight into the database. */
export function directSink(ctx: AppContext): TelemetrySink {
  return {
    name: "database",
    async accept(unit) {
      try {
        await storeUnit(ctx, unit);
      } catch (err) {
        if (err instanceof AppError) throw err;
        ctx.log.warn({ err, kind: unit.kind }, "telemetry write failed; sender told to retry");
        throw storageUnavailable(err);
      }
    },
    async close() {},
  };
}

/** Until the JetStream buffer is connected, receivers refuse (503) rather than bypass it. */
export function unavailableSink(why: string): TelemetrySink {
  return {
    name: "jetstream",
    async accept() {
      throw storageUnavailable(new Error(why));
    },
    async close() {},
  };
}

/**
 * What every receiver shares: the back-pressure gate and the current sink (replaced once the
 * JetStream buffer connects).
 */
export interface Intake {
  gate: IngestGate;
  sink: TelemetrySink;
}
