import type { AppContext } from "../kernel/context.ts";
import type { Feature } from "../kernel/feature.ts";
import { rollupHourly } from "./rollup.ts";

/** Advisory lock key of the hourly rollup job (one replica rolls up at a time). */
export const ROLLUP_LOCK_KEY = 0x6e65746d6f6e0300n;
const ROLLUP_EVERY_MS = 5 * 60_000;
/** Each pass recomputes the current and previous hour buckets (late rows land there). */
const ROLLUP_LOOKBACK_MS = 2 * 3_600_000;

/** Telemetry background work: the hourly metric rollups. */
export function createTelemetryFeature(): Feature {
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;

  async function pass(ctx: AppContext): Promise<void> {
    const release = await ctx.db.tryAdvisoryLock(ROLLUP_LOCK_KEY);
    if (!release) return;
    try {
      const now = ctx.now();
      await rollupHourly(ctx.db, new Date(now.getTime() - ROLLUP_LOOKBACK_MS), now);
    } catch (err) {
      ctx.log.warn({ err }, "telemetry hourly rollup failed");
    } finally {
      await release();
    }
  }

  return {
    name: "telemetry",
    start(ctx) {
      timer = setInterval(() => {
        if (!running) running = pass(ctx).finally(() => (running = null));
      }, ROLLUP_EVERY_MS);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      await running;
    },
  };
}
