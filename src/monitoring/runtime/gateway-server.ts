/**
 * The HTTP face a separate `netmon gateway` shows its agents (`/gateway/v1/...`). Agents
 * authenticate with their agent credential (issued by the core); the gateway asks the core
 * who a credential belongs to (`/api/control/v1/whoami`) and caches the answer briefly.
 * Plain node:http: a handful of JSON endpoints, no per-IP budget (one gateway fronts many agents).
 */

import http from "node:http";
import type { AddressInfo } from "node:net";
import { isAppError } from "../../kernel/errors.ts";
import type { Logger } from "../../kernel/logger.ts";
import type { GatewayLink } from "./agent.ts";
import type { Gateway } from "./gateway.ts";
import { CONTROL_PREFIX, callJson, HttpError } from "./links.ts";

export const GATEWAY_PREFIX = "/gateway/v1";
const WHOAMI_TTL_MS = 60_000;

export interface GatewayServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startGatewayServer(opts: {
  gateway: Gateway;
  coreUrl: string;
  host: string;
  port: number;
  log: Logger;
}): Promise<GatewayServer> {
  const cache = new Map<string, { uid: string; until: number }>();
  async function agentOf(req: http.IncomingMessage): Promise<string> {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? "");
    if (!m) throw new HttpError(401, "agent credential required");
    const token = m[1] as string;
    const hit = cache.get(token);
    if (hit && hit.until > Date.now()) return hit.uid;
    let who: { kind: string; name: string };
    try {
      who = await callJson<{ kind: string; name: string }>(
        opts.coreUrl,
        token,
        "GET",
        `${CONTROL_PREFIX}/whoami`,
      );
    } catch (err) {
      if (err instanceof HttpError && (err.status === 401 || err.status === 403))
        throw new HttpError(401, "invalid agent credential");
      throw new HttpError(503, "core unavailable");
    }
    if (who.kind !== "agent") throw new HttpError(403, "an agent credential is required");
    cache.set(token, { uid: who.name, until: Date.now() + WHOAMI_TTL_MS });
    return who.name;
  }

  const g = opts.gateway;
  const server = http.createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      if (res.headersSent) return;
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    };
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (d: Buffer) => {
      size += d.length;
      if (size <= 16 * 1024 * 1024) chunks.push(d);
    });
    req.on("end", async () => {
      try {
        if (req.method === "GET" && req.url === "/health")
          return send(200, { status: g.isDraining() ? "draining" : "ok", gateway: g.id });
        if (req.method !== "POST") throw new HttpError(405, "method not allowed");
        const uid = await agentOf(req);
        const text = Buffer.concat(chunks).toString("utf8");
        const b = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
        const path = (req.url ?? "").split("?")[0] as string;
        const abort = new AbortController();
        res.once("close", () => abort.abort());
        const job = /^\/gateway\/v1\/jobs\/([^/]+)\/(results|fail)$/.exec(path);
        switch (true) {
          case path === `${GATEWAY_PREFIX}/agents/register`:
            return send(
              200,
              await g.agentRegister({
                uid,
                name: b.name as string,
                capabilities: b.capabilities as string[],
                host: b.host as string,
                version: b.version as string,
              }),
            );
          case path === `${GATEWAY_PREFIX}/agents/heartbeat`:
            await g.agentHeartbeat(uid, { is_healthy: b.is_healthy as boolean });
            return send(200, { ok: true });
          case path === `${GATEWAY_PREFIX}/agents/health`:
            await g.agentHealth(uid, b.healthy === true);
            return send(200, { ok: true });
          case path === `${GATEWAY_PREFIX}/agents/disconnect`:
            await g.agentDisconnect(uid);
            return send(200, { ok: true });
          case path === `${GATEWAY_PREFIX}/jobs/claim`: {
            const jobs = await g.agentClaim(uid, Number(b.max) || 1, Number(b.wait_ms) || 0, abort.signal);
            return send(200, { jobs });
          }
          case path === `${GATEWAY_PREFIX}/host-metrics`:
            await g.agentHostMetrics(uid, b.sample as never);
            return send(202, { accepted: true });
          case job !== null && job[2] === "results":
            await g.agentSubmit(
              uid,
              decodeURIComponent(job[1] as string),
              b.results as never,
              b.sweep_hosts as never,
            );
            return send(200, { ok: true });
          case job !== null && job[2] === "fail":
            await g.agentFail(
              uid,
              decodeURIComponent(job[1] as string),
              String(b.message ?? "agent failed the job"),
            );
            return send(200, { ok: true });
          default:
            throw new HttpError(404, "not found");
        }
      } catch (err) {
        const status =
          err instanceof HttpError
            ? err.status
            : err instanceof SyntaxError
              ? 400
              : isAppError(err) && err.status < 500
                ? err.status
                : 502;
        if (status >= 500)
          opts.log.warn({ err: (err as Error).message, url: req.url }, "gateway request failed");
        send(status, {
          error: status === 502 ? "upstream_error" : "request_failed",
          message: (err as Error).message,
        });
      }
    });
  });
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const shown = opts.host === "0.0.0.0" || opts.host === "::" ? "127.0.0.1" : opts.host;
  return {
    port,
    url: `http://${shown}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A separate agent process: its gateway over HTTP. */
export function httpGatewayLink(gatewayUrl: string, token: string): GatewayLink {
  const call = <T>(path: string, body: unknown, opts?: { timeoutMs?: number; signal?: AbortSignal }) =>
    callJson<T>(gatewayUrl, token, "POST", `${GATEWAY_PREFIX}${path}`, body, opts);
  return {
    register: (hello) => call("/agents/register", hello),
    heartbeat: async (_uid, input) => {
      await call("/agents/heartbeat", input);
    },
    health: async (_uid, healthy) => {
      await call("/agents/health", { healthy });
    },
    disconnect: async () => {
      await call("/agents/disconnect", {}, { timeoutMs: 5000 });
    },
    claim: async (_uid, max, waitMs, signal) =>
      (
        await call<{ jobs: never[] }>(
          "/jobs/claim",
          { max, wait_ms: waitMs },
          { timeoutMs: waitMs + 20_000, signal },
        )
      ).jobs,
    submit: async (_uid, jobId, results, sweepHosts) => {
      await call(
        `/jobs/${encodeURIComponent(jobId)}/results`,
        { results, sweep_hosts: sweepHosts },
        { timeoutMs: 120_000 },
      );
    },
    fail: async (_uid, jobId, message) => {
      await call(`/jobs/${encodeURIComponent(jobId)}/fail`, { message });
    },
    hostMetrics: async (_uid, sample) => {
      await call("/host-metrics", { sample });
    },
  };
}
