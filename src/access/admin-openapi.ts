import { VERSION } from "../kernel/version.ts";

/**
 * The OpenAPI 3.0 document of `/api/admin` (served admin-only at /api/admin/openapi and
 * published unauthenticated at /api/docs/v1/admin/openapi.json).
 */
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: unknown) => ({ "application/json": { schema } });
const idParam = { name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } };
const errors = {
  "400": { description: "Invalid request", content: json(ref("Error")) },
  "401": { description: "Authentication required", content: json(ref("Error")) },
  "403": { description: "Admin role required", content: json(ref("Error")) },
  "429": { description: "Request budget exhausted", content: json(ref("RateLimited")) },
};
const notFound = { "404": { description: "Not found", content: json(ref("Error")) } };

function op(
  tag: string,
  summary: string,
  ok: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { tags: [tag], summary, responses: { ...ok, ...errors }, ...extra };
}

export function adminOpenApiDocument(baseUrl: string): Record<string, unknown> {
  const userOk = { "200": { description: "The user", content: json(ref("User")) }, ...notFound };
  const profileOk = {
    "200": { description: "The role profile", content: json(ref("RoleProfile")) },
    ...notFound,
  };
  return {
    openapi: "3.0.0",
    info: { title: "netmon admin API", version: VERSION },
    servers: [{ url: baseUrl }],
    security: [{ bearer: [] }, { apiKey: [] }, { session: [] }],
    paths: {
      "/api/admin/instance": {
        get: op("instance", "This instance: version, database backend and location, data directory, uptime", {
          "200": {
            description: "Instance information (shown in the console under Settings → Instance)",
            content: json({
              type: "object",
              properties: {
                version: { type: "string" },
                node_version: { type: "string" },
                database_backend: { type: "string", enum: ["pglite", "postgres"] },
                data_dir: { type: "string" },
                database_location: { type: "string" },
                base_url: { type: "string" },
                embedded_agent: { type: "boolean" },
                rate_limit_store: { type: "string", enum: ["memory", "redis"] },
                uptime_seconds: { type: "integer" },
              },
            }),
          },
        }),
      },
      "/api/admin/auth-settings": {
        get: op("auth", "Authentication settings: the instance's sign-in mode and its settings (spec 5)", {
          "200": { description: "The settings", content: json(ref("AuthSettings")) },
        }),
        put: op(
          "auth",
          "Change the sign-in mode or its settings (members optional); a mode is enabled only when its settings validate (the JWKS URL is fetched)",
          {
            "200": { description: "The settings now in force", content: json(ref("AuthSettings")) },
            "422": { description: "A setting is invalid, or the mode cannot be enabled with these settings" },
          },
          { requestBody: { required: true, content: json(ref("AuthSettingsUpdate")) } },
        ),
      },
      "/api/admin/backup": {
        get: op(
          "instance",
          "A consistent backup of the database (the `netmon backup` file format, without the secret key)",
          {
            "200": {
              description:
                "gzip'd JSON lines, streamed from one snapshot; restore with `netmon restore FILE` (docs/operations.md)",
              content: { "application/gzip": { schema: { type: "string", format: "binary" } } },
            },
          },
        ),
      },
      "/api/admin/users": {
        get: op(
          "users",
          "List users (newest first)",
          {
            "200": { description: "Users", content: json({ type: "array", items: ref("User") }) },
          },
          {
            parameters: [
              {
                name: "limit",
                in: "query",
                schema: { type: "integer", default: 100, minimum: 1, maximum: 1000 },
              },
              {
                name: "role",
                in: "query",
                schema: { type: "string", enum: ["viewer", "operator", "admin"] },
              },
              {
                name: "status",
                in: "query",
                schema: { type: "string", enum: ["active", "disabled", "inactive"] },
              },
            ],
          },
        ),
        post: op(
          "users",
          "Create a user",
          {
            "201": { description: "Created", content: json(ref("User")) },
            "409": { description: "Email taken", content: json(ref("Error")) },
          },
          { requestBody: { required: true, content: json(ref("UserCreate")) } },
        ),
      },
      "/api/admin/users/{id}": {
        get: op("users", "Read a user", userOk, { parameters: [idParam] }),
        patch: op("users", "Update a user", userOk, {
          parameters: [idParam],
          requestBody: { required: true, content: json(ref("UserUpdate")) },
        }),
      },
      "/api/admin/users/{id}/deactivate": {
        post: op("users", "Disable a user (sign-in refused, sessions and tokens stop working)", userOk, {
          parameters: [idParam],
        }),
      },
      "/api/admin/users/{id}/reactivate": {
        post: op("users", "Re-enable a user", userOk, { parameters: [idParam] }),
      },
      "/api/admin/role-profiles/catalog": {
        get: op("role-profiles", "The permission catalog", {
          "200": { description: "Permissions", content: json({ type: "array", items: ref("Permission") }) },
        }),
      },
      "/api/admin/role-profiles": {
        get: op("role-profiles", "List role profiles", {
          "200": { description: "Profiles", content: json({ type: "array", items: ref("RoleProfile") }) },
        }),
        post: op(
          "role-profiles",
          "Create a role profile",
          {
            "201": { description: "Created", content: json(ref("RoleProfile")) },
            "409": { description: "Name taken", content: json(ref("Error")) },
          },
          { requestBody: { required: true, content: json(ref("RoleProfileInput")) } },
        ),
      },
      "/api/admin/role-profiles/{id}": {
        get: op("role-profiles", "Read a role profile", profileOk, { parameters: [idParam] }),
        patch: op("role-profiles", "Update a custom role profile (applies on the next request)", profileOk, {
          parameters: [idParam],
          requestBody: { required: true, content: json(ref("RoleProfileInput")) },
        }),
        delete: op(
          "role-profiles",
          "Delete a custom role profile not assigned to any user",
          {
            "204": { description: "Deleted" },
            "409": { description: "In use", content: json(ref("Error")) },
            ...notFound,
          },
          { parameters: [idParam] },
        ),
      },
      "/api/admin/api-keys": {
        get: op("api-keys", "List API keys (never the key)", {
          "200": { description: "Keys", content: json({ type: "array", items: ref("ApiKey") }) },
        }),
        post: op(
          "api-keys",
          "Create an API key (the key is returned once)",
          {
            "201": { description: "Created", content: json(ref("ApiKeyCreated")) },
          },
          {
            requestBody: {
              required: true,
              content: json({
                type: "object",
                required: ["name"],
                properties: {
                  name: { type: "string" },
                  user_id: {
                    type: "string",
                    format: "uuid",
                    description: "Owner whose permissions apply (default: you)",
                  },
                  expires_in: { oneOf: [{ type: "integer" }, { type: "string", example: "90d" }] },
                },
              }),
            },
          },
        ),
      },
      "/api/admin/api-keys/{id}": {
        delete: op(
          "api-keys",
          "Revoke an API key",
          {
            "200": { description: "Revoked", content: json(ref("ApiKey")) },
            ...notFound,
          },
          { parameters: [idParam] },
        ),
      },
      "/api/admin/control-credentials": {
        get: op("control-plane", "List gateway/agent credentials", {
          "200": {
            description: "Credentials",
            content: json({ type: "array", items: ref("ControlCredential") }),
          },
        }),
        post: op(
          "control-plane",
          "Issue a gateway/agent bearer credential (returned once)",
          {
            "201": { description: "Created", content: json(ref("ControlCredential")) },
          },
          {
            requestBody: {
              required: true,
              content: json({
                type: "object",
                required: ["kind", "name"],
                properties: {
                  kind: { type: "string", enum: ["gateway", "agent"] },
                  name: { type: "string" },
                  expires_in: { oneOf: [{ type: "integer" }, { type: "string" }] },
                },
              }),
            },
          },
        ),
      },
      "/api/admin/control-credentials/{id}": {
        delete: op(
          "control-plane",
          "Revoke a gateway/agent credential",
          {
            "200": { description: "Revoked", content: json(ref("ControlCredential")) },
            ...notFound,
          },
          { parameters: [idParam] },
        ),
      },
      "/api/admin/openapi": {
        get: op("docs", "This document", {
          "200": { description: "OpenAPI 3.0 document", content: json({ type: "object" }) },
        }),
      },
    },
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
        apiKey: { type: "apiKey", in: "header", name: "X-API-Key" },
        session: { type: "apiKey", in: "cookie", name: "netmon_session" },
      },
      schemas: {
        AuthSettings: {
          type: "object",
          properties: {
            mode: { type: "string", enum: ["password", "oidc", "saml", "proxy_jwt"] },
            available_modes: { type: "array", items: { type: "string" } },
            proxy_jwt: { $ref: "#/components/schemas/ProxyJwtSettings" },
            oidc: { $ref: "#/components/schemas/OidcSettings" },
            saml: { $ref: "#/components/schemas/SamlSettings" },
            claim_mappings: { $ref: "#/components/schemas/ClaimMappings" },
            updated_at: { type: "string", format: "date-time" },
            updated_by: { type: "string", nullable: true },
          },
        },
        AuthSettingsUpdate: {
          type: "object",
          additionalProperties: false,
          properties: {
            mode: { type: "string", enum: ["password", "oidc", "saml", "proxy_jwt"] },
            proxy_jwt: { $ref: "#/components/schemas/ProxyJwtSettings" },
            oidc: { $ref: "#/components/schemas/OidcSettings" },
            saml: { $ref: "#/components/schemas/SamlSettings" },
            claim_mappings: { $ref: "#/components/schemas/ClaimMappings" },
          },
        },
        SamlSettings: {
          type: "object",
          properties: {
            metadata_url: {
              type: "string",
              nullable: true,
              description: "The IdP's metadata URL (read when saved)",
            },
            metadata_xml: { type: "string", nullable: true, description: "Or the IdP's metadata pasted" },
            sp_entity_id: {
              type: "string",
              nullable: true,
              description: "This SP's entity id (default: the SP metadata URL)",
            },
            acs_url: { type: "string", readOnly: true },
            sp_metadata_url: { type: "string", readOnly: true },
            idp_entry_point: { type: "string", readOnly: true, nullable: true },
            idp_certificates: { type: "integer", readOnly: true },
          },
        },
        OidcSettings: {
          type: "object",
          properties: {
            discovery_url: {
              type: "string",
              nullable: true,
              description: "https://<idp>/.well-known/openid-configuration (http only for a loopback issuer)",
            },
            client_id: { type: "string", nullable: true },
            client_secret: {
              description:
                'Write-only: answered as {"set": true}; send that back (or leave it out) to keep the stored secret',
            },
            scopes: {
              type: "string",
              description: "Space-separated, including openid (default: openid email profile)",
            },
            redirect_uri: {
              type: "string",
              readOnly: true,
              description: "{NETMON_BASE_URL}/auth/oidc/callback: register it at the provider",
            },
          },
        },
        ProxyJwtSettings: {
          type: "object",
          properties: {
            header: {
              type: "string",
              description: "Header carrying the JWT (default Authorization: Bearer)",
            },
            jwks_url: {
              type: "string",
              nullable: true,
              description: "Preferred: the gateway's JWKS (cached 1 h, refetched on an unknown kid)",
            },
            public_key_pem: {
              type: "string",
              nullable: true,
              description: "Alternative: a static SPKI public key",
            },
            issuer: { type: "string", nullable: true, description: "Required `iss`, when set" },
            audience: { type: "string", nullable: true, description: "Required `aud` member, when set" },
          },
        },
        ClaimMappings: {
          type: "object",
          properties: {
            email: {
              type: "string",
              description: "Claim holding the email (dot notation for nested claims)",
            },
            name: { type: "string" },
            sub: { type: "string", description: "Claim stored as the user's external id" },
          },
        },
        Error: {
          type: "object",
          required: ["error"],
          properties: { error: { type: "string" }, message: { type: "string" } },
        },
        RateLimited: {
          type: "object",
          properties: { error: { type: "string", enum: ["rate_limited"] }, retry_after: { type: "integer" } },
        },
        User: {
          type: "object",
          properties: {
            id: { type: "string", format: "uuid" },
            email: { type: "string" },
            display_name: { type: "string", nullable: true },
            role: { type: "string", enum: ["viewer", "operator", "admin"] },
            role_profile_id: { type: "string", format: "uuid", nullable: true },
            status: { type: "string", enum: ["active", "disabled"] },
            has_password: { type: "boolean" },
            has_external_id: { type: "boolean" },
            local_login_enabled: { type: "boolean" },
            confirmed_at: { type: "string", format: "date-time", nullable: true },
            last_login_at: { type: "string", format: "date-time", nullable: true },
            last_auth_method: { type: "string", nullable: true },
            authenticated_at: { type: "string", format: "date-time", nullable: true },
            inserted_at: { type: "string", format: "date-time" },
            updated_at: { type: "string", format: "date-time" },
          },
        },
        UserCreate: {
          type: "object",
          required: ["email"],
          properties: {
            email: { type: "string" },
            display_name: { type: "string" },
            role: { type: "string", enum: ["viewer", "operator", "admin"], default: "viewer" },
            password: { type: "string", minLength: 8 },
            role_profile_id: { type: "string", format: "uuid", nullable: true },
          },
        },
        UserUpdate: {
          type: "object",
          properties: {
            display_name: { type: "string" },
            role: { type: "string", enum: ["viewer", "operator", "admin"] },
            role_profile_id: { type: "string", format: "uuid", nullable: true },
            local_login_enabled: { type: "boolean" },
          },
        },
        Permission: {
          type: "object",
          properties: {
            key: { type: "string" },
            section: { type: "string" },
            description: { type: "string" },
            default_roles: { type: "array", items: { type: "string" } },
          },
        },
        RoleProfile: {
          type: "object",
          properties: {
            id: { type: "string", format: "uuid" },
            name: { type: "string" },
            system_name: { type: "string", nullable: true },
            description: { type: "string", nullable: true },
            base_role: { type: "string", enum: ["viewer", "operator", "admin"] },
            grant: { type: "array", items: { type: "string" } },
            revoke: { type: "array", items: { type: "string" } },
            permissions: { type: "array", items: { type: "string" } },
            system: { type: "boolean" },
            inserted_at: { type: "string", format: "date-time" },
            updated_at: { type: "string", format: "date-time" },
          },
        },
        RoleProfileInput: {
          type: "object",
          properties: {
            name: { type: "string" },
            description: { type: "string" },
            base_role: { type: "string", enum: ["viewer", "operator", "admin"] },
            grant: { type: "array", items: { type: "string" } },
            revoke: { type: "array", items: { type: "string" } },
            permissions: {
              type: "array",
              items: { type: "string" },
              description: "Alternative to grant/revoke: the full permission set",
            },
          },
        },
        ApiKey: {
          type: "object",
          properties: {
            id: { type: "string", format: "uuid" },
            name: { type: "string" },
            prefix: { type: "string" },
            user_id: { type: "string", format: "uuid" },
            created_by: { type: "string", format: "uuid", nullable: true },
            created_at: { type: "string", format: "date-time" },
            expires_at: { type: "string", format: "date-time", nullable: true },
            revoked_at: { type: "string", format: "date-time", nullable: true },
            last_used_at: { type: "string", format: "date-time", nullable: true },
          },
        },
        ApiKeyCreated: {
          allOf: [ref("ApiKey"), { type: "object", properties: { key: { type: "string" } } }],
        },
        ControlCredential: {
          type: "object",
          properties: {
            id: { type: "string", format: "uuid" },
            kind: { type: "string", enum: ["gateway", "agent"] },
            name: { type: "string" },
            token: { type: "string", description: "Only in the creation response" },
            created_at: { type: "string", format: "date-time" },
            expires_at: { type: "string", format: "date-time", nullable: true },
            revoked_at: { type: "string", format: "date-time", nullable: true },
            last_used_at: { type: "string", format: "date-time", nullable: true },
          },
        },
      },
    },
  };
}
