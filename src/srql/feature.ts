import type { FastifyRequest } from "fastify";
import type { Actor } from "../access/actor.ts";
import { AuthenticationRequiredError, InvalidRequestError } from "../kernel/errors.ts";
import type { Feature } from "../kernel/feature.ts";
import { catalogDocument } from "./catalog.ts";
import { type QueryRequest, runQuery } from "./run.ts";

const CATALOG_CACHE_CONTROL = "private, max-age=300, must-revalidate";

function actorOf(request: FastifyRequest): Actor {
  if (!request.actor) throw new AuthenticationRequiredError();
  return request.actor;
}

/** `If-None-Match` matches: comma-separated list, `W/` prefixes tolerated, `*` matches. */
export function etagMatches(header: string | string[] | undefined, etag: string): boolean {
  if (!header) return false;
  const values = (Array.isArray(header) ? header.join(",") : header).split(",");
  return values.some((v) => {
    const t = v.trim().replace(/^W\//i, "");
    return t === "*" || t === etag;
  });
}

/** SRQL: `POST /api/query` and `GET /api/srql/catalog`. */
export const srqlFeature: Feature = {
  name: "srql",
  routes(app, ctx) {
    const config = { access: { permission: "analytics.view" }, rateLimit: "api_default" } as const;

    app.post(
      "/api/query",
      { config: { ...config, body: ["query", "limit", "cursor", "direction", "mode"] } },
      async (request) => {
        const body = request.body as Record<string, unknown> | null | undefined;
        if (!body || typeof body !== "object" || Array.isArray(body)) {
          throw new InvalidRequestError("missing required field: query");
        }
        let limit = body.limit;
        if (typeof limit === "string" && /^\d+$/.test(limit.trim())) limit = Number(limit.trim());
        return runQuery(ctx, actorOf(request), {
          query: body.query as string,
          limit: limit as number | null | undefined,
          cursor: body.cursor as string | null | undefined,
          direction: body.direction as QueryRequest["direction"],
          mode: typeof body.mode === "string" ? body.mode : null,
        });
      },
    );

    app.get("/api/srql/catalog", { config }, async (request, reply) => {
      const { doc, body } = catalogDocument();
      const etag = `"${doc.version}"`;
      reply.header("etag", etag);
      reply.header("cache-control", CATALOG_CACHE_CONTROL);
      if (etagMatches(request.headers["if-none-match"], etag)) return reply.code(304).send();
      return reply.type("application/json; charset=utf-8").send(body);
    });
  },
};
