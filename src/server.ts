import type { FastifyInstance } from "fastify";
import type { DestinationStream } from "pino";
import type { Config } from "./config/config.ts";
import { allFeatures } from "./features.ts";
import { buildApp } from "./http/app.ts";
import type { AppContext } from "./kernel/context.ts";
import type { Feature } from "./kernel/feature.ts";
import { chooseLogFormat, createLogger, type Logger } from "./kernel/logger.ts";
import { Metrics } from "./kernel/metrics.ts";
import { loadOrCreateSecretKey } from "./kernel/secret-key.ts";
import type { Db } from "./storage/db.ts";
import { migrate } from "./storage/migrate.ts";
import { openDatabase } from "./storage/open.ts";

export interface StartOptions {
  /** Use this database instead of opening one from config (tests, or serve's early open). */
  db?: Db;
  /** The given `db` is this server's: closed when it stops or fails to start (serve's early open). */
  ownsDb?: boolean;
  features?: Feature[];
  logDestination?: DestinationStream;
  logger?: Logger;
}

export interface RunningServer {
  app: FastifyInstance;
  ctx: AppContext;
  url: string;
  port: number;
  /** Graceful stop: stop accepting, finish in-flight requests, stop features, close the database. */
  close(): Promise<void>;
}

/** Open storage, migrate, build the HTTP edge, listen, then start background features. */
export async function startServer(config: Config, opts: StartOptions = {}): Promise<RunningServer> {
  // A given destination (tests) is not a terminal: pretty only when asked for explicitly.
  const format = opts.logDestination
    ? config.logFormat === "pretty"
      ? "pretty"
      : "json"
    : chooseLogFormat(config.logFormat, Boolean(process.stdout.isTTY));
  const log = opts.logger ?? createLogger(config.logLevel, opts.logDestination, format);
  const secretKey = loadOrCreateSecretKey(config.secretKeyFile);
  const db = opts.db ?? (await openDatabase(config));
  const ownsDb = !opts.db || opts.ownsDb === true;
  try {
    const { applied, warnings } = await migrate(db);
    if (applied.length > 0) log.info({ applied }, "migrations applied");
    for (const w of warnings) log.warn(w);
  } catch (err) {
    if (ownsDb) await db.close().catch(() => {});
    throw err;
  }

  const ctx: AppContext = { config, db, log, secretKey, now: () => new Date(), metrics: new Metrics() };
  const features = opts.features ?? allFeatures();
  const app = await buildApp(ctx, features);

  let stopped = false;
  const stopFeatures = async () => {
    if (stopped) return;
    stopped = true;
    for (const f of [...features].reverse()) {
      try {
        await f.stop?.();
      } catch (err) {
        log.error({ err, feature: f.name }, "feature failed to stop");
      }
    }
  };
  // Background work stops and the database closes only after in-flight requests finish.
  app.addHook("onClose", async () => {
    await stopFeatures();
    if (ownsDb) await db.close();
  });

  await app.listen({ port: config.port, host: config.host });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  ctx.listening = [{ host: config.host, port }];

  for (const f of features) {
    if (f.start) await f.start(ctx);
  }

  const displayHost = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  return {
    app,
    ctx,
    port,
    url: `http://${displayHost}:${port}`,
    close: () => app.close(),
  };
}
