import type { Actor } from "../../access/actor.ts";
import type { Config } from "../../config/config.ts";
import type { AppContext } from "../../kernel/context.ts";
import { createLogger } from "../../kernel/logger.ts";
import type { Db } from "../../storage/db.ts";

/** A domain context on a test database with a settable clock (tests only). */
export function testContext(db: Db): AppContext & { setNow(d: Date): void } {
  let now: Date | null = null;
  return {
    config: {} as Config,
    db,
    log: createLogger("silent"),
    secretKey: Buffer.alloc(32, 1),
    now: () => now ?? new Date(),
    setNow(d: Date) {
      now = d;
    },
  };
}

/** A user actor holding exactly these permissions. */
export function actorWith(permissions: string[], partitions: string[] | null = null): Actor {
  return {
    kind: "user",
    id: "00000000-0000-4000-8000-000000000001",
    email: "tester@example.test",
    role: "operator",
    roleProfileId: null,
    permissions: new Set(permissions),
    authMethod: "api_token",
    partitions,
  };
}
