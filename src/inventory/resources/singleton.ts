import type { FastifyInstance } from "fastify";
import type { Actor } from "../../access/actor.ts";
import { checkAccept, JSONAPI } from "../../jsonapi/engine/media.ts";
import { parseDeepQuery } from "../../jsonapi/engine/query.ts";
import { runRead } from "../../jsonapi/engine/read.ts";
import type { AppContext } from "../../kernel/context.ts";
import { getCleanupSettings } from "../cleanup.ts";
import { cleanupSettingsResource } from "./index.ts";

/**
 * `GET /api/v2/device-cleanup-settings`: the singleton itself (reference: "get singleton at /"),
 * created with defaults on first read. The engine has no singleton read, so this route reuses
 * its detail-read serialiser (same document, fields/include handling and errors).
 */
export function cleanupSettingsSingletonRoute(app: FastifyInstance, ctx: AppContext): void {
  app.get(
    "/api/v2/device-cleanup-settings",
    {
      config: { access: { permission: "devices.view" }, rateLimit: "api_default" },
      onRequest: async (request) => {
        checkAccept(request.headers.accept);
      },
    },
    async (request, reply) => {
      const s = await getCleanupSettings(ctx.db);
      const qi = request.url.indexOf("?");
      const search = qi >= 0 ? request.url.slice(qi + 1) : "";
      const doc = await runRead(
        ctx.db,
        {
          res: cleanupSettingsResource,
          query: parseDeepQuery(search),
          search,
          path: "/device-cleanup-settings",
          baseUrl: `${request.protocol}://${request.host}/api/v2`,
          params: { id: s.id },
          actor: request.actor as Actor | null,
          now: ctx.now(),
          visible: true,
        },
        s.id,
      );
      return reply.code(200).type(JSONAPI).send(doc);
    },
  );
}
