/**
 * The alerting background work: lifecycle listener (route fired alerts, notify resolutions,
 * send at once) and a periodic tick (due escalation steps, retries, stateful-rule recovery).
 */
import type { AppContext } from "../kernel/context.ts";
import { autoEscalate } from "./actions.ts";
import { type AlertListener, onAlertLifecycle } from "./lifecycle.ts";
import { type DeliveryOptions, dispatchDueDeliveries } from "./notifications/delivery.ts";
import { advanceEscalations, notifyRenotify, notifyResolved, routeAlert } from "./notifications/routing.ts";
import { sweepStatefulRules } from "./stateful-rules.ts";

export interface NotifierOptions extends DeliveryOptions {
  /** Tick period (default 5 s). */
  tickMs?: number;
  /** Stateful-rule recovery sweep period (default 60 s). */
  sweepMs?: number;
}

/** Route/notify on lifecycle events, then dispatch in the background (never blocks the caller). */
export function lifecycleListener(opts: NotifierOptions, kick: (ctx: AppContext) => void): AlertListener {
  return async (ctx, event, alert) => {
    if (event === "trigger") {
      const routes = await routeAlert(ctx, alert);
      if (routes.length > 0) kick(ctx);
    } else if (event === "resolve") {
      if ((await notifyResolved(ctx, alert)) > 0) kick(ctx);
    } else if (event === "renotify") {
      if ((await notifyRenotify(ctx, alert)) > 0) kick(ctx);
    }
    void opts;
  };
}

export class Notifier {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private lastSweep = 0;
  private unsubscribe: (() => void) | null = null;
  private stopped = false;

  constructor(
    private readonly ctx: AppContext,
    private readonly opts: NotifierOptions = {},
  ) {}

  start(): void {
    const inner = lifecycleListener(this.opts, () => this.kick());
    // Only alerts of this server's database (tests run several servers in one process).
    this.unsubscribe = onAlertLifecycle((ctx, event, alert) =>
      ctx.db === this.ctx.db ? inner(ctx, event, alert) : undefined,
    );
    const tick = this.opts.tickMs ?? 5_000;
    this.timer = setInterval(() => this.kick(), tick);
    this.timer.unref();
  }

  /** Run one pass now (or right after the current one). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass()
      .catch((err) => this.ctx.log.error({ err }, "notifier pass failed"))
      .finally(() => {
        this.running = null;
        if (this.again && !this.stopped) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** Wait for the pass in flight (tests). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async pass(): Promise<void> {
    await autoEscalate(this.ctx);
    await advanceEscalations(this.ctx);
    while ((await dispatchDueDeliveries(this.ctx, this.opts)) > 0) {
      if (this.stopped) return;
    }
    const now = Date.now();
    if (now - this.lastSweep >= (this.opts.sweepMs ?? 60_000)) {
      this.lastSweep = now;
      await sweepStatefulRules(this.ctx);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.unsubscribe?.();
    await this.idle();
  }
}
