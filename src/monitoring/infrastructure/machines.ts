/**
 * State machines of gateways, agents and agent release rollouts (reference §2.1, §2.2, §2.5).
 */
import { defineStateMachine } from "../../jsonapi/state-machine.ts";

export const GATEWAY_STATES = [
  "inactive",
  "healthy",
  "degraded",
  "offline",
  "recovering",
  "maintenance",
  "draining",
] as const;

export const gatewayMachine = defineStateMachine({
  name: "gateway",
  attribute: "status",
  states: GATEWAY_STATES,
  initial: ["healthy", "inactive"],
  transitions: {
    activate: { from: ["inactive"], to: "healthy" },
    degrade: { from: ["healthy"], to: "degraded" },
    heartbeat_timeout: { from: ["healthy", "degraded"], to: "degraded" },
    go_offline: { from: ["healthy", "degraded", "draining"], to: "offline" },
    lose_connection: { from: ["healthy", "degraded"], to: "offline" },
    recover: { from: ["degraded", "offline", "recovering"], to: "recovering" },
    restore_health: { from: ["degraded", "recovering"], to: "healthy" },
    start_maintenance: { from: ["healthy", "degraded"], to: "maintenance" },
    end_maintenance: { from: ["maintenance"], to: "healthy" },
    start_draining: { from: ["healthy", "degraded"], to: "draining" },
    finish_draining: { from: ["draining"], to: "offline" },
    deactivate: {
      from: ["healthy", "degraded", "offline", "recovering", "maintenance", "draining"],
      to: "inactive",
    },
    heartbeat: { from: "*", to: null },
  },
});

export const AGENT_STATES = ["connecting", "connected", "degraded", "disconnected", "unavailable"] as const;

export const agentMachine = defineStateMachine({
  name: "agent",
  attribute: "status",
  states: AGENT_STATES,
  initial: ["connecting", "connected"],
  transitions: {
    establish_connection: { from: ["connecting"], to: "connected" },
    connection_failed: { from: ["connecting"], to: "disconnected" },
    degrade: { from: ["connected"], to: "degraded" },
    restore_health: { from: ["degraded"], to: "connected" },
    lose_connection: { from: ["connected", "degraded"], to: "disconnected" },
    reconnect: { from: ["disconnected"], to: "connecting" },
    mark_unavailable: { from: ["connecting", "connected", "degraded", "disconnected"], to: "unavailable" },
    recover: { from: ["unavailable"], to: "connecting" },
    heartbeat: { from: "*", to: null },
  },
});

export const RELEASE_TARGET_STATES = [
  "pending",
  "dispatched",
  "downloading",
  "verifying",
  "staged",
  "restarting",
  "healthy",
  "failed",
  "rolled_back",
  "canceled",
] as const;
export type ReleaseTargetState = (typeof RELEASE_TARGET_STATES)[number];

export const IN_FLIGHT: readonly ReleaseTargetState[] = [
  "dispatched",
  "downloading",
  "verifying",
  "staged",
  "restarting",
];
export const TERMINAL: readonly ReleaseTargetState[] = ["healthy", "failed", "rolled_back", "canceled"];
const NON_TERMINAL: readonly ReleaseTargetState[] = ["pending", ...IN_FLIGHT];

/** Per-agent release target (reference §2.5; driven by the release manager, not an API). */
export const releaseTargetMachine = defineStateMachine({
  name: "agent-release-target",
  attribute: "status",
  states: RELEASE_TARGET_STATES,
  initial: ["pending"],
  transitions: {
    dispatch: { from: ["pending"], to: "dispatched" },
    dispatch_compliant: { from: ["pending"], to: "healthy" },
    dispatch_failed: { from: ["pending"], to: "failed" },
    progress_dispatched: { from: IN_FLIGHT, to: "dispatched" },
    progress_downloading: { from: IN_FLIGHT, to: "downloading" },
    progress_verifying: { from: IN_FLIGHT, to: "verifying" },
    progress_staged: { from: IN_FLIGHT, to: "staged" },
    progress_restarting: { from: IN_FLIGHT, to: "restarting" },
    result_healthy: { from: IN_FLIGHT, to: "healthy" },
    result_staged: { from: IN_FLIGHT, to: "staged" },
    result_rolled_back: { from: IN_FLIGHT, to: "rolled_back" },
    result_failed: { from: IN_FLIGHT, to: "failed" },
    cancel: { from: ["pending"], to: "canceled" },
    reconcile: { from: NON_TERMINAL, to: "healthy" },
  },
});

export const ROLLOUT_STATES = ["active", "paused", "completed", "canceled"] as const;

export const rolloutMachine = defineStateMachine({
  name: "agent-release-rollout",
  attribute: "status",
  states: ROLLOUT_STATES,
  initial: ["active"],
  transitions: {
    pause: { from: ["active"], to: "paused" },
    resume: { from: ["paused"], to: "active" },
    complete: { from: ["active", "paused"], to: "completed" },
    cancel: { from: ["active", "paused"], to: "canceled" },
  },
});
