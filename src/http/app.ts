import { randomUUID } from "node:crypto";
import formbody from "@fastify/formbody";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from "fastify";
import type { AppContext } from "../kernel/context.ts";
import type { Feature } from "../kernel/feature.ts";
import { enforceBodyMembers } from "./body-members.ts";
import { clientErrorHandler } from "./client-errors.ts";
import { errorHandler, JSONAPI_MEDIA_TYPE, notFoundHandler } from "./errors.ts";
import { guardInput } from "./input-guard.ts";
import { strictJsonParser } from "./json-numbers.ts";
import { securityHeaders } from "./security-headers.ts";
import "./route-config.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Build the HTTP edge: framework settings, parsers, the one error mapping, then each feature's routes. */
export async function buildApp(ctx: AppContext, features: readonly Feature[]): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log as FastifyBaseLogger,
    bodyLimit: ctx.config.bodyLimit,
    trustProxy: ctx.config.trustedProxies.length > 0 ? ctx.config.trustedProxies : false,
    requestIdHeader: false,
    genReqId: (req) => {
      const incoming = req.headers["x-request-id"];
      return typeof incoming === "string" && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    return503OnClosing: true,
    // A body naming __proto__ or constructor.prototype is refused with 400, never merged.
    onProtoPoisoning: "error",
    // Errors before routing (bad URL encoding, over-long parameters, unparsable HTTP) answer in
    // the documented shapes too.
    frameworkErrors: (error, request, reply) => errorHandler(error, request, reply),
    clientErrorHandler,
    onConstructorPoisoning: "error",
    // One line per request (on completion) instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    forceCloseConnections: "idle",
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: "array", allErrors: false } },
  });

  app.decorateRequest("actor", null);

  // During a graceful shutdown, answer in-flight requests with `connection: close` so
  // keep-alive sockets do not hold the server open after their last response.
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onSend", async (_request, reply) => {
    if (closing) reply.header("connection", "close");
  });
  app.addHook("onResponse", async (request, reply) => {
    // One line per request at debug (issue 19): at info they drowned everything else, and
    // request counts and latencies are in /metrics. Server errors are still logged at error
    // by the error handler, with the request id.
    request.log.debug(
      { req: request, res: reply, responseTime: Math.round(reply.elapsedTime * 100) / 100 },
      "request completed",
    );
  });
  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });

  // JSON:API bodies parse like JSON; the JSON:API layer checks media type parameters itself.
  // Both refuse prototype keys and integers JSON.parse would round.
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, strictJsonParser(app));
  app.addContentTypeParser(JSONAPI_MEDIA_TYPE, { parseAs: "string" }, strictJsonParser(app));
  await app.register(formbody, { bodyLimit: ctx.config.bodyLimit });

  securityHeaders(app);
  guardInput(app);
  enforceBodyMembers(app);
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);

  for (const feature of features) {
    if (feature.routes) await feature.routes(app, ctx);
  }
  return app;
}
