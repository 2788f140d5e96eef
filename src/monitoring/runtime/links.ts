/**
 * How the three processes talk. The same Gateway and Agent code runs against either an
 * in-process link (embedded mode: direct function calls into fleet.ts and jobs.ts) or an HTTP
 * link (separate processes, gateway/agent bearer credentials):
 * - lifecycle (register, connect, heartbeat, degrade, drain, disconnect) through the JSON:API
 *   routes `/api/v2/gateways` and `/api/v2/agents`, whose handlers call the same fleet.ts code;
 * - the job protocol (claim long-poll, start, results, fail) and host metrics through the
 *   control-plane endpoints under `/api/control/v1`.
 * Both draw from the per-credential `control` budget, never the per-IP user budget.
 */
import type { AppContext } from "../../kernel/context.ts";
import {
  AGENT_OPERATIONS,
  agentOperation,
  GATEWAY_OPERATIONS,
  gatewayOperation,
  registerAgent,
  registerGateway,
} from "../fleet.ts";
import type { HostMetricsSample } from "../host-metrics.ts";
import { recordHostMetrics } from "../host-metrics.ts";
import {
  claimJobsWait,
  completeJob,
  failJob,
  type JobPayload,
  type SubmittedResult,
  startJob,
} from "../jobs.ts";
import type { SweepHost } from "../sweep.ts";

export type GatewayOp = "heartbeat" | "start_draining" | "finish_draining";
/** Agent lifecycle calls; a heartbeat with `is_healthy: true` also ends `degraded`. */
export type AgentOp = "establish_connection" | "heartbeat" | "degrade" | "lose_connection";

/** What a gateway needs from the core. */
export interface CoreLink {
  registerGateway(
    id: string,
    attrs: { component_id?: string; metadata?: Record<string, unknown> },
  ): Promise<void>;
  gatewayOp(
    id: string,
    op: GatewayOp,
    input?: { agent_count?: number; checker_count?: number; is_healthy?: boolean },
  ): Promise<void>;
  registerAgent(
    uid: string,
    attrs: { name?: string; gateway_id: string; capabilities?: string[]; host?: string; version?: string },
  ): Promise<void>;
  agentOp(uid: string, op: AgentOp, input?: { gateway_id?: string; is_healthy?: boolean }): Promise<void>;
  claim(
    req: { gatewayId: string; agentUids: string[]; max: number; waitMs: number },
    signal?: AbortSignal,
  ): Promise<JobPayload[]>;
  start(jobId: string, agentId: string): Promise<void>;
  complete(
    jobId: string,
    body: { agentId: string; gatewayId: string; results: SubmittedResult[]; sweepHosts?: SweepHost[] },
  ): Promise<void>;
  fail(jobId: string, error: { message: string; code: string }): Promise<void>;
  hostMetrics(body: { agentId: string; gatewayId: string; sample: HostMetricsSample }): Promise<void>;
}

/** Embedded mode: the core's functions, no HTTP. */
export function inProcessCoreLink(ctx: AppContext): CoreLink {
  return {
    registerGateway: async (id, attrs) => {
      await registerGateway(ctx, id, attrs);
    },
    gatewayOp: async (id, op, input) => {
      await gatewayOperation(ctx, id, op, input);
    },
    registerAgent: async (uid, attrs) => {
      await registerAgent(ctx, uid, attrs);
    },
    agentOp: async (uid, op, input) => {
      await agentOperation(ctx, uid, op, input);
    },
    claim: (req, signal) => claimJobsWait(ctx, { ...req, signal }),
    start: async (jobId, agentId) => {
      await startJob(ctx, jobId, agentId);
    },
    complete: async (jobId, body) => {
      await completeJob(ctx, jobId, body);
    },
    fail: async (jobId, error) => {
      await failJob(ctx, jobId, error);
    },
    hostMetrics: async (body) => {
      await recordHostMetrics(ctx, body);
    },
  };
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** JSON over HTTP with a bearer credential; throws HttpError on non-2xx. */
export async function callJson<T>(
  base: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<T> {
  const signals = [AbortSignal.timeout(opts.timeoutMs ?? 15_000)];
  if (opts.signal) signals.push(opts.signal);
  const res = await fetch(new URL(path, base), {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      accept: "application/json",
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.any(signals),
  });
  const text = await res.text();
  if (!res.ok) {
    let msg = text;
    try {
      const j = JSON.parse(text) as { message?: string; error?: string };
      msg = j.message ?? j.error ?? text;
    } catch {}
    throw new HttpError(res.status, `${method} ${path} → ${res.status}: ${msg}`);
  }
  return (text ? JSON.parse(text) : {}) as T;
}

export const CONTROL_PREFIX = "/api/control/v1";
export const JSONAPI_PREFIX = "/api/v2";
const JSONAPI = "application/vnd.api+json";

/** A JSON:API request with a bearer credential; errors documents become HttpError. */
export async function callJsonApi(
  base: string,
  token: string,
  method: "POST" | "PATCH",
  path: string,
  data: { type: string; id?: string; attributes: Record<string, unknown> },
  opts: { timeoutMs?: number } = {},
): Promise<{ status: number; body: { data?: Record<string, unknown> } }> {
  const res = await fetch(new URL(`${JSONAPI_PREFIX}${path}`, base), {
    method,
    headers: { authorization: `Bearer ${token}`, accept: JSONAPI, "content-type": JSONAPI },
    body: JSON.stringify({ data }),
    signal: AbortSignal.timeout(opts.timeoutMs ?? 15_000),
  });
  const text = await res.text();
  if (!res.ok) {
    let msg = text;
    try {
      const j = JSON.parse(text) as { errors?: { code?: string; detail?: string; title?: string }[] };
      const e = j.errors?.[0];
      if (e) msg = `${e.code ?? ""} ${e.detail ?? e.title ?? ""}`.trim();
    } catch {}
    throw new HttpError(res.status, `${method} ${JSONAPI_PREFIX}${path} → ${res.status}: ${msg}`);
  }
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}

/** Which v2 operation route performs each lifecycle call. */
/** Drop undefined members (JSON:API attributes are validated strictly). */
function defined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

/** Separate gateway process: v2 lifecycle routes and the core's control-plane job endpoints. */
export function httpCoreLink(coreUrl: string, token: string): CoreLink {
  const call = <T>(
    method: string,
    path: string,
    body?: unknown,
    opts?: { timeoutMs?: number; signal?: AbortSignal },
  ) => callJson<T>(coreUrl, token, method, `${CONTROL_PREFIX}${path}`, body, opts);
  const v2 = (
    method: "POST" | "PATCH",
    path: string,
    data: { type: string; id?: string; attributes: Record<string, unknown> },
  ) => callJsonApi(coreUrl, token, method, path, { ...data, attributes: defined(data.attributes) });
  /** A first registration can race another replica's: the retry takes the re-registration path. */
  const register = async (
    path: string,
    data: { type: string; id?: string; attributes: Record<string, unknown> },
  ) => {
    try {
      await v2("POST", path, data);
    } catch (err) {
      if (!(err instanceof HttpError) || err.status !== 409) throw err;
      await v2("POST", path, data);
    }
  };
  const enc = encodeURIComponent;
  return {
    registerGateway: async (id, attrs) => {
      await register("/gateways", {
        type: "gateway",
        id,
        attributes: {
          component_id: attrs.component_id,
          registration_source: "auto",
          metadata: attrs.metadata,
        },
      });
    },
    gatewayOp: async (id, op, input) => {
      await v2("PATCH", `/gateways/${enc(id)}/${GATEWAY_OPERATIONS[op]}`, {
        type: "gateway",
        id,
        attributes: { ...(input ?? {}) },
      });
    },
    registerAgent: async (uid, attrs) => {
      await register("/agents", {
        type: "agent",
        attributes: {
          uid,
          name: attrs.name,
          gateway_id: attrs.gateway_id,
          capabilities: attrs.capabilities,
          host: attrs.host,
          version: attrs.version,
          type_id: 4,
          type: "netmon-agent",
          vendor_name: "netmon",
        },
      });
    },
    agentOp: async (uid, op, input) => {
      await v2("PATCH", `/agents/${enc(uid)}/${AGENT_OPERATIONS[op]}`, {
        type: "agent",
        id: uid,
        attributes: { ...(input ?? {}) },
      });
    },
    claim: async (req, signal) => {
      const r = await call<{ jobs: JobPayload[] }>(
        "POST",
        "/jobs/claim",
        { gateway_id: req.gatewayId, agent_uids: req.agentUids, max: req.max, wait_ms: req.waitMs },
        { timeoutMs: req.waitMs + 15_000, signal },
      );
      return r.jobs;
    },
    start: async (jobId, agentId) => {
      await call("POST", `/jobs/${enc(jobId)}/start`, { agent_id: agentId });
    },
    complete: async (jobId, body) => {
      await call(
        "POST",
        `/jobs/${enc(jobId)}/results`,
        {
          agent_id: body.agentId,
          gateway_id: body.gatewayId,
          results: body.results,
          sweep_hosts: body.sweepHosts,
        },
        { timeoutMs: 60_000 },
      );
    },
    fail: async (jobId, error) => {
      await call("POST", `/jobs/${enc(jobId)}/fail`, error);
    },
    hostMetrics: async (body) => {
      await call("POST", "/host-metrics", {
        agent_id: body.agentId,
        gateway_id: body.gatewayId,
        sample: body.sample,
      });
    },
  };
}
