import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import type { AppContext } from "../kernel/context.ts";
import { runWithIo } from "./io.ts";

/**
 * The CLI's local channel to a running server (issue 13, decision 0810). The embedded database
 * belongs to one process, so while `netmon serve` runs, `netmon users create` and friends
 * cannot open it. The server therefore listens on a Unix socket in its data directory
 * (`cli.sock`, mode 0600 in a 0700 directory: only the account that owns the data can connect,
 * the same account that could open the database files directly), and a CLI that finds the
 * database locked sends it its arguments, working directory and environment. The server runs
 * the same command code with its open database and streams stdout, stderr and the exit code
 * back, so every README recipe works as written whether the server is running or not.
 *
 * Protocol: newline-delimited JSON. Request `{argv, cwd, env}`; replies `{o: text}` (stdout),
 * `{e: text}` (stderr), finally `{exit: code}`.
 */
export const CLI_SOCKET_NAME = "cli.sock";

/** Commands that make sense inside the server (never `serve`, `gateway`, `agent`, `mcp`). */
export const FORWARDABLE: ReadonlySet<string> = new Set([
  "migrate",
  "users",
  "tokens",
  "query",
  "devices",
  "notifications",
  "alerts",
  "checks",
  // Trusted publisher keys live in the database; publish/enable/disable talk HTTP anyway.
  "dashboard",
  // A consistent backup from the server's own open database (issue 19). Never restore or
  // db copy: they replace or read a whole database and need the server stopped.
  "backup",
]);
const MAX_REQUEST_BYTES = 1_000_000;
/** Unix socket paths are limited to 107 bytes on Linux. */
const MAX_SOCKET_PATH = 107;

type Run = (argv: readonly string[]) => Promise<number>;

export interface CliChannel {
  path: string;
  close(): Promise<void>;
}

function parseRequest(line: string): { argv: string[]; cwd: string; env: Record<string, string> } | null {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return null;
  }
  if (v === null || typeof v !== "object") return null;
  const o = v as Record<string, unknown>;
  if (!Array.isArray(o.argv) || !o.argv.every((a) => typeof a === "string")) return null;
  if (typeof o.cwd !== "string" || !path.isAbsolute(o.cwd)) return null;
  const env: Record<string, string> = Object.create(null);
  if (o.env && typeof o.env === "object") {
    for (const [k, x] of Object.entries(o.env)) if (typeof x === "string") env[k] = x;
  }
  return { argv: o.argv as string[], cwd: o.cwd, env };
}

/** Listen for forwarded commands (PGlite only: PostgreSQL lets the CLI connect itself). */
export async function startCliChannel(ctx: AppContext, run: Run): Promise<CliChannel | null> {
  const socketPath = path.join(ctx.config.dataDir, CLI_SOCKET_NAME);
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH) {
    ctx.log.warn(
      { path: socketPath },
      "the data directory's path is too long for a Unix socket: CLI commands need the server stopped",
    );
    return null;
  }
  // A socket left by a server that was killed: only one process can hold the database, and it
  // is us, so whatever is there is stale.
  fs.rmSync(socketPath, { force: true });
  const server = net.createServer((conn) => {
    let buf = "";
    let started = false;
    const send = (msg: Record<string, unknown>) => {
      if (!conn.destroyed) conn.write(`${JSON.stringify(msg)}\n`);
    };
    conn.setEncoding("utf8");
    conn.on("error", () => {});
    conn.on("data", (chunk: string) => {
      if (started) return;
      buf += chunk;
      if (buf.length > MAX_REQUEST_BYTES) {
        send({ e: "netmon: request too large\n" });
        send({ exit: 2 });
        conn.end();
        started = true;
        return;
      }
      const nl = buf.indexOf("\n");
      if (nl < 0) return;
      started = true;
      const req = parseRequest(buf.slice(0, nl));
      if (!req) {
        send({ e: "netmon: malformed request on the local channel\n" });
        send({ exit: 2 });
        conn.end();
        return;
      }
      if (!FORWARDABLE.has(req.argv[0] ?? "")) {
        send({ e: `netmon: '${req.argv[0] ?? ""}' cannot run inside the server; stop it first\n` });
        send({ exit: 2 });
        conn.end();
        return;
      }
      ctx.log.info({ command: req.argv[0], sub: req.argv[1] }, "CLI command forwarded to the server");
      void runWithIo(
        {
          out: (t) => send({ o: t }),
          err: (t) => send({ e: t }),
          cwd: req.cwd,
          env: req.env,
          isTTY: false,
          ctx,
        },
        () => run(req.argv),
      ).then(
        (code) => {
          send({ exit: code });
          conn.end();
        },
        (err: unknown) => {
          send({ e: `netmon: ${(err as Error)?.message ?? String(err)}\n` });
          send({ exit: 1 });
          conn.end();
        },
      );
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => {
      server.off("error", reject);
      resolve();
    });
  });
  fs.chmodSync(socketPath, 0o600);
  return {
    path: socketPath,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          fs.rmSync(socketPath, { force: true });
          resolve();
        });
      }),
  };
}

/**
 * Send a command to the server listening on `socketPath` and relay its output. Returns its exit
 * code, or null when no server answers there (the caller then reports the lock).
 */
export function forwardToServer(socketPath: string, argv: readonly string[]): Promise<number | null> {
  if (!fs.existsSync(socketPath)) return Promise.resolve(null);
  return new Promise((resolve) => {
    const conn = net.connect(socketPath);
    let buf = "";
    let code: number | null = null;
    let connected = false;
    conn.setEncoding("utf8");
    conn.on("connect", () => {
      connected = true;
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
      conn.write(`${JSON.stringify({ argv, cwd: process.cwd(), env })}\n`);
    });
    conn.on("data", (chunk: string) => {
      buf += chunk;
      let nl = buf.indexOf("\n");
      while (nl >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        try {
          const msg = JSON.parse(line) as { o?: string; e?: string; exit?: number };
          if (typeof msg.o === "string") process.stdout.write(msg.o);
          if (typeof msg.e === "string") process.stderr.write(msg.e);
          if (typeof msg.exit === "number") code = msg.exit;
        } catch {
          // not ours: ignore
        }
        nl = buf.indexOf("\n");
      }
    });
    conn.on("error", () => resolve(connected ? (code ?? 1) : null));
    conn.on("close", () => {
      if (!connected) return resolve(null);
      if (code === null) process.stderr.write("netmon: the server closed the local channel early\n");
      resolve(code ?? 1);
    });
  });
}
