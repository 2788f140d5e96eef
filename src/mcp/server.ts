/**
 * One MCP server per request (stateless Streamable HTTP): it carries the authenticated actor,
 * so every tool runs with exactly the token owner's permissions and nothing is shared between
 * callers.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { Actor } from "../access/actor.ts";
import { adminOpenApiDocument } from "../access/admin-openapi.ts";
import { openApiDocument } from "../jsonapi/feature.ts";
import type { AppContext } from "../kernel/context.ts";
import { AppError } from "../kernel/errors.ts";
import { VERSION } from "../kernel/version.ts";
import { catalogDocument } from "../srql/catalog.ts";
import { allTools } from "./tools.ts";

export const MCP_SERVER_NAME = "netmon";

const INSTRUCTIONS = [
  "netmon is a network and infrastructure monitoring service. Use srql_catalog to learn what can be",
  "queried, srql_query to read devices, services (check results), alerts, logs, metrics and more,",
  "device_lookup and identity_resolve for inventory questions, alerts_list / alert_acknowledge for",
  "alerts, and check_explain to find out why a check is failing. Everything you see and do is limited",
  "to the permissions of the token's owner.",
].join(" ");

/** The tool result an error becomes: the model reads the message; `code` matches the HTTP API's. */
function errorResult(err: unknown) {
  if (err instanceof AppError && err.status < 500) {
    const extra = Object.keys(err.extra).length > 0 ? err.extra : undefined;
    return {
      isError: true,
      content: [
        {
          type: "text" as const,
          text: JSON.stringify({ error: err.message, code: err.code, status: err.status, ...extra }),
        },
      ],
    };
  }
  throw err;
}

export function createMcpServer(ctx: AppContext, actor: Actor): McpServer {
  const server = new McpServer({ name: MCP_SERVER_NAME, version: VERSION }, { instructions: INSTRUCTIONS });
  for (const tool of allTools()) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: tool.inputSchema,
        annotations: { readOnlyHint: tool.readOnly, openWorldHint: false },
      },
      async (input: Record<string, unknown>) => {
        try {
          const out = await tool.run(ctx, actor, input);
          return {
            content: [{ type: "text" as const, text: JSON.stringify(out) }],
            structuredContent: out as Record<string, unknown>,
          };
        } catch (err) {
          ctx.log.debug({ err, tool: tool.name }, "mcp tool failed");
          return errorResult(err);
        }
      },
    );
  }
  const json = (uri: string, value: unknown) => ({
    contents: [{ uri, mimeType: "application/json", text: JSON.stringify(value) }],
  });
  server.registerResource(
    "srql-catalog",
    "netmon://srql/catalog",
    {
      title: "SRQL catalog",
      description: "Entities, fields, operators of SRQL",
      mimeType: "application/json",
    },
    async (uri) => ({
      contents: [{ uri: uri.href, mimeType: "application/json", text: catalogDocument().body }],
    }),
  );
  server.registerResource(
    "openapi-v2",
    "netmon://openapi/v2",
    {
      title: "OpenAPI: JSON:API v2",
      description: "The /api/v2 OpenAPI document",
      mimeType: "application/json",
    },
    async (uri) => json(uri.href, openApiDocument()),
  );
  server.registerResource(
    "openapi-admin",
    "netmon://openapi/admin",
    {
      title: "OpenAPI: admin API",
      description: "The /api/admin OpenAPI document",
      mimeType: "application/json",
    },
    async (uri) => json(uri.href, adminOpenApiDocument(ctx.config.baseUrl)),
  );
  return server;
}
