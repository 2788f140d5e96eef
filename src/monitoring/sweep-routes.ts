/**
 * Network sweep configuration (plain REST; the v2 spec has no sweep resource):
 * `GET /api/monitoring/sweeps` (infrastructure.view), `POST` (settings.networks.manage),
 * `DELETE /api/monitoring/sweeps/:id` (settings.networks.manage). `group` (id or name) puts the
 * hosts a sweep discovers into that device group when they are in none yet.
 */
import type { FastifyInstance } from "fastify";
import { findGroup } from "../inventory/groups.ts";
import type { AppContext } from "../kernel/context.ts";
import { ConflictError, NotFoundError, ValidationError } from "../kernel/errors.ts";
import { isUuid } from "../kernel/ids.ts";
import { sql } from "../storage/sql.ts";
import { expandCidrs } from "./sweep.ts";

const view = { access: { permission: "infrastructure.view" }, rateLimit: "api_default" } as const;
const manage = { access: { permission: "settings.networks.manage" }, rateLimit: "api_default" } as const;

function bad(field: string, message: string): never {
  throw new ValidationError(message, { source: { pointer: `/${field}` }, extra: { field } });
}

export function validateSweep(b: Record<string, unknown>) {
  const name =
    typeof b.name === "string" && b.name.trim()
      ? b.name.trim().slice(0, 200)
      : bad("name", "name is required");
  if (!Array.isArray(b.cidrs) || b.cidrs.length === 0 || !b.cidrs.every((c) => typeof c === "string"))
    bad("cidrs", "cidrs must be a non-empty list of IPv4 CIDRs");
  const cidrs = b.cidrs as string[];
  try {
    expandCidrs(cidrs);
  } catch (err) {
    bad("cidrs", (err as Error).message);
  }
  const ports = b.ports === undefined ? [] : b.ports;
  if (
    !Array.isArray(ports) ||
    ports.length > 64 ||
    !ports.every((p) => Number.isInteger(p) && p > 0 && p < 65536)
  )
    bad("ports", "ports must be at most 64 TCP ports");
  const int = (k: string, def: number, lo: number, hi: number) => {
    const v = b[k] === undefined ? def : b[k];
    if (!Number.isInteger(v) || (v as number) < lo || (v as number) > hi)
      bad(k, `${k} must be an integer from ${lo} to ${hi}`);
    return v as number;
  };
  return {
    name,
    cidrs,
    ports: ports as number[],
    interval_seconds: int("interval_seconds", 3600, 10, 7 * 86400),
    rate_per_second: int("rate_per_second", 500, 1, 100_000),
    partition: typeof b.partition === "string" && b.partition ? b.partition : "default",
    agent_uid: typeof b.agent_uid === "string" && b.agent_uid ? b.agent_uid : null,
    enabled: b.enabled !== false,
  };
}

export function registerSweepRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get("/api/monitoring/sweeps", { config: view }, async () => ({
    sweeps: await ctx.db.many(sql`SELECT * FROM network_sweeps ORDER BY name`),
  }));
  app.post(
    "/api/monitoring/sweeps",
    {
      config: {
        ...manage,
        body: [
          "name",
          "cidrs",
          "ports",
          "interval_seconds",
          "rate_per_second",
          "partition",
          "agent_uid",
          "enabled",
          "group",
        ],
      },
    },
    async (req, reply) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const v = validateSweep(body);
      // Discovered hosts join this group (by id or name), so its monitoring profiles apply.
      let groupId: string | null = null;
      if (body.group !== undefined && body.group !== null) {
        if (typeof body.group !== "string" || body.group === "")
          bad("group", "group must be a device group's id or name");
        try {
          groupId = (await findGroup(ctx.db, body.group as string)).id;
        } catch (err) {
          bad("group", (err as Error).message);
        }
      }
      const exists = await ctx.db.one(sql`SELECT 1 FROM network_sweeps WHERE name = ${v.name}`);
      if (exists) throw new ConflictError(`a sweep named '${v.name}' exists`);
      const row = await ctx.db.one(sql`
      INSERT INTO network_sweeps (name, cidrs, ports, interval_seconds, rate_per_second, "partition", agent_uid, enabled, next_run_at, group_id)
      VALUES (${v.name}, ${v.cidrs}::text[], ${v.ports}::int[], ${v.interval_seconds}, ${v.rate_per_second}, ${v.partition},
              ${v.agent_uid}, ${v.enabled}, ${ctx.now()}, ${groupId}::uuid)
      RETURNING *`);
      return reply.code(201).send({ sweep: row });
    },
  );
  app.delete<{ Params: { id: string } }>(
    "/api/monitoring/sweeps/:id",
    { config: manage },
    async (req, reply) => {
      if (!isUuid(req.params.id)) throw new NotFoundError("sweep not found");
      const r = await ctx.db.query(sql`DELETE FROM network_sweeps WHERE id = ${req.params.id}`);
      if (r.rowCount === 0) throw new NotFoundError("sweep not found");
      return reply.code(204).send();
    },
  );
}
