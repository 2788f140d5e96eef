import type { Config } from "../config/config.ts";
import type { Db } from "../storage/db.ts";
import type { Logger } from "./logger.ts";
import type { Metrics } from "./metrics.ts";

/**
 * What every domain receives: configuration, storage, logging, the instance secret and a
 * clock (injectable so time-based logic is testable). No HTTP here: domains run without it.
 */
export interface AppContext {
  config: Config;
  db: Db;
  log: Logger;
  secretKey: Buffer;
  now: () => Date;
  /** The HTTP endpoints this core really listens on (set once listening; port 0 resolved). */
  listening?: { host: string; port: number }[];
  /** Self-metrics (set by the server; absent in CLI commands, where nothing scrapes them). */
  metrics?: Metrics;
}
