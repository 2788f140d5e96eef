import type { FastifyInstance } from "fastify";
import { InvalidRequestError } from "../kernel/errors.ts";

const WRITE_METHODS = new Set(["POST", "PUT", "PATCH"]);

/**
 * Unknown body members are refused on every write (issue 10): each write route declares its
 * members in `config.body`; a route that declares none cannot be registered.
 */
export function enforceBodyMembers(app: FastifyInstance): void {
  app.addHook("onRoute", (opts) => {
    const methods = Array.isArray(opts.method) ? opts.method : [opts.method];
    if (!methods.some((m) => WRITE_METHODS.has(m))) return;
    if (opts.config?.body === undefined) {
      throw new Error(
        `route ${methods.join(",")} ${opts.url} declares no config.body (see src/http/route-config.ts)`,
      );
    }
  });
  app.addHook("preValidation", async (request) => {
    const allowed = request.routeOptions.config?.body;
    if (allowed === undefined || allowed === "validated") return;
    const b = request.body;
    if (b === null || typeof b !== "object" || Array.isArray(b)) return;
    for (const key of Object.keys(b)) {
      if (!allowed.includes(key)) {
        throw new InvalidRequestError(
          `unknown body member '${key}'${allowed.length ? ` (accepted: ${allowed.join(", ")})` : " (this request takes no body members)"}`,
          { code: "unknown_member", source: { pointer: `/${key.replace(/~/g, "~0").replace(/\//g, "~1")}` } },
        );
      }
    }
  });
}
