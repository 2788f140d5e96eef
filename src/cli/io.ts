import { AsyncLocalStorage } from "node:async_hooks";
import path from "node:path";
import type { AppContext } from "../kernel/context.ts";

/**
 * Where a CLI command writes and what it runs against. A command started in a terminal writes
 * to this process's stdout/stderr and opens the database itself; the same command forwarded to
 * a running server over its local channel (cli-channel.ts) runs inside the server with the
 * server's open database, and its output streams back to the caller's terminal. Commands use
 * these helpers instead of process.stdout/env/cwd so one code path serves both.
 */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** The caller's working directory (relative paths in arguments are the caller's). */
  cwd: string;
  /** The caller's environment (for `--secret-env VAR` style arguments). */
  env: Readonly<Record<string, string | undefined>>;
  /** Whether the caller's stderr is a terminal (progress bars redraw in place). */
  isTTY: boolean;
  /** Set when running inside the server: the server's context, used instead of opening the database. */
  ctx?: AppContext;
}

const store = new AsyncLocalStorage<CliIo>();

const processIo: CliIo = {
  out: (t) => void process.stdout.write(t),
  err: (t) => void process.stderr.write(t),
  get cwd() {
    return process.cwd();
  },
  env: process.env,
  get isTTY() {
    return process.stderr.isTTY === true;
  },
};

export const cliIo = (): CliIo => store.getStore() ?? processIo;
export const stdout = (text: string): void => cliIo().out(text);
export const stderr = (text: string): void => cliIo().err(text);
/** A path argument as the caller meant it (relative to the caller's working directory). */
export const cliPath = (p: string): string => path.resolve(cliIo().cwd, p);
/** A stream-like view of the caller's stderr (for progress bars). */
export const stderrStream = (): { write(text: string): unknown; isTTY: boolean } => {
  const io = cliIo();
  return { write: (t: string) => io.err(t), isTTY: io.isTTY };
};

export function runWithIo<T>(io: CliIo, fn: () => Promise<T>): Promise<T> {
  return store.run(io, fn);
}
