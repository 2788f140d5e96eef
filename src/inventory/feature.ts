import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Actor } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { AuthenticationRequiredError, InvalidRequestError } from "../kernel/errors.ts";
import type { Feature } from "../kernel/feature.ts";
import { startCleanupLoop } from "./cleanup.ts";
import { deviceJson } from "./device.ts";
import { getDevice, listDevices, parseListParams, softDeleteDevice } from "./devices.ts";
import { resolveBatch, resolveOne } from "./identity.ts";
import { ingestSightings } from "./ingest.ts";
import { exportOcsf, parseExportParams } from "./ocsf.ts";
import { cleanupSettingsSingletonRoute } from "./resources/singleton.ts";
import { readSnapshot, uploadSnapshot } from "./source-inventory.ts";

function actorOf(request: FastifyRequest): Actor {
  if (!request.actor) throw new AuthenticationRequiredError();
  return request.actor;
}

type Q = Record<string, unknown>;

/** Plain `/api` inventory routes (devices, identity, ingestion, OCSF export, source inventory). */
export function inventoryRoutes(app: FastifyInstance, ctx: AppContext): void {
  const policy = (permission: string) => ({ access: { permission }, rateLimit: "api_default" as const });

  app.post(
    "/api/v1/device-updates",
    { config: { ...policy("devices.ingest"), body: ["updates"] } },
    async (request) => {
      const body = request.body as Q | undefined;
      if (!body || typeof body !== "object" || !("updates" in body)) {
        throw new InvalidRequestError('body must be {"updates": [...]}', { code: "invalid_updates" });
      }
      const res = await ingestSightings(ctx, actorOf(request), body.updates);
      return { data: res };
    },
  );

  app.get("/api/v1/identity/resolve", { config: policy("identity.resolve") }, async (request) => {
    const q = request.query as Q;
    return { data: await resolveOne(ctx, actorOf(request), q) };
  });

  app.post(
    "/api/v1/identity/resolve",
    { config: { ...policy("identity.resolve"), body: ["devices", "partition"] } },
    async (request) => {
      return { data: await resolveBatch(ctx, actorOf(request), request.body) };
    },
  );

  app.get("/api/devices", { config: policy("devices.view") }, async (request) => {
    const params = parseListParams(request.query as Q);
    const res = await listDevices(ctx.db, actorOf(request), params);
    return { data: res.data.map(deviceJson), pagination: res.pagination };
  });

  app.get("/api/devices/ocsf/export", { config: policy("devices.export") }, async (request) => {
    return exportOcsf(ctx.db, actorOf(request), parseExportParams(request.query as Q));
  });

  app.get("/api/devices/:uid", { config: policy("devices.view") }, async (request) => {
    const { uid } = request.params as { uid: string };
    return { data: deviceJson(await getDevice(ctx.db, actorOf(request), uid)) };
  });

  app.delete("/api/devices/:uid", { config: policy("devices.delete") }, async (request) => {
    const { uid } = request.params as { uid: string };
    const q = request.query as Q;
    const reason = typeof q.reason === "string" ? q.reason.slice(0, 500) : null;
    return { data: deviceJson(await softDeleteDevice(ctx, actorOf(request), uid, reason)) };
  });

  app.get("/api/v1/source-inventory", { config: policy("devices.view") }, async (request) => {
    return readSnapshot(ctx, actorOf(request), request.query as Q);
  });

  app.post(
    "/api/v1/source-inventory",
    {
      config: {
        ...policy("devices.ingest"),
        body: [
          "source",
          "instance",
          "collection",
          "partition",
          "observed_at",
          "complete",
          "query_hash",
          "records",
        ],
      },
    },
    async (request) => {
      return { data: await uploadSnapshot(ctx, actorOf(request), request.body) };
    },
  );

  cleanupSettingsSingletonRoute(app, ctx);
}

/** A fresh feature per server (its cleanup loop belongs to that server). */
export function createInventoryFeature(): Feature {
  let stopCleanup: (() => Promise<void>) | null = null;
  return {
    name: "inventory",
    routes(app, ctx) {
      inventoryRoutes(app, ctx);
    },
    start(ctx) {
      stopCleanup = startCleanupLoop(ctx);
    },
    async stop() {
      if (stopCleanup) await stopCleanup();
      stopCleanup = null;
    },
  };
}
