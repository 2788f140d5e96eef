import { ConfigError } from "../config/config.ts";
import { isAppError } from "../kernel/errors.ts";
import { VERSION } from "../kernel/version.ts";
import { DatabaseLockedError } from "../storage/db.ts";
import { parseArgs, UsageError } from "./args.ts";
import { COMMANDS } from "./commands.ts";
import { stderr, stdout } from "./io.ts";

function help(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  const lines = COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return `netmon ${VERSION} — network and infrastructure monitoring

Usage: netmon <command> [options]

Commands:
${lines.join("\n")}

Options:
  --help, -h     Show help (also: netmon <command> --help)
  --version, -v  Print the version

Configuration is read from environment variables; see README.md.
`;
}

/** One readable line for any thrown value (never "[object Object]"). */
export function describeError(err: unknown): string {
  if (err instanceof Error && err.message) return err.message;
  if (err && typeof err === "object") {
    const o = err as { message?: unknown; code?: unknown; name?: unknown };
    if (typeof o.message === "string" && o.message) return o.message;
    if (typeof o.code === "string") return `${String(o.name ?? "error")} ${o.code}`;
    try {
      return JSON.stringify(err);
    } catch {
      return Object.prototype.toString.call(err);
    }
  }
  return String(err);
}

/**
 * Run one CLI command with the current IO (cli/io.ts): in a terminal, or inside the server for
 * a forwarded command. DatabaseLockedError is rethrown so the terminal side can forward.
 */
export async function runCommand(argv: readonly string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === "--help" || first === "-h" || first === "help") {
    stdout(help());
    return 0;
  }
  if (first === "--version" || first === "-v") {
    stdout(`${VERSION}\n`);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === first);
  if (!command) {
    stderr(`netmon: unknown command '${first}'. Run 'netmon --help' for the list.\n`);
    return 2;
  }
  try {
    const args = parseArgs(rest, command.booleanFlags);
    if (args.flags.has("help")) {
      stdout(`${command.usage}\n`);
      return 0;
    }
    return await command.run(args, runCommand);
  } catch (err) {
    if (err instanceof DatabaseLockedError) throw err;
    if (err instanceof UsageError) {
      stderr(`netmon ${command.name}: ${err.message}\n`);
      return 2;
    }
    if (err instanceof ConfigError) {
      stderr(`netmon: ${err.message}\n`);
      return 1;
    }
    // A domain refusal (not found, invalid transition, validation): one line, exit code 1.
    if (isAppError(err)) {
      stderr(`error: ${err.message}\n`);
      return 1;
    }
    stderr(`netmon ${command.name}: ${describeError(err)}\n`);
    return 1;
  }
}
