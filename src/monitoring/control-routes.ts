/**
 * Control-plane endpoints on the core (`/api/control/v1`): the job protocol (claim long-poll,
 * start, results, fail), host metrics and whoami — what a `netmon gateway` process calls with
 * its gateway credential besides the v2 lifecycle routes (`/api/v2/gateways`, `/api/v2/agents`). Access `{controlPlane: true}` and the per-credential
 * `control` budget, never the per-IP `api_default` budget. A gateway credential acts only as
 * the gateway named in it; admins may act for any.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Actor } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { ForbiddenError, InvalidRequestError } from "../kernel/errors.ts";
import { recordHostMetrics } from "./host-metrics.ts";
import { claimJobsWait, completeJob, failJob, type JobOwner, startJob } from "./jobs.ts";
import { CONTROL_PREFIX } from "./runtime/links.ts";

const config = { access: { controlPlane: true }, rateLimit: "control" } as const;

type Body = Record<string, unknown>;

function body(req: FastifyRequest): Body {
  const b = req.body;
  if (b === undefined || b === null) return {};
  if (typeof b !== "object" || Array.isArray(b))
    throw new InvalidRequestError("request body must be a JSON object");
  return b as Body;
}

function str(b: Body, key: string, required = true): string | undefined {
  const v = b[key];
  if (v === undefined || v === null) {
    if (required) throw new InvalidRequestError(`${key} is required`, { source: { pointer: `/${key}` } });
    return undefined;
  }
  if (typeof v !== "string" || v.length === 0 || v.length > 255) {
    throw new InvalidRequestError(`${key} must be a non-empty string`, { source: { pointer: `/${key}` } });
  }
  return v;
}

/** The gateway id a credential may act as (`gateway:<name>` → `<name>`); admins: any. */
function gatewayOf(actor: Actor | null, requested: string): string {
  if (!actor) throw new ForbiddenError();
  if (actor.kind === "gateway") {
    const own = actor.id.replace(/^gateway:/, "");
    if (own !== requested) throw new ForbiddenError(`this credential belongs to gateway '${own}'`);
    return own;
  }
  if (actor.kind === "agent")
    throw new ForbiddenError("agent credentials talk to their gateway, not the core");
  return requested;
}

/** The claiming gateway a job call must come from (null: in-process or admin callers). */
function ownerOf(actor: Actor | null): JobOwner {
  if (!actor) throw new ForbiddenError();
  if (actor.kind === "gateway") return { gatewayId: actor.id.replace(/^gateway:/, "") };
  if (actor.kind === "agent")
    throw new ForbiddenError("agent credentials talk to their gateway, not the core");
  return null;
}

export function registerControlRoutes(app: FastifyInstance, ctx: AppContext): void {
  const p = CONTROL_PREFIX;

  /** Who is this credential? Gateways use it to verify their agents' tokens. */
  app.get(`${p}/whoami`, { config }, async (req) => {
    const a = req.actor as Actor;
    return { kind: a.kind, id: a.id, name: a.id.replace(/^(gateway|agent):/, "") };
  });

  app.post(
    `${p}/jobs/claim`,
    { config: { ...config, body: ["gateway_id", "agent_uids", "max", "wait_ms"] } },
    async (req) => {
      const b = body(req);
      const gatewayId = gatewayOf(req.actor, str(b, "gateway_id") as string);
      const agentUids = Array.isArray(b.agent_uids) ? b.agent_uids.map(String).slice(0, 10_000) : [];
      const max = Number.isInteger(b.max) ? (b.max as number) : 1;
      const waitMs = Number.isInteger(b.wait_ms) ? Math.min(30_000, Math.max(0, b.wait_ms as number)) : 0;
      const abort = new AbortController();
      req.raw.once("close", () => abort.abort());
      const jobs = await claimJobsWait(ctx, { gatewayId, agentUids, max, waitMs, signal: abort.signal });
      return { jobs };
    },
  );

  app.post<{ Params: { id: string } }>(
    `${p}/jobs/:id/start`,
    { config: { ...config, body: ["agent_id"] } },
    async (req) => {
      const b = body(req);
      const job = await startJob(ctx, req.params.id, str(b, "agent_id") as string, ownerOf(req.actor));
      return { job: { id: job.id, status: job.status } };
    },
  );

  app.post<{ Params: { id: string } }>(
    `${p}/jobs/:id/results`,
    {
      config: { ...config, body: ["agent_id", "gateway_id", "results", "sweep_hosts"] },
      bodyLimit: 16 * 1024 * 1024,
    },
    async (req) => {
      const b = body(req);
      const gatewayId =
        b.gateway_id === undefined ? null : gatewayOf(req.actor, str(b, "gateway_id") as string);
      const { job, recorded } = await completeJob(ctx, req.params.id, {
        agentId: str(b, "agent_id") as string,
        gatewayId,
        results: b.results,
        sweepHosts: b.sweep_hosts,
        owner: ownerOf(req.actor),
      });
      return { job: { id: job.id, status: job.status }, recorded };
    },
  );

  app.post<{ Params: { id: string } }>(
    `${p}/jobs/:id/fail`,
    { config: { ...config, body: ["message", "code"] } },
    async (req) => {
      const b = body(req);
      const job = await failJob(
        ctx,
        req.params.id,
        {
          message: str(b, "message") as string,
          code: str(b, "code", false) ?? "EXECUTION_ERROR",
        },
        ownerOf(req.actor),
      );
      return { job: { id: job.id, status: job.status } };
    },
  );

  app.post(
    `${p}/host-metrics`,
    { config: { ...config, body: ["agent_id", "gateway_id", "sample"] }, bodyLimit: 4 * 1024 * 1024 },
    async (req, reply) => {
      const b = body(req);
      const gatewayId = gatewayOf(req.actor, str(b, "gateway_id") as string);
      await recordHostMetrics(ctx, { agentId: str(b, "agent_id") as string, gatewayId, sample: b.sample });
      return reply.code(202).send({ accepted: true });
    },
  );
}
