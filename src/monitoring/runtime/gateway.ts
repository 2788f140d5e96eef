/**
 * The gateway: sits between the core and its agents. Agents long-poll it for work; it claims
 * jobs from the core for exactly the agents that are asking (jobs pinned to an agent only go
 * to that agent), marks them started for that agent, relays results back, registers its
 * agents with the core and heartbeats for itself. Runs in-process (embedded) or as
 * `netmon gateway` with an HTTP server for its agents (gateway-server.ts).
 */
import type { Logger } from "../../kernel/logger.ts";
import type { HostMetricsSample } from "../host-metrics.ts";
import type { JobPayload, SubmittedResult } from "../jobs.ts";
import type { SweepHost } from "../sweep.ts";
import type { CoreLink } from "./links.ts";

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
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private readonly abort = new AbortController();
  private draining = false;
  private hbInFlight: Promise<void> | null = null;
  private started = false;
  private readonly claimWaitMs: number;
  private readonly heartbeatMs: number;

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

  /** Long-poll for one agent: claim at the core on its behalf, mark the jobs started. */
  async agentClaim(uid: string, max: number, waitMs?: number, signal?: AbortSignal): Promise<JobPayload[]> {
    if (this.draining || !this.started) return [];
    const a = this.touch(uid);
    a.claims++;
    try {
      const signals = [this.abort.signal, ...(signal ? [signal] : [])];
      const jobs = await this.core.claim(
        {
          gatewayId: this.id,
          agentUids: [uid],
          max,
          waitMs: Math.min(waitMs ?? this.claimWaitMs, this.claimWaitMs),
        },
        AbortSignal.any(signals),
      );
      const started: JobPayload[] = [];
      for (const j of jobs) {
        try {
          await this.core.start(j.id, uid);
          started.push(j);
        } catch (err) {
          this.log.warn({ err, job: j.id }, "could not start a claimed job");
        }
      }
      return started;
    } finally {
      a.claims--;
    }
  }

  async agentSubmit(
    uid: string,
    jobId: string,
    results: SubmittedResult[],
    sweepHosts?: SweepHost[],
  ): Promise<void> {
    this.touch(uid);
    await this.core.complete(jobId, { agentId: uid, gatewayId: this.id, results, sweepHosts });
  }

  async agentFail(uid: string, jobId: string, message: string): Promise<void> {
    this.touch(uid);
    await this.core.fail(jobId, { message, code: "EXECUTION_ERROR" });
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
    try {
      await this.core.gatewayOp(this.id, "finish_draining");
    } catch (err) {
      this.log.warn({ err }, "drain/finish failed");
    }
    this.started = false;
    this.log.info("gateway drained");
  }
}
