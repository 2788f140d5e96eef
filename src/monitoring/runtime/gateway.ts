/**
 * The gateway: sits between the core and its agents. Agents long-poll it for work; it claims
 * jobs from the core for exactly the agents that are asking (jobs pinned to an agent only go
 * to that agent), marks them started for that agent, relays results back, registers its
 * agents with the core and heartbeats for itself. Runs in-process (embedded) or as
 * `netmon gateway` with an HTTP server for its agents (gateway-server.ts).
 *
 * Claims are multiplexed: however many agents are waiting, the gateway keeps ONE claim
 * request open at the core, for all of them (their uids, the sum of their free capacity), and
 * hands the jobs out when it returns — one gateway may front thousands of agents without
 * holding thousands of core long-polls (each of which re-checks the database every second).
 * Jobs the gateway claimed but could not hand out (the agent left meanwhile) wait in a small
 * backlog for the next claim and are failed back to the core (→ retried) when it drains.
 */
import { NotFoundError } from "../../kernel/errors.ts";
import type { Logger } from "../../kernel/logger.ts";
import type { HostMetricsSample } from "../host-metrics.ts";
import type { JobPayload, SubmittedResult } from "../jobs.ts";
import type { SweepHost } from "../sweep.ts";
import type { CoreLink } from "./links.ts";

/** A pinned job runs on its agent, a pooled one on an agent carrying its labels, others anywhere. */
function mayRun(j: JobPayload, uid: string): boolean {
  if (j.target_agent_uid) return j.target_agent_uid === uid;
  return j.eligible_agent_uids === undefined || j.eligible_agent_uids.includes(uid);
}

export interface AgentHello {
  uid: string;
  name?: string;
  capabilities?: string[];
  host?: string;
  version?: string;
}

interface AgentState {
  uid: string;
  lastSeen: number;
  claims: number;
}

/** An agent's claim waiting at the gateway. */
interface Waiter {
  uid: string;
  max: number;
  done: boolean;
  finish(jobs: JobPayload[]): void;
}

/** How long one shared core claim waits: short, so agents that arrive meanwhile join soon. */
const SHARED_CLAIM_WAIT_MS = 1_000;

export interface GatewayOptions {
  id: string;
  core: CoreLink;
  log: Logger;
  heartbeatMs?: number;
  /** Max time one agent claim waits at the core. */
  claimWaitMs?: number;
}

export class Gateway {
  readonly id: string;
  private readonly core: CoreLink;
  private readonly log: Logger;
  private readonly agents = new Map<string, AgentState>();
  /** Which agent each started job was handed to: only that agent may report on it. */
  private readonly handedTo = new Map<string, string>();
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private readonly abort = new AbortController();
  private draining = false;
  private hbInFlight: Promise<void> | null = null;
  private started = false;
  private readonly claimWaitMs: number;
  private readonly heartbeatMs: number;
  private readonly waiters = new Set<Waiter>();
  /** Claimed but not yet handed out: pinned jobs by agent, and unpinned ones. */
  private readonly backlog: JobPayload[] = [];
  private polling: Promise<void> | null = null;
  /** Claim requests sent to the core (observability and tests). */
  coreClaims = 0;

  /** Jobs claimed at the core and not yet handed to an agent. */
  get backlogSize(): number {
    return this.backlog.length;
  }

  constructor(opts: GatewayOptions) {
    this.id = opts.id;
    this.core = opts.core;
    this.log = opts.log.child({ gateway: opts.id });
    this.claimWaitMs = opts.claimWaitMs ?? 20_000;
    this.heartbeatMs = opts.heartbeatMs ?? 10_000;
  }

  async start(): Promise<void> {
    await this.core.registerGateway(this.id, { component_id: this.id, metadata: { pid: process.pid } });
    this.started = true;
    this.heartbeatTimer = setInterval(() => {
      if (!this.hbInFlight) this.hbInFlight = this.heartbeat().finally(() => (this.hbInFlight = null));
    }, this.heartbeatMs);
    this.heartbeatTimer.unref();
    this.log.info("gateway registered");
  }

  private async heartbeat(): Promise<void> {
    try {
      await this.core.gatewayOp(this.id, "heartbeat", {
        agent_count: this.agents.size,
        checker_count: this.agents.size,
        is_healthy: true,
      });
    } catch (err) {
      this.log.warn({ err }, "gateway heartbeat failed");
    }
  }

  isDraining(): boolean {
    return this.draining;
  }

  // ---- the agent-facing API (called in-process or by gateway-server.ts) ----

  async agentRegister(hello: AgentHello): Promise<{ gateway_id: string; uid: string }> {
    await this.core.registerAgent(hello.uid, { ...hello, gateway_id: this.id });
    await this.core.agentOp(hello.uid, "establish_connection", { gateway_id: this.id });
    this.agents.set(hello.uid, { uid: hello.uid, lastSeen: Date.now(), claims: 0 });
    this.log.info({ agent: hello.uid }, "agent connected");
    return { gateway_id: this.id, uid: hello.uid };
  }

  private touch(uid: string): AgentState {
    let a = this.agents.get(uid);
    if (!a) {
      a = { uid, lastSeen: Date.now(), claims: 0 };
      this.agents.set(uid, a);
    }
    a.lastSeen = Date.now();
    return a;
  }

  async agentHeartbeat(uid: string, input: { is_healthy?: boolean }): Promise<void> {
    this.touch(uid);
    await this.core.agentOp(uid, "heartbeat", input);
  }

  async agentHealth(uid: string, healthy: boolean): Promise<void> {
    this.touch(uid);
    // Recovery is a healthy heartbeat (the internal restore_health transition, spec §3).
    if (healthy) await this.core.agentOp(uid, "heartbeat", { is_healthy: true });
    else await this.core.agentOp(uid, "degrade");
  }

  async agentDisconnect(uid: string): Promise<void> {
    this.agents.delete(uid);
    await this.core.agentOp(uid, "lose_connection");
    this.log.info({ agent: uid }, "agent disconnected");
  }

  /**
   * Long-poll for one agent: wait (up to `waitMs`) for jobs the shared core claim obtains for
   * it, mark them started for this agent, return them.
   */
  async agentClaim(uid: string, max: number, waitMs?: number, signal?: AbortSignal): Promise<JobPayload[]> {
    if (this.draining || !this.started) return [];
    const a = this.touch(uid);
    a.claims++;
    try {
      const want = Math.max(1, Math.min(500, Math.floor(max)));
      const jobs = this.takeBacklog(uid, want);
      const mine = jobs.length > 0 ? jobs : await this.wait(uid, want, waitMs ?? this.claimWaitMs, signal);
      return await this.startFor(uid, mine);
    } finally {
      a.claims--;
    }
  }

  private wait(uid: string, max: number, waitMs: number, signal?: AbortSignal): Promise<JobPayload[]> {
    return new Promise((resolve) => {
      const w: Waiter = {
        uid,
        max,
        done: false,
        finish: (jobs) => {
          if (w.done) return;
          w.done = true;
          this.waiters.delete(w);
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve(jobs);
        },
      };
      const onAbort = () => w.finish([]);
      const timer = setTimeout(onAbort, Math.max(0, Math.min(waitMs, this.claimWaitMs)));
      signal?.addEventListener("abort", onAbort);
      if (signal?.aborted) return onAbort();
      this.waiters.add(w);
      this.ensurePolling();
    });
  }

  private ensurePolling(): void {
    if (this.polling) return;
    this.polling = this.pollCore().finally(() => {
      this.polling = null;
      if (this.waiters.size > 0 && !this.draining) this.ensurePolling();
    });
  }

  /** One claim at a time at the core, for every agent waiting when it is sent. */
  private async pollCore(): Promise<void> {
    while (this.waiters.size > 0 && !this.draining) {
      // Backlogged jobs first: a waiter that can take one does not need the core.
      if (this.backlog.length > 0) this.handOut(this.backlog.splice(0));
      if (this.waiters.size === 0) break;
      const batch = [...this.waiters];
      const uids = [...new Set(batch.map((w) => w.uid))];
      const max = Math.min(
        500,
        batch.reduce((n, w) => n + w.max, 0),
      );
      let jobs: JobPayload[];
      try {
        this.coreClaims++;
        jobs = await this.core.claim(
          { gatewayId: this.id, agentUids: uids, max, waitMs: SHARED_CLAIM_WAIT_MS },
          this.abort.signal,
        );
      } catch (err) {
        if (this.abort.signal.aborted) return;
        this.log.warn({ err }, "claim at the core failed; retrying");
        await new Promise((r) => setTimeout(r, 1_000));
        continue;
      }
      this.handOut(jobs);
    }
  }

  /** Pinned jobs to their agent, the rest round-robin to waiters with room; leftovers to the backlog. */
  private handOut(jobs: JobPayload[]): void {
    const open = [...this.waiters].filter((w) => !w.done);
    const given = new Map<Waiter, JobPayload[]>();
    const room = (w: Waiter) => w.max - (given.get(w)?.length ?? 0);
    const give = (w: Waiter, j: JobPayload) => given.set(w, [...(given.get(w) ?? []), j]);
    let rr = 0;
    for (const j of jobs) {
      const candidates = open.filter((w) => mayRun(j, w.uid) && room(w) > 0);
      if (candidates.length === 0) {
        this.backlog.push(j);
        continue;
      }
      give(candidates[rr++ % candidates.length] as Waiter, j);
    }
    for (const [w, js] of given) w.finish(js);
  }

  private takeBacklog(uid: string, max: number): JobPayload[] {
    const out: JobPayload[] = [];
    for (let i = 0; i < this.backlog.length && out.length < max; ) {
      const j = this.backlog[i] as JobPayload;
      if (mayRun(j, uid)) {
        out.push(j);
        this.backlog.splice(i, 1);
      } else i++;
    }
    return out;
  }

  /** Mark jobs started for the agent at the core; a job that cannot start is left to time out. */
  private async startFor(uid: string, jobs: JobPayload[]): Promise<JobPayload[]> {
    const started: JobPayload[] = [];
    for (const j of jobs) {
      try {
        await this.core.start(j.id, uid);
        this.handedTo.set(j.id, uid);
        started.push(j);
      } catch (err) {
        this.log.warn({ err, job: j.id }, "could not start a claimed job");
      }
    }
    return started;
  }

  async agentSubmit(
    uid: string,
    jobId: string,
    results: SubmittedResult[],
    sweepHosts?: SweepHost[],
  ): Promise<void> {
    this.touch(uid);
    this.assertHandedTo(uid, jobId);
    await this.core.complete(jobId, { agentId: uid, gatewayId: this.id, results, sweepHosts });
    this.handedTo.delete(jobId);
  }

  async agentFail(uid: string, jobId: string, message: string): Promise<void> {
    this.touch(uid);
    this.assertHandedTo(uid, jobId);
    await this.core.fail(jobId, { message, code: "EXECUTION_ERROR" });
    this.handedTo.delete(jobId);
  }

  /** An agent reports only on jobs this gateway handed to it (404 otherwise, as unknown). */
  private assertHandedTo(uid: string, jobId: string): void {
    if (this.handedTo.get(jobId) !== uid) throw new NotFoundError(`poll job ${jobId} not found`);
  }

  async agentHostMetrics(uid: string, sample: HostMetricsSample): Promise<void> {
    this.touch(uid);
    await this.core.hostMetrics({ agentId: uid, gatewayId: this.id, sample });
  }

  /** Graceful stop: drain/start, stop handing out work, drain/finish (→ offline). */
  async stop(): Promise<void> {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (!this.started) return;
    // A heartbeat landing after drain/finish would mark the offline gateway healthy again.
    await this.hbInFlight;
    this.draining = true;
    try {
      await this.core.gatewayOp(this.id, "start_draining");
    } catch (err) {
      this.log.warn({ err }, "drain/start failed");
    }
    this.abort.abort();
    for (const w of [...this.waiters]) w.finish([]);
    await this.polling;
    // Claimed but never handed out: give them back so another gateway's agents retry them.
    for (const j of this.backlog.splice(0)) {
      try {
        await this.core.fail(j.id, { message: "gateway draining", code: "GATEWAY_DRAINING" });
      } catch (err) {
        this.log.warn({ err, job: j.id }, "could not release a claimed job");
      }
    }
    try {
      await this.core.gatewayOp(this.id, "finish_draining");
    } catch (err) {
      this.log.warn({ err }, "drain/finish failed");
    }
    this.started = false;
    this.log.info("gateway drained");
  }
}
