import path from "node:path";
import { ConfigError, loadConfig } from "../config/config.ts";
import { DatabaseLockedError } from "../storage/db.ts";
import { CLI_SOCKET_NAME, FORWARDABLE, forwardToServer } from "./cli-channel.ts";
import { openServeDatabaseEarly } from "./early-database.ts";

export async function main(argv: readonly string[]): Promise<number> {
  // Everything netmon writes (embedded database, secret key) is for its own user only,
  // whatever umask it was started with; worker threads share this process umask.
  process.umask(0o077);
  // Before the commands' modules load: the embedded database boots on its own thread meanwhile.
  openServeDatabaseEarly(argv);
  const { describeError, runCommand } = await import("./run.ts");
  try {
    return await runCommand(argv);
  } catch (err) {
    if (!(err instanceof DatabaseLockedError)) {
      process.stderr.write(`netmon: ${describeError(err)}\n`);
      return 1;
    }
    if (!FORWARDABLE.has(argv[0] ?? "")) {
      process.stderr.write(`netmon: ${err.message}\n`);
      return 1;
    }
    // The embedded database is held by a running server: run the command there instead, over
    // the local channel it listens on in the data directory (decision 0810).
    let socket: string;
    try {
      socket = path.join(loadConfig().dataDir, CLI_SOCKET_NAME);
    } catch (cfgErr) {
      process.stderr.write(
        `netmon: ${cfgErr instanceof ConfigError ? cfgErr.message : describeError(cfgErr)}\n`,
      );
      return 1;
    }
    const forwarded = await forwardToServer(socket, argv);
    if (forwarded !== null) return forwarded;
    process.stderr.write(`netmon: ${err.message}\n`);
    return 1;
  }
}
