/**
 * The monitoring feature on the core: control-plane routes, the leader-only background work
 * (scheduler, stale-job reaper, liveness sweep, pruning) and, in the embedded default, one
 * in-process gateway and agent running the same code as `netmon gateway` / `netmon agent`.
 */

import os from "node:os";
import type { AppContext } from "../kernel/context.ts";
import type { Feature } from "../kernel/feature.ts";
import { loadOrCreateInstanceId } from "../kernel/instance-id.ts";
import { evaluateDueComposites, pruneCompositeResults } from "./composite.ts";
import { registerControlRoutes } from "./control-routes.ts";
import { DEFAULT_HEARTBEAT_TIMEOUT_SECONDS, markSilent } from "./fleet.ts";
import { clearPlaceableAlerts, endJobsOfGoneAgents } from "./gone-agents.ts";
import { jobSignal, pruneJobs, reapStaleJobs, releaseOrphans } from "./jobs.ts";
import { clearRecoveredSilenceAlerts, raiseSilenceAlerts } from "./liveness-alerts.ts";
import { sweepOverdueChecks } from "./overdue.ts";
import { reconcileProfiles } from "./profiles.ts";
import { Agent, inProcessGatewayLink } from "./runtime/agent.ts";
import { CheckThread } from "./runtime/check-thread.ts";
import { Gateway } from "./runtime/gateway.ts";
import { inProcessCoreLink } from "./runtime/links.ts";
import { SCHEDULER_LOCK_KEY, scheduleDue } from "./scheduler.ts";
import { monitoringSettings } from "./settings.ts";
import { registerSweepRoutes } from "./sweep-routes.ts";
import { TargetPolicy } from "./target-policy.ts";

export interface MonitoringOptions {
  /** Scheduler tick (ms). */
  tickMs?: number;
  /** Run the embedded gateway + agent (default: config.embeddedAgent). */
  embedded?: boolean;
}

export interface MonitoringRuntime {
  gateway: Gateway | null;
  agent: Agent | null;
  /** The worker thread the embedded agent's checks run in. */
  checkThread: CheckThread | null;
  isLeader(): boolean;
}

const RUNTIMES = new WeakMap<AppContext, MonitoringRuntime>();
export function monitoringRuntime(ctx: AppContext): MonitoringRuntime | undefined {
  return RUNTIMES.get(ctx);
}

export function createMonitoringFeature(opts: MonitoringOptions = {}): Feature {
  let timers: NodeJS.Timeout[] = [];
  let release: (() => Promise<void>) | null = null;
  let stopped = false;
  let busy = false;
  let gateway: Gateway | null = null;
  let agent: Agent | null = null;
  let checkThread: CheckThread | null = null;
  let lastReap = 0;
  let lastSweep = 0;
  let lastPrune = 0;

  return {
    name: "monitoring",
    routes(app, ctx) {
      registerControlRoutes(app, ctx);
      registerSweepRoutes(app, ctx);
    },
    async start(ctx) {
      const settings = monitoringSettings(ctx.config);
      const embedded = opts.embedded ?? ctx.config.embeddedAgent;
      // Per-instance identity: host name plus the data directory's instance id.
      const embeddedId = `embedded-${os.hostname()}-${loadOrCreateInstanceId(ctx.config.dataDir)}`.slice(
        0,
        200,
      );
      // Placement is explicit (decision 0600): checks with no agent run on this core's embedded
      // agent, so a remote agent joining never silently takes them over.
      const defaultAgentUid = embedded && settings.unassignedChecks === "embedded" ? embeddedId : undefined;
      const tick = async () => {
        if (busy || stopped) return;
        busy = true;
        try {
          if (!release) {
            const held = await ctx.db.tryAdvisoryLock(SCHEDULER_LOCK_KEY, (err) => {
              // The lock went with its connection (PostgreSQL restarted): lead again only
              // after winning it again, so two replicas never both believe they lead.
              if (release === held) release = null;
              ctx.log.warn({ err }, "scheduler leadership lost with its database connection");
            });
            release = held;
          }
          if (!release) return; // another replica leads
          const r = await scheduleDue(ctx, { defaultAgentUid });
          if (r.jobs > 0) jobSignal(ctx).emit("jobs");
          const now = Date.now();
          if (now - lastReap > 2000) {
            lastReap = now;
            await reapStaleJobs(ctx);
            await evaluateDueComposites(ctx);
          }
          if (now - lastSweep > 10_000) {
            lastSweep = now;
            const silent = await markSilent(ctx, settings.heartbeatTimeoutSeconds);
            await raiseSilenceAlerts(ctx, silent, settings.heartbeatTimeoutSeconds);
            await clearRecoveredSilenceAlerts(ctx);
            await endJobsOfGoneAgents(ctx, settings.heartbeatTimeoutSeconds, { defaultAgentUid });
            await clearPlaceableAlerts(ctx);
            await sweepOverdueChecks(ctx);
            await reconcileProfiles(ctx);
            await releaseOrphans(ctx);
          }
          if (now - lastPrune > 3_600_000) {
            lastPrune = now;
            await pruneJobs(ctx, settings.jobRetentionDays);
            await pruneCompositeResults(ctx, settings.jobRetentionDays);
          }
        } catch (err) {
          if (!stopped) ctx.log.error({ err }, "monitoring scheduler tick failed");
        } finally {
          busy = false;
        }
      };
      timers.push(setInterval(() => void tick(), opts.tickMs ?? 500));
      for (const t of timers) t.unref();

      if (embedded) {
        const id = embeddedId;
        const policyOptions = {
          allowLinkLocal: settings.allowLinkLocal,
          allowCore: settings.allowCore,
          coreEndpoints: ctx.listening ?? [{ host: ctx.config.host, port: ctx.config.port }],
        };
        const policy = new TargetPolicy(policyOptions);
        checkThread = new CheckThread({
          policy: policyOptions,
          customAllowList: settings.customAllowList,
          log: ctx.log,
        });
        const thread = checkThread;
        gateway = new Gateway({ id, core: inProcessCoreLink(ctx), log: ctx.log });
        await gateway.start();
        agent = new Agent({
          uid: id,
          gateway: inProcessGatewayLink(gateway),
          policy,
          log: ctx.log,
          customAllowList: settings.customAllowList,
          hostMetricsMs: settings.hostMetricsIntervalSeconds * 1000,
          runner: (spec) => thread.run(spec),
        });
        await agent.start();
      }
      const g = gateway;
      const a = agent;
      RUNTIMES.set(ctx, { gateway: g, agent: a, checkThread, isLeader: () => release !== null });
    },
    async stop() {
      stopped = true;
      for (const t of timers) clearInterval(t);
      timers = [];
      await agent?.stop(5000);
      await checkThread?.close();
      await gateway?.stop();
      while (busy) await new Promise((r) => setTimeout(r, 20));
      if (release) {
        await release().catch(() => {});
        release = null;
      }
    },
  };
}

export { DEFAULT_HEARTBEAT_TIMEOUT_SECONDS };
