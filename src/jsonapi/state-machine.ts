/**
 * The one place state transitions are enforced. A machine is data (states + named
 * transitions with allowed source states); `checkTransition` throws InvalidTransitionError
 * (400, naming the operation and the current state) when the source state is not allowed.
 * The engine applies a transition as `UPDATE … WHERE id = $id AND <state> = ANY(from)` inside a
 * transaction after `SELECT … FOR UPDATE`, so a concurrent change can never slip through.
 */
import { InvalidTransitionError } from "../kernel/errors.ts";

export interface TransitionDecl {
  from: readonly string[] | "*";
  /** Target state; null means "no state change" (e.g. heartbeat). */
  to: string | null;
}

export interface StateMachine<S extends string = string> {
  name: string;
  /** Attribute (and column) holding the state. */
  attribute: string;
  states: readonly S[];
  initial: readonly S[];
  transitions: Readonly<Record<string, TransitionDecl>>;
}

export function defineStateMachine<S extends string>(m: StateMachine<S>): StateMachine<S> {
  for (const [name, t] of Object.entries(m.transitions)) {
    if (t.from !== "*") {
      for (const f of t.from) {
        if (!m.states.includes(f as S))
          throw new Error(`state machine ${m.name}: ${name} from unknown state ${f}`);
      }
    }
    if (t.to !== null && !m.states.includes(t.to as S)) {
      throw new Error(`state machine ${m.name}: ${name} to unknown state ${t.to}`);
    }
  }
  for (const s of m.initial)
    if (!m.states.includes(s)) throw new Error(`state machine ${m.name}: bad initial ${s}`);
  return Object.freeze(m);
}

export function canTransition(m: StateMachine, transition: string, current: string): boolean {
  const t = m.transitions[transition];
  if (!t) return false;
  return t.from === "*" || t.from.includes(current);
}

/**
 * Check a transition from `current`; returns the resulting state (the current one for
 * non-transitions). Throws InvalidTransitionError naming `operation` and `current`.
 */
export function checkTransition(
  m: StateMachine,
  transition: string,
  current: string,
  operation = transition,
): string {
  const t = m.transitions[transition];
  if (!t) throw new Error(`state machine ${m.name}: unknown transition ${transition}`);
  if (!canTransition(m, transition, current)) {
    throw new InvalidTransitionError(operation, current, {
      extra: { allowed_from: t.from === "*" ? m.states : t.from, resource: m.name },
    });
  }
  return t.to ?? current;
}

/** Allowed source states of a transition (for docs and OpenAPI descriptions). */
export function sourcesOf(m: StateMachine, transition: string): readonly string[] {
  const t = m.transitions[transition];
  if (!t) return [];
  return t.from === "*" ? m.states : t.from;
}
