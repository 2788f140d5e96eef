/**
 * `netmon mcp`: MCP over stdio for assistants that launch a command. It is a bridge, not a
 * second server: every message goes to the running netmon's `/mcp` with the token, so the
 * stdio and HTTP forms offer the same tools under the same authorization, and the CLI never
 * needs the database (which the server owns on the embedded backend).
 */
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

export interface BridgeOptions {
  url: string;
  token: string;
  stdin?: NodeJS.ReadableStream;
  stdout?: NodeJS.WritableStream;
  onLog?: (line: string) => void;
}

function requestId(m: JSONRPCMessage): string | number | null {
  return "method" in m && "id" in m && m.id !== undefined ? (m.id as string | number) : null;
}

/** Runs until stdin closes. */
export async function runStdioBridge(opts: BridgeOptions): Promise<void> {
  const log = opts.onLog ?? (() => undefined);
  const stdio = new StdioServerTransport(
    opts.stdin as NodeJS.ReadStream | undefined,
    opts.stdout as NodeJS.WriteStream | undefined,
  );
  const http = new StreamableHTTPClientTransport(new URL("/mcp", opts.url), {
    requestInit: { headers: { authorization: `Bearer ${opts.token}` } },
  });
  const closed = new Promise<void>((resolve) => {
    stdio.onclose = () => resolve();
  });
  http.onmessage = (m) => {
    stdio.send(m).catch((err) => log(`could not write to stdout: ${(err as Error).message}`));
  };
  http.onerror = (err) => log(`netmon: ${err.message}`);
  stdio.onmessage = (m) => {
    http.send(m).catch((err: Error) => {
      log(`netmon: ${err.message}`);
      const id = requestId(m);
      // A request must always be answered, or the assistant waits forever.
      if (id !== null) {
        stdio
          .send({
            jsonrpc: "2.0",
            id,
            error: { code: -32000, message: `netmon at ${opts.url}: ${err.message}` },
          })
          .catch(() => undefined);
      }
    });
  };
  await http.start();
  await stdio.start();
  await closed;
  await http.close().catch(() => undefined);
}
