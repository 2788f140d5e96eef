import { flag, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { loadConfig } from "../config/config.ts";
import { runStdioBridge } from "./stdio.ts";

export const mcpCommand: Command = {
  name: "mcp",
  summary: "Speak MCP on stdin/stdout for a local assistant (bridges to the server's /mcp)",
  usage: `netmon mcp [--url URL]

Runs the Model Context Protocol over stdio, for assistants that launch a command. Every
message is forwarded to the running server's /mcp endpoint, so the tools and permissions are
the same as over HTTP. The bearer token comes from NETMON_MCP_TOKEN (a token with the 'mcp'
scope: 'netmon tokens create --user you@example.com --scope mcp'); it is never taken from the
command line, where other users could read it. --url defaults to NETMON_BASE_URL.`,
  async run(args) {
    const config = loadConfig();
    const token = config.mcpToken;
    if (!token) throw new UsageError("NETMON_MCP_TOKEN must hold a bearer token with the 'mcp' scope");
    const url = flag(args, "url") ?? config.baseUrl;
    try {
      new URL(url);
    } catch {
      throw new UsageError(`--url is not a URL: ${url}`);
    }
    await runStdioBridge({ url, token, onLog: (line) => process.stderr.write(`${line}\n`) });
    return 0;
  },
};
