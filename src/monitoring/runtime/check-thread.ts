import { Worker } from "node:worker_threads";
import type { Logger } from "../../kernel/logger.ts";
import type { CheckResult, CheckSpec } from "../checks/types.ts";
import type { TargetPolicyOptions } from "../target-policy.ts";

interface Pending {
  resolve: (r: CheckResult) => void;
}

/**
 * Runs check runners in a worker thread for the embedded agent (the core's process): a check
 * that burns CPU stalls only that thread, never the HTTP API. If the thread dies, its running
 * checks end with status `error` naming the cause (never silently), the failure is logged, and
 * the next check starts a fresh thread.
 */
export class CheckThread {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;
  /** How many times the thread had to be restarted (shown in agent stats/logs). */
  restarts = 0;

  constructor(
    private readonly opts: { policy: TargetPolicyOptions; customAllowList?: readonly string[]; log: Logger },
  ) {}

  /** The worker's thread id (tests prove checks run off the main thread). */
  get threadId(): number | null {
    return this.worker?.threadId ?? null;
  }

  private spawn(): Worker {
    const w = new Worker(new URL("./check-worker.mjs", import.meta.url), {
      workerData: { policy: this.opts.policy, customAllowList: [...(this.opts.customAllowList ?? [])] },
    });
    w.unref();
    w.on("message", (msg: { id: number; ok: boolean; result?: CheckResult; error?: string }) => {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      p.resolve(
        msg.ok
          ? (msg.result as CheckResult)
          : { status: "error", response_time_ms: null, error: `check runner failed: ${msg.error}` },
      );
    });
    const died = (why: string) => {
      if (this.worker !== w) return;
      this.worker = null;
      if (!this.closed) {
        this.restarts++;
        this.opts.log.error({ reason: why, running: this.pending.size }, "check thread died; restarting it");
      }
      for (const [id, p] of this.pending) {
        this.pending.delete(id);
        p.resolve({ status: "error", response_time_ms: null, error: `check thread died: ${why}` });
      }
    };
    w.on("error", (err) => died(err.message));
    w.on("exit", (code) => died(`exited with code ${code}`));
    return w;
  }

  private post(msg: Record<string, unknown>): Promise<CheckResult> {
    if (this.closed) {
      return Promise.resolve({ status: "error", response_time_ms: null, error: "agent is stopping" });
    }
    this.worker ??= this.spawn();
    const id = this.nextId++;
    const p = new Promise<CheckResult>((resolve) => this.pending.set(id, { resolve }));
    this.worker.postMessage({ id, ...msg });
    return p;
  }

  run(spec: CheckSpec): Promise<CheckResult> {
    return this.post({ spec });
  }

  /** Test hook: keep the thread busy for `ms` (as a runaway check would). */
  block(ms: number): Promise<CheckResult> {
    return this.post({ op: "block", ms });
  }

  async close(): Promise<void> {
    this.closed = true;
    const w = this.worker;
    this.worker = null;
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      p.resolve({ status: "error", response_time_ms: null, error: "agent is stopping" });
    }
    if (w) await w.terminate();
  }
}
