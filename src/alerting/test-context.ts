/**
 * Test support for alerting domain tests: an AppContext on a fresh migrated database with a
 * controllable clock, and actors with explicit permissions. Used by *.test.ts only.
 */
import type { Actor, Role } from "../access/actor.ts";
import { roleDefaults } from "../access/permissions.ts";
import { loadConfig } from "../config/config.ts";
import type { AppContext } from "../kernel/context.ts";
import { createLogger } from "../kernel/logger.ts";
import type { Db } from "../storage/db.ts";

export interface TestClock {
  now(): Date;
  set(d: Date | string): void;
  advance(seconds: number): void;
}

export function testClock(start = "2026-01-01T00:00:00Z"): TestClock {
  let t = new Date(start).getTime();
  return {
    now: () => new Date(t),
    set: (d) => {
      t = new Date(d).getTime();
    },
    advance: (s) => {
      t += s * 1000;
    },
  };
}

export function testContext(db: Db, clock: TestClock): AppContext {
  return {
    config: loadConfig({ NETMON_DATA_DIR: "/tmp/netmon-alerting-test", NETMON_LOG_LEVEL: "silent" }),
    db,
    log: createLogger("silent"),
    secretKey: Buffer.alloc(32, 1),
    now: () => clock.now(),
  };
}

let n = 0;
export function testActor(role: Role | null, permissions: string[] = [], email?: string): Actor {
  n += 1;
  return {
    kind: "user",
    id: `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`,
    email: email ?? `user${n}@example.test`,
    role: role ?? "viewer",
    roleProfileId: null,
    permissions: new Set(permissions),
    authMethod: "api_token",
    partitions: null,
  };
}

/**
 * A user holding exactly what their role grants by default (as sign-in builds them), plus
 * `extra`: the production-like actor for tests of permission-checked actions.
 */
export function roleActor(role: Role, extra: string[] = [], email?: string): Actor {
  return testActor(role, [...roleDefaults(role), ...extra], email);
}
