import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Feature } from "../../kernel/feature.ts";
import { HTML_SECURITY_HEADERS } from "../security-headers.ts";

/**
 * The console runs dashboard renderers from Blob URLs of bytes it has hash-checked (decision
 * 0710), so its pages allow `blob:` scripts. Only script already running on the page can mint a
 * blob: URL, so this admits no script that could not run before.
 */
const CONSOLE_CSP = (HTML_SECURITY_HEADERS["content-security-policy"] as string).replace(
  "script-src 'self'",
  "script-src 'self' blob:",
);

/**
 * The operator console: a static single-page application built from `web/` into `web/dist`
 * (decision 0700). It is a client of the public HTTP API only; this feature merely serves its
 * files. Console pages need a session: without one the browser is sent to the sign-in page and
 * brought back afterwards.
 */
export const CONSOLE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../web/dist");

/** Client-side routes of the console (each also answers its sub-paths). */
export const CONSOLE_PAGES = [
  "/",
  "/devices",
  "/checks",
  "/alerts",
  "/query",
  "/logs",
  "/traces",
  // Not /metrics: that is the Prometheus scrape endpoint (src/ops/metrics.ts).
  "/otel-metrics",
  "/fleet",
  "/rules",
  "/dashboards",
  "/settings",
] as const;

const NOT_BUILT = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>netmon</title></head>
<body><h1>The console is not built</h1><p>This checkout has no <code>web/dist</code>. Run <code>npm ci</code>
(it builds the console) or <code>npm run build:web</code>, then reload. The HTTP API under
<code>/api</code> works without it.</p></body></html>`;

export function createConsoleFeature(dir = CONSOLE_DIR): Feature {
  return {
    name: "console",
    async routes(app, ctx) {
      const built = fs.existsSync(path.join(dir, "index.html"));
      if (!built) {
        ctx.log.warn({ dir }, "the web console is not built (run npm run build:web); / explains how");
      }
      // sendFile only: every route below is ours, with our access rules and headers.
      await app.register(fastifyStatic, {
        root: dir,
        serve: false,
        decorateReply: true,
        preCompressed: true,
      });
      const page = { access: { optional: true }, rateLimit: "none" } as const;
      const asset = { access: { public: true }, rateLimit: "none" } as const;

      const sendIndex = async (request: FastifyRequest, reply: FastifyReply) => {
        if (!request.actor) {
          const back = request.url.length <= 2000 ? request.url : "/";
          return reply
            .code(303)
            .header("location", `/users/log-in?return_to=${encodeURIComponent(back)}`)
            .send();
        }
        reply.header("cache-control", "no-cache").header("content-security-policy", CONSOLE_CSP);
        if (!built) return reply.code(503).type("text/html; charset=utf-8").send(NOT_BUILT);
        return reply
          .type("text/html; charset=utf-8")
          .sendFile("index.html", dir, { maxAge: 0, cacheControl: false });
      };
      for (const p of CONSOLE_PAGES) {
        app.get(p, { config: page }, sendIndex);
        if (p !== "/") app.get(`${p}/*`, { config: page }, sendIndex);
      }
      // Hashed file names: cache for a year.
      app.get("/assets/*", { config: asset }, async (request, reply) => {
        const rel = (request.params as { "*": string })["*"];
        return reply.sendFile(path.posix.join("assets", rel), dir, { immutable: true, maxAge: "365d" });
      });
      app.get("/favicon.svg", { config: asset }, async (_request, reply) =>
        reply.sendFile("favicon.svg", dir, { maxAge: "1d" }),
      );
      app.get("/favicon.ico", { config: asset }, async (_request, reply) =>
        reply.code(301).header("location", "/favicon.svg").send(),
      );
    },
  };
}
