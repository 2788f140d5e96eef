import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import type { Actor } from "../actor.ts";
import { credentialCache } from "../credential-cache.ts";
import { csrfTokenFor } from "../sessions.ts";
import {
  createApiToken,
  listApiTokens,
  ownerPermissions,
  revokeApiToken,
  serializeApiToken,
} from "../tokens.ts";
import { findUserById, serializeUser } from "../users.ts";

/** The signed-in user's own API credentials (spec 5: created at /settings/api-credentials). */
export async function credentialRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const config = { access: { authenticated: true }, rateLimit: "api_default" } as const;

  app.get("/api/v1/me", { config }, async (request) => {
    const actor = request.actor as Actor;
    // The serialised record is cached with the credentials (evicted by any change to the user).
    const cache = credentialCache(ctx);
    let user = cache.getUser(actor.id) ?? null;
    if (!user) {
      const generation = cache.generation;
      const row = await findUserById(ctx.db, actor.id);
      user = row ? serializeUser(row) : null;
      if (user) cache.setUser(actor.id, user, generation);
    }
    return {
      user,
      role: actor.role,
      permissions: [...actor.permissions].sort(),
      auth_method: actor.authMethod,
      scopes: actor.scopes ?? null,
      csrf_token: request.sessionToken ? csrfTokenFor(ctx, request.sessionToken) : null,
    };
  });

  app.get("/api/v1/api-credentials", { config }, async (request) => {
    const actor = request.actor as Actor;
    const owner = await ownerPermissions(ctx, actor.id);
    return (await listApiTokens(ctx, actor.id)).map((t) => serializeApiToken(t, owner));
  });

  app.post(
    "/api/v1/api-credentials",
    { config: { ...config, body: ["name", "scopes", "expires_in", "permissions"] } },
    async (request, reply) => {
      const actor = request.actor as Actor;
      const body = (request.body ?? {}) as Record<string, unknown>;
      // A token made with a restricted token can carry no more than that token does.
      const full = await ownerPermissions(ctx, actor.id);
      const restricted = [...full].some((p) => !actor.permissions.has(p));
      const owner = restricted ? actor.permissions : full;
      const { token, record } = await createApiToken(ctx, actor.id, {
        name: body.name,
        scopes: body.scopes,
        expires_in: body.expires_in,
        permissions: body.permissions ?? (restricted ? [...actor.permissions] : undefined),
        ownerPermissions: owner,
      });
      request.log.info(
        { event: "api_token_created", token_id: record.id, user_id: actor.id },
        "api token created",
      );
      return reply
        .code(201)
        .header("cache-control", "no-store")
        .send({
          ...serializeApiToken(record, full),
          token,
          token_type: "Bearer",
        });
    },
  );

  app.delete<{ Params: { id: string } }>("/api/v1/api-credentials/:id", { config }, async (request) => {
    const actor = request.actor as Actor;
    const row = await revokeApiToken(ctx, actor, request.params.id);
    request.log.info(
      { event: "api_token_revoked", token_id: row.id, user_id: actor.id },
      "api token revoked",
    );
    return serializeApiToken(row);
  });
}
