/**
 * The JSON:API v2 feature: builds every declared resource's routes (after all declaration
 * modules are imported through ./resources.ts), the retired sysmon routes (410), the OpenAPI
 * document at GET /api/v2/open_api and Swagger UI at /api/v2/swaggerui (served from the
 * swagger-ui-dist package, no CDN).
 */

import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { JSONAPI_MEDIA_TYPE } from "../http/errors.ts";
import { strictJsonParser } from "../http/json-numbers.ts";
import { HTML_SECURITY_HEADERS } from "../http/security-headers.ts";
import type { AppContext } from "../kernel/context.ts";
import { GoneError, NotFoundError } from "../kernel/errors.ts";
import type { Feature } from "../kernel/feature.ts";
import { buildOpenApi, type ExtraPath } from "./engine/openapi.ts";
import { PREFIX, registerRoutes, routeSpecs } from "./engine/routes.ts";
import { allResources } from "./registry.ts";
import "./resources.ts";

/** Retired v2 sysmon routes → the SRQL entity to query instead (spec §9). */
export const RETIRED_ROUTES: Readonly<Record<string, string>> = {
  cpu_metrics: "cpu_metrics",
  cpu_metrics_hourly: "cpu_metrics",
  memory_metrics: "memory_metrics",
  memory_metrics_hourly: "memory_metrics",
  disk_metrics: "disk_metrics",
  disk_metrics_hourly: "disk_metrics",
  process_metrics: "process_metrics",
  process_metrics_hourly: "process_metrics",
  cpu_cluster_metrics: "cpu_metrics",
};

function retiredPaths(): ExtraPath[] {
  return Object.entries(RETIRED_ROUTES).map(([route, entity]) => ({
    method: "get" as const,
    path: `/${route}`,
    // One tag per resource family, as the original document tags them (issue 20).
    tag: route,
    operationId: `retired_${route}`,
    summary: `Retired: use POST /api/query with SRQL 'in:${entity}'`,
    description: "Always answers 410 Gone with an errors document naming the replacement.",
    status: 410,
  }));
}

function buildDocument(): Record<string, unknown> {
  const extra: ExtraPath[] = [
    ...retiredPaths(),
    {
      method: "get",
      path: "/open_api",
      tag: "openapi",
      operationId: "open_api",
      summary: "This OpenAPI document",
      status: 200,
      // An OpenAPI document, not a JSON:API one: served and declared as application/json.
      mediaType: "application/json",
    },
    {
      method: "get",
      path: "/device-cleanup-settings",
      tag: "device_cleanup_settings",
      operationId: "device_cleanup_settings_singleton",
      summary: "The device cleanup settings (a singleton, created with defaults on first read)",
      status: 200,
      documentOf: "device_cleanup_settings",
    },
  ];
  return buildOpenApi(routeSpecs(allResources()), extra);
}

/** The OpenAPI document for the currently registered resources (also used by scripts/tests). */
export function openApiDocument(): Record<string, unknown> {
  return buildDocument();
}

const require = createRequire(import.meta.url);

function swaggerDir(): string {
  return path.dirname(require.resolve("swagger-ui-dist/package.json"));
}

const SWAGGER_FILES: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "application/javascript; charset=utf-8",
  "swagger-ui-standalone-preset.js": "application/javascript; charset=utf-8",
  "favicon-32x32.png": "image/png",
};

const SWAGGER_CSP = (HTML_SECURITY_HEADERS["content-security-policy"] as string).replace(
  "style-src 'self'",
  "style-src 'self' 'unsafe-inline'",
);

const SWAGGER_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>API version 2</title>
<link rel="stylesheet" href="${PREFIX}/swaggerui/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="${PREFIX}/swaggerui/swagger-ui-bundle.js"></script>
<script src="${PREFIX}/swaggerui/swagger-ui-standalone-preset.js"></script>
<script src="${PREFIX}/swaggerui/init.js"></script>
</body></html>`;

const SWAGGER_INIT = `window.ui = SwaggerUIBundle({
  url: "${PREFIX}/open_api", dom_id: "#swagger-ui", deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: "StandaloneLayout"
});`;

export async function registerJsonApi(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const specs = routeSpecs(allResources());
  // An encapsulated context whose JSON:API body parser accepts an empty body (operations
  // without arguments may be sent with a Content-Type and no body).
  await app.register(async (child) => {
    const json = strictJsonParser(child);
    child.removeContentTypeParser(JSONAPI_MEDIA_TYPE);
    child.addContentTypeParser(JSONAPI_MEDIA_TYPE, { parseAs: "string" }, (request, body, done) => {
      if (body === "" || (typeof body === "string" && body.trim() === "")) {
        done(null, undefined);
        return;
      }
      json(request, body as string, done);
    });
    registerRoutes(child, ctx, specs);
  });

  for (const [route, entity] of Object.entries(RETIRED_ROUTES)) {
    app.get(
      `${PREFIX}/${route}`,
      { config: { access: { authenticated: true }, rateLimit: "api_default" } },
      async () => {
        throw new GoneError(
          `/api/v2/${route} is retired; query sysmon data with POST /api/query using the SRQL entity '${entity}' (e.g. {"query": "in:${entity} time:last_1h"})`,
          { code: "route_retired", extra: { replacement: "POST /api/query", srql_entity: entity } },
        );
      },
    );
  }

  let cached: string | null = null;
  app.get(
    `${PREFIX}/open_api`,
    { config: { access: { authenticated: true }, rateLimit: "api_default" } },
    async (_request, reply) => {
      cached ??= JSON.stringify(buildDocument());
      return reply.type("application/json; charset=utf-8").send(cached);
    },
  );

  const dir = swaggerDir();
  // The same rule as the document it loads (spec 4.1: "from an authenticated deployment").
  const page = { config: { access: { authenticated: true }, rateLimit: "api_default" } } as const;
  app.get(`${PREFIX}/swaggerui`, page, async (_request, reply) =>
    // Swagger UI sets inline styles from its bundle; scripts stay 'self' only.
    reply.type("text/html; charset=utf-8").header("content-security-policy", SWAGGER_CSP).send(SWAGGER_HTML),
  );
  app.get(`${PREFIX}/swaggerui/init.js`, page, async (_request, reply) =>
    reply.type("application/javascript; charset=utf-8").send(SWAGGER_INIT),
  );
  app.get<{ Params: { file: string } }>(`${PREFIX}/swaggerui/:file`, page, async (request, reply) => {
    // Own properties only: `constructor` must not find Object's constructor (issue 10).
    const file = request.params.file;
    const type = Object.hasOwn(SWAGGER_FILES, file) ? SWAGGER_FILES[file] : undefined;
    if (!type) throw new NotFoundError();
    return reply
      .type(type)
      .header("cache-control", "public, max-age=86400")
      .send(fs.createReadStream(path.join(dir, request.params.file)));
  });
}

export const jsonapiFeature: Feature = {
  name: "jsonapi",
  async routes(app, ctx) {
    await registerJsonApi(app, ctx);
  },
};
