import type { FastifyInstance } from "fastify";
import type { RateLimitScope } from "./rate-limit.ts";
import type { AccessRule } from "./rule.ts";

/** One registered route and its declared policy (the authorization-matrix test reads these). */
export interface RouteRecord {
  method: string;
  url: string;
  access: AccessRule;
  rateLimit: RateLimitScope;
}

const REGISTRIES = new WeakMap<object, RouteRecord[]>();

export function createRegistry(app: FastifyInstance): RouteRecord[] {
  const list: RouteRecord[] = [];
  REGISTRIES.set(app, list);
  return list;
}

/** Every route registered on this server (after the access feature), with its policy. HEAD routes omitted. */
export function listRoutes(app: FastifyInstance): readonly RouteRecord[] {
  const list = REGISTRIES.get(app);
  if (!list) throw new Error("the access feature is not registered on this server");
  return list;
}

/** The budget a route draws from when it does not say: by path prefix, per the conventions. */
export function defaultRateLimit(url: string): RateLimitScope {
  if (url === "/api/admin" || url.startsWith("/api/admin/")) return "admin";
  if (url === "/api" || url.startsWith("/api/")) return "api_default";
  return "none";
}

export function describeRule(rule: AccessRule): string {
  return JSON.stringify(rule);
}
