import { loadConfig } from "../config/config.ts";
import { redactUrl } from "../config/parsers.ts";
import { chooseLogFormat, createLogger } from "../kernel/logger.ts";
import { startServer } from "../server.ts";
import { startCliChannel } from "./cli-channel.ts";
import type { Command } from "./command.ts";
import { takeEarlyDatabase } from "./early-database.ts";

export const serveCommand: Command = {
  name: "serve",
  summary: "Run the netmon server (API, web UI, scheduler, embedded gateway and agent)",
  usage: `netmon serve

Runs the core server. Configuration comes from environment variables (see README).
SIGTERM or SIGINT shuts down gracefully: new connections are refused, in-flight
requests finish (up to NETMON_SHUTDOWN_TIMEOUT), then the database is closed.
A second signal exits at once.`,
  async run(_args, runCommand) {
    const config = loadConfig();
    const log = createLogger(
      config.logLevel,
      undefined,
      chooseLogFormat(config.logFormat, Boolean(process.stdout.isTTY)),
    );
    const early = await takeEarlyDatabase(config);
    const server = await startServer(config, { logger: log, ...(early ? { db: early, ownsDb: true } : {}) });
    // The CLI's local channel: commands run here while this process holds the embedded database.
    const channel = server.ctx.db.kind === "pglite" ? await startCliChannel(server.ctx, runCommand) : null;
    log.info(
      {
        url: server.url,
        database: config.databaseUrl ? redactUrl(config.databaseUrl) : `pglite:${config.dataDir}/pg`,
      },
      `netmon listening on ${server.url}`,
    );

    await new Promise<void>((resolve) => {
      let closing = false;
      const onSignal = (signal: NodeJS.Signals) => {
        if (closing) {
          log.warn({ signal }, "second signal: exiting now");
          process.exit(130);
        }
        closing = true;
        log.info({ signal }, "shutting down: finishing in-flight requests");
        const force = setTimeout(() => {
          log.error("graceful shutdown timed out: exiting");
          process.exit(1);
        }, config.shutdownTimeoutSeconds * 1000);
        force.unref();
        Promise.resolve(channel?.close())
          .then(() => server.close())
          .then(
            () => {
              log.info("shutdown complete");
              resolve();
            },
            (err) => {
              log.error({ err }, "shutdown failed");
              process.exit(1);
            },
          );
      };
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    });
    return 0;
  },
};
