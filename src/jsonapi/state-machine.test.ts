import { describe, expect, it } from "vitest";
import { InvalidTransitionError } from "../kernel/errors.ts";
import {
  AGENT_STATES,
  agentMachine,
  GATEWAY_STATES,
  gatewayMachine,
  RELEASE_TARGET_STATES,
  releaseTargetMachine,
  rolloutMachine,
} from "../monitoring/infrastructure/machines.ts";
import { canTransition, checkTransition, defineStateMachine, sourcesOf } from "./state-machine.ts";

describe("state machines", () => {
  it("gateway transitions match reference §2.1 exactly", () => {
    const table: Record<string, [string[], string | null]> = {
      activate: [["inactive"], "healthy"],
      degrade: [["healthy"], "degraded"],
      go_offline: [["healthy", "degraded", "draining"], "offline"],
      recover: [["degraded", "offline", "recovering"], "recovering"],
      restore_health: [["degraded", "recovering"], "healthy"],
      start_maintenance: [["healthy", "degraded"], "maintenance"],
      end_maintenance: [["maintenance"], "healthy"],
      start_draining: [["healthy", "degraded"], "draining"],
      finish_draining: [["draining"], "offline"],
      deactivate: [["healthy", "degraded", "offline", "recovering", "maintenance", "draining"], "inactive"],
    };
    for (const [t, [from, to]] of Object.entries(table)) {
      for (const s of GATEWAY_STATES) {
        expect(canTransition(gatewayMachine, t, s), `${t} from ${s}`).toBe(from.includes(s));
        if (from.includes(s)) expect(checkTransition(gatewayMachine, t, s)).toBe(to);
      }
    }
    for (const s of GATEWAY_STATES) expect(checkTransition(gatewayMachine, "heartbeat", s)).toBe(s);
  });

  it("agent transitions match reference §2.2", () => {
    expect(sourcesOf(agentMachine, "establish_connection")).toEqual(["connecting"]);
    expect(sourcesOf(agentMachine, "lose_connection")).toEqual(["connected", "degraded"]);
    expect(sourcesOf(agentMachine, "mark_unavailable")).toEqual([
      "connecting",
      "connected",
      "degraded",
      "disconnected",
    ]);
    for (const s of AGENT_STATES) expect(checkTransition(agentMachine, "heartbeat", s)).toBe(s);
    expect(checkTransition(agentMachine, "recover", "unavailable")).toBe("connecting");
  });

  it("a disallowed transition throws a 400 naming the operation and the current state", () => {
    try {
      checkTransition(gatewayMachine, "finish_draining", "healthy", "drain/finish");
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidTransitionError);
      const e = err as InvalidTransitionError;
      expect(e.status).toBe(400);
      expect(e.message).toBe("cannot drain/finish from state 'healthy'");
      expect(e.extra.operation).toBe("drain/finish");
      expect(e.extra.current_state).toBe("healthy");
      expect(e.extra.allowed_from).toEqual(["draining"]);
    }
  });

  it("release target: in-flight states accept progress, terminal states accept nothing", () => {
    for (const s of RELEASE_TARGET_STATES) {
      const terminal = ["healthy", "failed", "rolled_back", "canceled"].includes(s);
      for (const t of Object.keys(releaseTargetMachine.transitions)) {
        if (terminal) expect(canTransition(releaseTargetMachine, t, s), `${t} from ${s}`).toBe(false);
      }
    }
    expect(checkTransition(releaseTargetMachine, "dispatch", "pending")).toBe("dispatched");
    expect(checkTransition(releaseTargetMachine, "progress_verifying", "downloading")).toBe("verifying");
    expect(() => checkTransition(releaseTargetMachine, "progress_verifying", "pending")).toThrow(
      InvalidTransitionError,
    );
    expect(checkTransition(rolloutMachine, "pause", "active")).toBe("paused");
    expect(() => checkTransition(rolloutMachine, "resume", "completed")).toThrow(InvalidTransitionError);
  });

  it("rejects machines that name unknown states", () => {
    expect(() =>
      defineStateMachine({
        name: "x",
        attribute: "s",
        states: ["a"],
        initial: ["a"],
        transitions: { go: { from: ["b"], to: "a" } },
      }),
    ).toThrow();
  });
});
