import type { FastifyRequest } from "fastify";
import type { AppContext } from "../kernel/context.ts";
import { ForbiddenError } from "../kernel/errors.ts";

function sameOrigin(ctx: AppContext, request: FastifyRequest, origin: string): boolean {
  if (origin === "null") return false;
  let o: URL;
  try {
    o = new URL(origin);
  } catch {
    return false;
  }
  if (o.host === request.headers.host) return true;
  try {
    return new URL(ctx.config.baseUrl).origin === o.origin;
  } catch {
    return false;
  }
}

/**
 * Refuse cross-site requests: when the browser sends `Origin`, it must be this server's own
 * (the Host header) or NETMON_BASE_URL's. Used for cookie-authenticated mutations and sign-in.
 */
export function checkOrigin(ctx: AppContext, request: FastifyRequest): void {
  const origin = request.headers.origin;
  if (typeof origin === "string" && origin !== "" && !sameOrigin(ctx, request, origin)) {
    throw new ForbiddenError("cross-site request refused", { code: "csrf_invalid" });
  }
}
