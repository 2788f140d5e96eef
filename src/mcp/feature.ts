/**
 * `/mcp`: the Model Context Protocol over Streamable HTTP (stateless: one server and transport
 * per POST, JSON responses). Only bearer tokens carrying the `mcp` scope may use it — a
 * session cookie or an API key cannot, so a browser page can never drive it (spec 5.2).
 */
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Actor } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { AuthenticationRequiredError, ForbiddenError } from "../kernel/errors.ts";
import type { Feature } from "../kernel/feature.ts";
import { createMcpServer } from "./server.ts";

export const MCP_SCOPE = "mcp";

/** The caller, if it may use MCP; otherwise the error it gets. */
export function mcpActor(actor: Actor | null): Actor {
  if (!actor) throw new AuthenticationRequiredError();
  const scopes = actor.authMethod === "api_token" && Array.isArray(actor.scopes) ? actor.scopes : [];
  if (!scopes.includes(MCP_SCOPE)) {
    throw new ForbiddenError("MCP needs a bearer token with the 'mcp' scope", { code: "insufficient_scope" });
  }
  return actor;
}

async function handle(ctx: AppContext, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const actor = mcpActor(request.actor);
  const server = createMcpServer(ctx, actor);
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  reply.raw.on("close", () => {
    transport.close().catch(() => undefined);
    server.close().catch(() => undefined);
  });
  await server.connect(transport);
  reply.hijack();
  await transport.handleRequest(request.raw, reply.raw, request.body);
}

export function createMcpFeature(): Feature {
  return {
    name: "mcp",
    routes(app: FastifyInstance, ctx: AppContext) {
      if (!ctx.config.mcpEnabled) return;
      const config = { access: { authenticated: true }, rateLimit: "mcp", body: "validated" } as const;
      app.post("/mcp", { config }, (request, reply) => handle(ctx, request, reply));
      // Stateless server: no server-initiated stream to open and no session to end.
      const notAllowed = async (request: FastifyRequest, reply: FastifyReply) => {
        mcpActor(request.actor);
        return reply
          .code(405)
          .header("allow", "POST")
          .send({
            jsonrpc: "2.0",
            error: { code: -32000, message: "Method not allowed: use POST" },
            id: null,
          });
      };
      app.get("/mcp", { config: { access: { authenticated: true }, rateLimit: "mcp" } }, notAllowed);
      app.delete("/mcp", { config: { access: { authenticated: true }, rateLimit: "mcp" } }, notAllowed);
    },
  };
}
