import type { Actor } from "../access/actor.ts";
import type { RateLimitScope } from "../access/rate-limit.ts";
import type { AccessRule } from "../access/rule.ts";

// The access domain owns the rule and budget vocabularies; routes carry them (issue 11: http/
// sits above the domains and imports them, never the other way round).
export type { AccessRule, RateLimitScope };

export type BodyMembers = readonly string[] | "validated";

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
