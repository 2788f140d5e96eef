/**
 * `netmon gateway` and `netmon agent`: the separate-process forms of the embedded gateway and
 * agent (same classes, HTTP links instead of function calls).
 */
import { flag, type ParsedArgs, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { loadConfig, readVariable } from "../config/config.ts";
import { chooseLogFormat, createLogger, type Logger } from "../kernel/logger.ts";
import { Agent } from "./runtime/agent.ts";
import { Gateway } from "./runtime/gateway.ts";
import { httpGatewayLink, startGatewayServer } from "./runtime/gateway-server.ts";
import { CONTROL_PREFIX, callJson, httpCoreLink } from "./runtime/links.ts";
import { TargetPolicy } from "./target-policy.ts";

type LinkVariable = "NETMON_CORE_URL" | "NETMON_GATEWAY_TOKEN" | "NETMON_GATEWAY_URL" | "NETMON_AGENT_TOKEN";

function need(args: ParsedArgs, name: string, env?: LinkVariable): string {
  const v = flag(args, name) ?? (env ? readVariable(env) : undefined);
  if (!v || v === "true") throw new UsageError(`--${name} is required${env ? ` (or ${env})` : ""}`);
  return v;
}

function waitForSignal(log: Logger, stop: () => Promise<void>, timeoutSeconds: number): Promise<void> {
  return new Promise<void>((resolve) => {
    let closing = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (closing) process.exit(130);
      closing = true;
      log.info({ signal }, "shutting down");
      const force = setTimeout(() => process.exit(1), timeoutSeconds * 1000);
      force.unref();
      stop().then(resolve, (err) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      });
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
}

/** After a clean shutdown, idle keep-alive sockets must not hold the process open. */
function exitSoon(): void {
  setTimeout(() => process.exit(process.exitCode ?? 0), 200).unref();
}

async function retrying<T>(log: Logger, what: string, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= 30) throw err;
      log.warn({ err: (err as Error).message }, `${what} failed; retrying`);
      await new Promise((r) => setTimeout(r, Math.min(5000, 200 * 2 ** attempt)));
    }
  }
}

export const gatewayCommand: Command = {
  name: "gateway",
  summary: "Run a gateway: claims poll jobs from the core for its agents",
  usage: `netmon gateway --core URL --token TOKEN [--listen HOST:PORT] [--heartbeat-seconds S]

Registers with the core (its id is the name of its gateway credential, issued with
'netmon tokens create --control-plane gateway --name NAME'), heartbeats, and serves its agents
on --listen (default 0.0.0.0:4100). SIGTERM drains: drain/start, stop handing out jobs,
drain/finish (the gateway goes offline).
Environment: NETMON_CORE_URL, NETMON_GATEWAY_TOKEN instead of the flags.`,
  async run(args) {
    const coreUrl = need(args, "core", "NETMON_CORE_URL");
    const token = need(args, "token", "NETMON_GATEWAY_TOKEN");
    const listen = flag(args, "listen") ?? "0.0.0.0:4100";
    const m = /^(.*):(\d+)$/.exec(listen);
    if (!m) throw new UsageError("--listen must be HOST:PORT");
    const config = loadConfig();
    const log = createLogger(
      config.logLevel,
      undefined,
      chooseLogFormat(config.logFormat, Boolean(process.stdout.isTTY)),
    );
    const who = await retrying(log, "contacting the core", () =>
      callJson<{ kind: string; name: string }>(coreUrl, token, "GET", `${CONTROL_PREFIX}/whoami`),
    );
    if (who.kind !== "gateway") throw new UsageError("--token must be a gateway control-plane credential");
    const heartbeatSeconds = Number(flag(args, "heartbeat-seconds") ?? 10);
    const gateway = new Gateway({
      id: who.name,
      core: httpCoreLink(coreUrl, token),
      log,
      heartbeatMs: heartbeatSeconds * 1000,
    });
    await retrying(log, "registering", () => gateway.start());
    const server = await startGatewayServer({
      gateway,
      coreUrl,
      host: m[1] as string,
      port: Number(m[2]),
      log,
    });
    log.info({ url: server.url, gateway: gateway.id }, `gateway listening on ${server.url}`);
    // Tests and scripts read this line to learn the port.
    process.stdout.write(`NETMON_GATEWAY_URL=${server.url}\n`);
    await waitForSignal(
      log,
      async () => {
        await gateway.stop();
        await server.close();
      },
      config.shutdownTimeoutSeconds,
    );
    exitSoon();
    return 0;
  },
};

export const agentCommand: Command = {
  name: "agent",
  summary: "Run an agent: executes checks for its gateway",
  usage: `netmon agent --gateway URL --token TOKEN [--concurrency N] [--heartbeat-seconds S]

Connects to its gateway with an agent credential ('netmon tokens create --control-plane agent
--name NAME'; the name is the agent uid), then runs the poll jobs it is given, heartbeats and
reports host metrics. SIGTERM finishes in-flight jobs and disconnects.
Environment: NETMON_GATEWAY_URL, NETMON_AGENT_TOKEN instead of the flags; the check policy
variables (NETMON_CHECK_ALLOW_LINK_LOCAL, NETMON_CUSTOM_CHECK_ALLOWLIST) apply here.`,
  async run(args) {
    const gatewayUrl = need(args, "gateway", "NETMON_GATEWAY_URL");
    const token = need(args, "token", "NETMON_AGENT_TOKEN");
    const concurrency = Number(flag(args, "concurrency") ?? 256);
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new UsageError("--concurrency must be a positive integer");
    const config = loadConfig();
    const log = createLogger(
      config.logLevel,
      undefined,
      chooseLogFormat(config.logFormat, Boolean(process.stdout.isTTY)),
    );
    const link = httpGatewayLink(gatewayUrl, token);
    const heartbeatSeconds = Number(flag(args, "heartbeat-seconds") ?? 10);
    const agent = new Agent({
      uid: "self", // replaced by the credential's name when the gateway registers us
      gateway: link,
      log,
      policy: new TargetPolicy({
        allowLinkLocal: config.monitoring.allowLinkLocal,
        allowCore: config.monitoring.allowCore,
      }),
      customAllowList: config.monitoring.customAllowList,
      maxConcurrentChecks: concurrency,
      heartbeatMs: heartbeatSeconds * 1000,
    });
    await retrying(log, "registering with the gateway", () => agent.start());
    log.info({ agent: agent.uid }, "agent running");
    process.stdout.write(`NETMON_AGENT_UID=${agent.uid}\n`);
    // Finish in-flight jobs for most of the shutdown budget, keeping time to hand back the rest.
    const graceMs = Math.max(1000, config.shutdownTimeoutSeconds * 1000 - 3000);
    await waitForSignal(log, () => agent.stop(graceMs), config.shutdownTimeoutSeconds);
    exitSoon();
    return 0;
  },
};
