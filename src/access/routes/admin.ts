import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../kernel/context.ts";
import { InvalidRequestError, NotFoundError } from "../../kernel/errors.ts";
import { VERSION } from "../../kernel/version.ts";
import { sql } from "../../storage/sql.ts";
import type { Actor } from "../actor.ts";
import { adminOpenApiDocument } from "../admin-openapi.ts";
import { createApiKey, listApiKeys, revokeApiKey, serializeApiKey } from "../api-keys.ts";
import { loadAuthSettings, serializeAuthSettings, updateAuthSettings } from "../auth-settings.ts";
import {
  createRoleProfile,
  deleteRoleProfile,
  getRoleProfile,
  listRoleProfiles,
  permissionCatalog,
  requireRbacAdmin,
  serializeRoleProfile,
  updateRoleProfile,
} from "../role-profiles.ts";
import { type ControlCredentialRow, issueControlPlaneToken, revokeControlPlaneToken } from "../tokens.ts";
import {
  createUser,
  deactivateUser,
  getUser,
  listUsers,
  reactivateUser,
  serializeUser,
  updateUser,
} from "../users.ts";
import { parseTtl } from "../util.ts";

type IdParams = { Params: { id: string } };

function body(request: { body?: unknown }): Record<string, unknown> {
  const b = request.body;
  if (b === undefined || b === null) return {};
  if (typeof b !== "object" || Array.isArray(b)) throw new InvalidRequestError("body must be a JSON object");
  return b as Record<string, unknown>;
}

function serializeControl(c: ControlCredentialRow): Record<string, unknown> {
  return {
    id: c.id,
    kind: c.kind,
    name: c.name,
    created_at: c.created_at.toISOString(),
    expires_at: c.expires_at?.toISOString() ?? null,
    revoked_at: c.revoked_at?.toISOString() ?? null,
    last_used_at: c.last_used_at?.toISOString() ?? null,
  };
}

/** `/api/admin`: users, role profiles, API keys, control-plane credentials, the admin OpenAPI document. */
export async function adminRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const config = { access: { role: "admin" }, rateLimit: "admin" } as const;
  const actorOf = (request: { actor: Actor | null }) => request.actor as Actor;

  // ---- instance (Settings → Instance in the console) ----
  app.get("/api/admin/instance", { config }, async () => {
    const pglite = ctx.db.kind === "pglite";
    return {
      version: VERSION,
      node_version: process.version,
      database_backend: ctx.db.kind,
      // Where the embedded database lives; a PostgreSQL URL is never echoed (it may hold a password).
      data_dir: ctx.config.dataDir,
      database_location: pglite ? `${ctx.config.dataDir}/pg` : "external PostgreSQL (DATABASE_URL)",
      base_url: ctx.config.baseUrl,
      embedded_agent: ctx.config.embeddedAgent,
      rate_limit_store: ctx.config.redisUrl ? "redis" : "memory",
      uptime_seconds: Math.round(process.uptime()),
    };
  });

  // ---- authentication settings (Settings → Authentication) ----
  const authConfig = { access: { permission: "settings.auth.manage" }, rateLimit: "admin" } as const;
  app.get("/api/admin/auth-settings", { config: authConfig }, async () =>
    serializeAuthSettings(await loadAuthSettings(ctx, true), ctx.config.baseUrl),
  );
  app.put(
    "/api/admin/auth-settings",
    { config: { ...authConfig, body: ["mode", "proxy_jwt", "oidc", "saml", "claim_mappings"] } },
    async (request) => {
      const settings = await updateAuthSettings(ctx, actorOf(request), body(request));
      request.log.info(
        { event: "auth_settings_changed", mode: settings.mode },
        "authentication settings changed",
      );
      return serializeAuthSettings(settings, ctx.config.baseUrl);
    },
  );

  // ---- users ----
  app.get("/api/admin/users", { config }, async (request) => {
    const q = request.query as Record<string, unknown>;
    return (await listUsers(ctx.db, actorOf(request), q)).map(serializeUser);
  });
  app.post(
    "/api/admin/users",
    { config: { ...config, body: ["email", "display_name", "role", "password", "role_profile_id"] } },
    async (request, reply) => {
      const user = await createUser(ctx, actorOf(request), body(request) as never);
      request.log.info({ event: "user_created", user_id: user.id }, "user created");
      return reply.code(201).send(serializeUser(user));
    },
  );
  app.get<IdParams>("/api/admin/users/:id", { config }, async (request) =>
    serializeUser(await getUser(ctx.db, actorOf(request), request.params.id)),
  );
  app.patch<IdParams>(
    "/api/admin/users/:id",
    { config: { ...config, body: ["display_name", "role", "role_profile_id", "local_login_enabled"] } },
    async (request) =>
      serializeUser(await updateUser(ctx, actorOf(request), request.params.id, body(request))),
  );
  app.post<IdParams>(
    "/api/admin/users/:id/deactivate",
    { config: { ...config, body: [] } },
    async (request) => serializeUser(await deactivateUser(ctx, actorOf(request), request.params.id)),
  );
  app.post<IdParams>(
    "/api/admin/users/:id/reactivate",
    { config: { ...config, body: [] } },
    async (request) => serializeUser(await reactivateUser(ctx, actorOf(request), request.params.id)),
  );

  // ---- role profiles ----
  app.get("/api/admin/role-profiles/catalog", { config }, async (request) => {
    requireRbacAdmin(actorOf(request));
    return permissionCatalog();
  });
  app.get("/api/admin/role-profiles", { config }, async (request) =>
    (await listRoleProfiles(ctx.db, actorOf(request))).map(serializeRoleProfile),
  );
  app.post(
    "/api/admin/role-profiles",
    { config: { ...config, body: ["name", "description", "base_role", "grant", "revoke", "permissions"] } },
    async (request, reply) =>
      reply
        .code(201)
        .send(serializeRoleProfile(await createRoleProfile(ctx, actorOf(request), body(request)))),
  );
  app.get<IdParams>("/api/admin/role-profiles/:id", { config }, async (request) =>
    serializeRoleProfile(await getRoleProfile(ctx.db, actorOf(request), request.params.id)),
  );
  app.patch<IdParams>(
    "/api/admin/role-profiles/:id",
    { config: { ...config, body: ["name", "description", "base_role", "grant", "revoke", "permissions"] } },
    async (request) =>
      serializeRoleProfile(await updateRoleProfile(ctx, actorOf(request), request.params.id, body(request))),
  );
  app.delete<IdParams>("/api/admin/role-profiles/:id", { config }, async (request, reply) => {
    await deleteRoleProfile(ctx, actorOf(request), request.params.id);
    return reply.code(204).send();
  });

  // ---- API keys (X-API-Key) ----
  app.get("/api/admin/api-keys", { config }, async (request) =>
    (await listApiKeys(ctx, actorOf(request))).map(serializeApiKey),
  );
  app.post(
    "/api/admin/api-keys",
    { config: { ...config, body: ["name", "user_id", "expires_in"] } },
    async (request, reply) => {
      const { key, record } = await createApiKey(ctx, actorOf(request), body(request));
      request.log.info({ event: "api_key_created", api_key_id: record.id }, "api key created");
      return reply
        .code(201)
        .header("cache-control", "no-store")
        .send({ ...serializeApiKey(record), key });
    },
  );
  app.delete<IdParams>("/api/admin/api-keys/:id", { config }, async (request) =>
    serializeApiKey(await revokeApiKey(ctx, actorOf(request), request.params.id)),
  );

  // ---- control-plane credentials (gateways, agents) ----
  app.get("/api/admin/control-credentials", { config }, async (request) => {
    requireRbacAdmin(actorOf(request));
    const rows = await ctx.db.many<ControlCredentialRow>(
      sql`SELECT * FROM control_credentials ORDER BY created_at DESC, id`,
    );
    return rows.map(serializeControl);
  });
  app.post(
    "/api/admin/control-credentials",
    { config: { ...config, body: ["kind", "name", "expires_in"] } },
    async (request, reply) => {
      requireRbacAdmin(actorOf(request));
      const b = body(request);
      if (b.kind !== "gateway" && b.kind !== "agent")
        throw new InvalidRequestError("kind must be gateway or agent");
      if (typeof b.name !== "string") throw new InvalidRequestError("name is required");
      let ttlSeconds: number | undefined;
      if (b.expires_in !== undefined && b.expires_in !== null) {
        try {
          ttlSeconds = parseTtl(b.expires_in as string | number);
        } catch (err) {
          throw new InvalidRequestError(`expires_in ${(err as Error).message}`);
        }
      }
      const { token, record } = await issueControlPlaneToken(ctx, { kind: b.kind, name: b.name, ttlSeconds });
      return reply
        .code(201)
        .header("cache-control", "no-store")
        .send({ ...serializeControl(record), token, token_type: "Bearer" });
    },
  );
  app.delete<IdParams>("/api/admin/control-credentials/:id", { config }, async (request) => {
    requireRbacAdmin(actorOf(request));
    await revokeControlPlaneToken(ctx, request.params.id);
    const row = await ctx.db.one<ControlCredentialRow>(
      sql`SELECT * FROM control_credentials WHERE id = ${request.params.id}`,
    );
    if (!row) throw new NotFoundError("control-plane credential not found");
    return serializeControl(row);
  });

  // ---- OpenAPI ----
  app.get("/api/admin/openapi", { config }, async () => adminOpenApiDocument(ctx.config.baseUrl));
  app.get(
    "/api/docs/v1/admin/openapi.json",
    { config: { access: { public: true }, rateLimit: "api_default" } },
    async () => adminOpenApiDocument(ctx.config.baseUrl),
  );
}
