/**
 * The agent: long-polls its gateway for poll jobs, runs their checks concurrently (bounded),
 * submits results, heartbeats, reports host metrics, degrades when its checks cannot run
 * (most results are runner errors) and disconnects on shutdown.
 */
import os from "node:os";
import type { Logger } from "../../kernel/logger.ts";
import { VERSION } from "../../kernel/version.ts";
import { runCheck } from "../checks/index.ts";
import type { CheckResult, CheckSpec } from "../checks/types.ts";
import { HostMetricsCollector, type HostMetricsSample } from "../host-metrics.ts";
import type { JobPayload, SubmittedResult } from "../jobs.ts";
import { runSweep, type SweepHost } from "../sweep.ts";
import type { TargetPolicy } from "../target-policy.ts";
import type { AgentHello } from "./gateway.ts";

export const AGENT_CAPABILITIES = [
  "icmp",
  "tcp",
  "http",
  "grpc",
  "dns",
  "snmp",
  "mtr",
  "custom",
  "sweep",
  "sysmon",
];

/** What an agent needs from its gateway. */
export interface GatewayLink {
  register(hello: AgentHello): Promise<{ gateway_id: string; uid: string }>;
  heartbeat(uid: string, input: { is_healthy?: boolean }): Promise<void>;
  health(uid: string, healthy: boolean): Promise<void>;
  disconnect(uid: string): Promise<void>;
  claim(uid: string, max: number, waitMs: number, signal?: AbortSignal): Promise<JobPayload[]>;
  submit(uid: string, jobId: string, results: SubmittedResult[], sweepHosts?: SweepHost[]): Promise<void>;
  fail(uid: string, jobId: string, message: string): Promise<void>;
  hostMetrics(uid: string, sample: HostMetricsSample): Promise<void>;
}

export interface AgentOptions {
  uid: string;
  gateway: GatewayLink;
  policy: TargetPolicy;
  log: Logger;
  customAllowList?: readonly string[];
  /** Checks running at once (across jobs). */
  maxConcurrentChecks?: number;
  /** Jobs held at once. */
  maxJobs?: number;
  heartbeatMs?: number;
  hostMetricsMs?: number;
  claimWaitMs?: number;
  /**
   * Where checks run. Default: on this process's event loop (a standalone agent has nothing
   * else to serve). The embedded agent passes a CheckThread, so no check runs on the core's
   * event loop.
   */
  runner?: (spec: CheckSpec) => Promise<CheckResult>;
}

class Semaphore {
  private waiters: (() => void)[] = [];
  constructor(private free: number) {}
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((r) => this.waiters.push(r));
  }
  release(): void {
    const w = this.waiters.shift();
    if (w) w();
    else this.free++;
  }
}

export interface AgentStats {
  jobs: number;
  checks: number;
  /** Lateness (ms) of each check start versus its due time, last 10,000. */
  lateness: number[];
}

export class Agent {
  /** Assigned by the gateway on registration (the agent credential's name for remote agents). */
  uid: string;
  private readonly gw: GatewayLink;
  private log: Logger;
  private readonly policy: TargetPolicy;
  private readonly sem: Semaphore;
  private readonly maxJobs: number;
  private readonly abort = new AbortController();
  private readonly stopping = new Promise<void>((resolve) =>
    this.abort.signal.addEventListener("abort", () => resolve(), { once: true }),
  );
  private running = false;
  /** Ids of the jobs being run (handed back if the agent stops before they finish). */
  private readonly activeJobIds = new Set<string>();
  private activeJobs = new Set<Promise<void>>();
  private loop: Promise<void> | null = null;
  private timers: NodeJS.Timeout[] = [];
  private healthy = true;
  private window = { total: 0, errors: 0 };
  private readonly collector: HostMetricsCollector | null;
  readonly stats: AgentStats = { jobs: 0, checks: 0, lateness: [] };

  constructor(private readonly opts: AgentOptions) {
    this.uid = opts.uid;
    this.gw = opts.gateway;
    this.log = opts.log.child({ agent: opts.uid });
    this.policy = opts.policy;
    this.sem = new Semaphore(opts.maxConcurrentChecks ?? 256);
    this.maxJobs = opts.maxJobs ?? 32;
    this.collector = opts.hostMetricsMs === 0 ? null : new HostMetricsCollector();
  }

  async start(): Promise<void> {
    const assigned = await this.gw.register({
      uid: this.uid,
      name: this.uid,
      capabilities: AGENT_CAPABILITIES,
      host: os.hostname(),
      version: VERSION,
    });
    // A remote gateway names the agent after its credential, whatever uid it asked for.
    if (assigned.uid !== this.uid) {
      this.uid = assigned.uid;
      this.log = this.opts.log.child({ agent: assigned.uid });
    }
    this.running = true;
    this.timers.push(setInterval(() => void this.heartbeat(), this.opts.heartbeatMs ?? 10_000));
    if (this.collector) {
      const every = this.opts.hostMetricsMs ?? 60_000;
      this.timers.push(setInterval(() => void this.reportHostMetrics(), every));
      // The first sample soon after start: the console's overview shows the host at once.
      setTimeout(() => void this.reportHostMetrics(), Math.min(every, 2000)).unref();
    }
    for (const t of this.timers) t.unref();
    this.loop = this.claimLoop();
    this.log.info("agent connected to its gateway");
  }

  private async heartbeat(): Promise<void> {
    // Degrade when most of the last period's checks could not run (runner errors, not target failures).
    const { total, errors } = this.window;
    this.window = { total: 0, errors: 0 };
    const healthy = total < 5 || errors / total < 0.5;
    try {
      if (healthy !== this.healthy) {
        await this.gw.health(this.uid, healthy);
        this.healthy = healthy;
        this.log.warn({ healthy, errors, total }, "agent health changed");
      }
      await this.gw.heartbeat(this.uid, { is_healthy: this.healthy });
    } catch (err) {
      this.log.warn({ err }, "agent heartbeat failed");
    }
  }

  private async reportHostMetrics(): Promise<void> {
    if (!this.collector || !this.running) return;
    try {
      await this.gw.hostMetrics(this.uid, this.collector.sample());
    } catch (err) {
      this.log.debug({ err }, "host metrics not delivered");
    }
  }

  private async claimLoop(): Promise<void> {
    let backoff = 250;
    while (this.running) {
      const free = this.maxJobs - this.activeJobs.size;
      if (free <= 0) {
        // Full: wait for a job to finish, or for stop() (which must not wait on a long job here).
        await Promise.race([...this.activeJobs, this.stopping]);
        continue;
      }
      let jobs: JobPayload[];
      try {
        jobs = await this.gw.claim(this.uid, free, this.opts.claimWaitMs ?? 20_000, this.abort.signal);
        backoff = 250;
      } catch (err) {
        if (!this.running) break;
        this.log.warn({ err: (err as Error).message }, "claim failed; retrying");
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(5000, backoff * 2);
        continue;
      }
      for (const job of jobs) {
        this.activeJobIds.add(job.id);
        const p = this.runJob(job).finally(() => {
          this.activeJobs.delete(p);
          this.activeJobIds.delete(job.id);
        });
        this.activeJobs.add(p);
      }
    }
  }

  private async runJob(job: JobPayload): Promise<void> {
    let sweepHosts: SweepHost[] | undefined;
    if (job.sweep) {
      try {
        sweepHosts = await runSweep(job.sweep, this.policy);
      } catch (err) {
        await this.gw.fail(this.uid, job.id, `sweep failed: ${(err as Error).message}`).catch(() => {});
        return;
      }
    }
    const results = await Promise.all(
      job.checks.map(async (check): Promise<SubmittedResult> => {
        await this.sem.acquire();
        const started = new Date();
        const due = job.due_at ? Date.parse(job.due_at) : Number.NaN;
        if (!Number.isNaN(due) && job.retry_count === 0) {
          this.stats.lateness.push(started.getTime() - due);
          if (this.stats.lateness.length > 10_000) this.stats.lateness.shift();
        }
        let r: CheckResult;
        try {
          // Ping stays here: its raw ICMP socket is shared by all echo checks of this process.
          r =
            this.opts.runner && check.check_type !== "ping"
              ? await this.opts.runner(check)
              : await runCheck(check, { policy: this.policy, customAllowList: this.opts.customAllowList });
        } finally {
          this.sem.release();
        }
        this.window.total++;
        if (r.status === "error") this.window.errors++;
        return {
          ...r,
          check_id: check.id,
          started_at: started.toISOString(),
          finished_at: new Date().toISOString(),
        };
      }),
    );
    this.stats.jobs++;
    this.stats.checks += results.length;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await this.gw.submit(this.uid, job.id, results, sweepHosts);
        return;
      } catch (err) {
        const status = (err as { status?: number }).status;
        if (status && status >= 400 && status < 500) {
          this.log.warn(
            { job: job.id, err: (err as Error).message },
            "results refused (job timed out or was reassigned)",
          );
          return;
        }
        await new Promise((r) => setTimeout(r, 500 * (attempt + 1)));
      }
    }
    this.log.error({ job: job.id }, "could not deliver results");
  }

  /**
   * Stop claiming, finish in-flight jobs and deliver their results (up to `graceMs`), hand back
   * the jobs that did not finish (the core retries them elsewhere at once instead of after
   * their timeout), disconnect.
   */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.abort.abort();
    for (const t of this.timers) clearInterval(t);
    // A claim answered while stopping still brings jobs (already marked started for us): let
    // the loop take them into activeJobs before deciding what finishes and what goes back.
    await this.loop?.catch(() => {});
    let grace: NodeJS.Timeout | undefined;
    const finished = await Promise.race([
      Promise.allSettled([...this.activeJobs]).then(() => true),
      new Promise<boolean>((r) => {
        grace = setTimeout(() => r(false), graceMs);
      }),
    ]);
    clearTimeout(grace);
    if (!finished && this.activeJobIds.size > 0) {
      const left = [...this.activeJobIds];
      const handed = await Promise.allSettled(
        left.map((id) => this.gw.fail(this.uid, id, "the agent stopped before the job finished")),
      );
      this.log.warn(
        { jobs: left.length, handed_back: handed.filter((h) => h.status === "fulfilled").length },
        "handed unfinished jobs back for retry",
      );
    }
    await this.loop?.catch(() => {});
    try {
      await this.gw.disconnect(this.uid);
    } catch (err) {
      this.log.warn({ err }, "disconnect failed");
    }
  }
}

/** Agent → gateway in the same process (embedded mode). */
export function inProcessGatewayLink(g: import("./gateway.ts").Gateway): GatewayLink {
  return {
    register: (hello) => g.agentRegister(hello),
    heartbeat: (uid, input) => g.agentHeartbeat(uid, input),
    health: (uid, healthy) => g.agentHealth(uid, healthy),
    disconnect: (uid) => g.agentDisconnect(uid),
    claim: (uid, max, waitMs, signal) => g.agentClaim(uid, max, waitMs, signal),
    submit: (uid, jobId, results, sweepHosts) => g.agentSubmit(uid, jobId, results, sweepHosts),
    fail: (uid, jobId, message) => g.agentFail(uid, jobId, message),
    hostMetrics: (uid, sample) => g.agentHostMetrics(uid, sample),
  };
}
