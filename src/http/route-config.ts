import type { Actor } from "../access/actor.ts";

/**
 * Every route declares who may call it and which request budget it draws from. The access
 * hook enforces it, and the authorization-matrix test derives expected statuses from it,
 * so a route cannot ship without a policy.
 */
export type AccessRule =
  /** No credentials needed (health, sign-in page, published OpenAPI copy). */
  | { public: true }
  /** Any authenticated principal. */
  | { authenticated: true }
  /** Authenticated and holding this permission key. */
  | { permission: string }
  /** Authenticated with at least this role. */
  | { role: "viewer" | "operator" | "admin" }
  /**
   * Credentials are optional; the handler decides (e.g. event-rule lists answer an empty
   * `data` to anonymous callers, spec 4.1 rule behaviour 2).
   */
  | { optional: true; permission?: string }
  /**
   * Control-plane principals (gateways, agents); admins' user credentials are accepted too.
   * With `permission`, a user holding that permission is accepted instead of requiring admin
   * (e.g. `{ controlPlane: true, permission: "infrastructure.manage" }`: either suffices).
   */
  | { controlPlane: true; permission?: string };

export type BodyMembers = readonly string[] | "validated";

export type RateLimitScope = "api_default" | "admin" | "control" | "mcp" | "ingest" | "none";

declare module "fastify" {
  interface FastifyContextConfig {
    access?: AccessRule;
    rateLimit?: RateLimitScope;
    /**
     * The JSON body members a write route accepts (top level). Any other member is refused
     * with 400 before the handler runs, so a typo (`ttl` for `expires_in`) is never silently
     * ignored. `"validated"`: the handler validates the whole document against a schema
     * (the JSON:API engine). Every POST/PUT/PATCH route must declare one (checked at start).
     */
    body?: BodyMembers;
  }
  interface FastifyRequest {
    actor: Actor | null;
  }
}
