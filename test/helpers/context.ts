import { loadConfig } from "../../src/config/config.ts";
import type { AppContext } from "../../src/kernel/context.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { createTestDatabase } from "./database.ts";

/**
 * An AppContext on a fresh migrated test database, for domain tests that run without HTTP.
 * `now` defaults to the wall clock; pass a function to drive time by hand.
 */
export async function createTestContext(opts: { now?: () => Date } = {}): Promise<AppContext> {
  const { db } = await createTestDatabase();
  return {
    config: loadConfig({}),
    db,
    log: createLogger("silent"),
    secretKey: Buffer.alloc(32),
    now: opts.now ?? (() => new Date()),
  };
}
