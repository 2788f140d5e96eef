/**
 * Instance authentication settings (spec 5 "Instance modes", issue 17): how browsers sign in.
 * One row (`auth_settings`), changed by admins holding `settings.auth.manage` through
 * `/api/admin/auth-settings`. A mode is enabled only once its settings validate: the gateway
 * proxy mode needs a JWKS URL that answers a usable key set, or a PEM public key that parses.
 *
 * Each process caches the row for a few seconds (replicas converge within CACHE_MS of a change;
 * the replica that made it at once).
 */
import { createPublicKey } from "node:crypto";
import type { AppContext } from "../kernel/context.ts";
import { ValidationError } from "../kernel/errors.ts";
import { open, seal } from "../kernel/sealed.ts";
import { sql } from "../storage/sql.ts";
import type { Actor } from "./actor.ts";
import { type OidcClientSettings, oidcConfiguration, oidcUrlProblem } from "./oidc.ts";
import { type ClaimMappings, fetchJwks } from "./proxy-jwt.ts";
import { fetchIdpMetadata, parseIdpMetadata, type SamlSpSettings } from "./saml.ts";

export type AuthMode = "password" | "oidc" | "saml" | "proxy_jwt";
/** Modes this version can enable (all four of spec 5). */
export const AVAILABLE_MODES: readonly AuthMode[] = ["password", "oidc", "saml", "proxy_jwt"];

export interface AuthSettings {
  mode: AuthMode;
  proxyHeader: string;
  proxyJwksUrl: string | null;
  proxyPublicKeyPem: string | null;
  proxyIssuer: string | null;
  proxyAudience: string | null;
  claimMappings: ClaimMappings;
  oidcDiscoveryUrl: string | null;
  oidcClientId: string | null;
  /** Sealed (src/kernel/sealed.ts); never serialised. */
  oidcClientSecretSealed: string | null;
  oidcScopes: string;
  samlMetadataUrl: string | null;
  samlMetadataXml: string | null;
  samlIdpEntryPoint: string | null;
  samlIdpCerts: string[];
  samlSpEntityId: string | null;
  updatedAt: Date;
  updatedBy: string | null;
}

interface Row {
  [k: string]: unknown;
  mode: AuthMode;
  proxy_header: string;
  proxy_jwks_url: string | null;
  proxy_public_key_pem: string | null;
  proxy_issuer: string | null;
  proxy_audience: string | null;
  claim_mappings: Record<string, unknown>;
  oidc_discovery_url?: string | null;
  oidc_client_id?: string | null;
  oidc_client_secret_sealed?: string | null;
  oidc_scopes?: string;
  saml_metadata_url?: string | null;
  saml_metadata_xml?: string | null;
  saml_idp_entry_point?: string | null;
  saml_idp_certs?: string[] | null;
  saml_sp_entity_id?: string | null;
  updated_at: Date;
  updated_by: string | null;
}

const CACHE_MS = 5_000;
const cache = new WeakMap<object, { at: number; settings: AuthSettings }>();

const DEFAULT_CLAIMS: ClaimMappings = { email: "email", name: "name", sub: "sub" };

function fromRow(r: Row): AuthSettings {
  const m = r.claim_mappings ?? {};
  const pick = (k: keyof ClaimMappings) =>
    Object.hasOwn(m, k) && typeof m[k] === "string" ? (m[k] as string) : DEFAULT_CLAIMS[k];
  return {
    mode: r.mode,
    proxyHeader: r.proxy_header,
    proxyJwksUrl: r.proxy_jwks_url,
    proxyPublicKeyPem: r.proxy_public_key_pem,
    proxyIssuer: r.proxy_issuer,
    proxyAudience: r.proxy_audience,
    claimMappings: { email: pick("email"), name: pick("name"), sub: pick("sub") },
    oidcDiscoveryUrl: r.oidc_discovery_url ?? null,
    oidcClientId: r.oidc_client_id ?? null,
    oidcClientSecretSealed: r.oidc_client_secret_sealed ?? null,
    oidcScopes: r.oidc_scopes ?? "openid email profile",
    samlMetadataUrl: r.saml_metadata_url ?? null,
    samlMetadataXml: r.saml_metadata_xml ?? null,
    samlIdpEntryPoint: r.saml_idp_entry_point ?? null,
    samlIdpCerts: r.saml_idp_certs ?? [],
    samlSpEntityId: r.saml_sp_entity_id ?? null,
    updatedAt: r.updated_at,
    updatedBy: r.updated_by,
  };
}

export async function loadAuthSettings(ctx: AppContext, fresh = false): Promise<AuthSettings> {
  const hit = cache.get(ctx.db);
  if (!fresh && hit && Date.now() - hit.at < CACHE_MS) return hit.settings;
  const row = await ctx.db.one<Row>(sql`SELECT * FROM auth_settings WHERE id = 1`);
  const settings = row
    ? fromRow(row)
    : fromRow({
        mode: "password",
        proxy_header: "Authorization",
        proxy_jwks_url: null,
        proxy_public_key_pem: null,
        proxy_issuer: null,
        proxy_audience: null,
        claim_mappings: {},
        updated_at: new Date(0),
        updated_by: null,
      });
  cache.set(ctx.db, { at: Date.now(), settings });
  return settings;
}

/** The admin API's view (the PEM is a public key: shown). */
export function serializeAuthSettings(s: AuthSettings, baseUrl: string): Record<string, unknown> {
  return {
    mode: s.mode,
    available_modes: AVAILABLE_MODES,
    proxy_jwt: {
      header: s.proxyHeader,
      jwks_url: s.proxyJwksUrl,
      public_key_pem: s.proxyPublicKeyPem,
      issuer: s.proxyIssuer,
      audience: s.proxyAudience,
    },
    oidc: {
      discovery_url: s.oidcDiscoveryUrl,
      client_id: s.oidcClientId,
      // Write-only: shown as set or not.
      client_secret: s.oidcClientSecretSealed ? { set: true } : null,
      scopes: s.oidcScopes,
      redirect_uri: `${baseUrl}/auth/oidc/callback`,
    },
    saml: {
      metadata_url: s.samlMetadataUrl,
      metadata_xml: s.samlMetadataXml,
      sp_entity_id: spEntityId(s, baseUrl),
      acs_url: `${baseUrl}/auth/saml/consume`,
      sp_metadata_url: `${baseUrl}/auth/saml/metadata`,
      idp_entry_point: s.samlIdpEntryPoint,
      idp_certificates: s.samlIdpCerts.length,
    },
    claim_mappings: { ...s.claimMappings },
    updated_at: s.updatedAt.toISOString(),
    updated_by: s.updatedBy,
  };
}

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;
const CLAIM_PATH = /^[A-Za-z0-9_:-]{1,100}(\.[A-Za-z0-9_:-]{1,100}){0,9}$/;

function optionalString(v: unknown, pointer: string, max: number): string | null | undefined {
  if (v === undefined) return undefined;
  if (v === null || v === "") return null;
  if (typeof v !== "string" || v.length > max) {
    throw new ValidationError(
      `${pointer.slice(1).replace(/\//g, ".")} must be a string of at most ${max} characters`,
      {
        source: { pointer },
      },
    );
  }
  return v.trim();
}

function objectOf(v: unknown, pointer: string): Record<string, unknown> | undefined {
  if (v === undefined) return undefined;
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    throw new ValidationError(`${pointer.slice(1)} must be an object`, { source: { pointer } });
  }
  return v as Record<string, unknown>;
}

/**
 * Apply a change (`PUT /api/admin/auth-settings`, members optional): the resulting settings are
 * validated as a whole for the resulting mode before anything is stored.
 */
export async function updateAuthSettings(
  ctx: AppContext,
  actor: Actor,
  body: Record<string, unknown>,
): Promise<AuthSettings> {
  const current = await loadAuthSettings(ctx, true);
  const next: AuthSettings = { ...current, claimMappings: { ...current.claimMappings } };
  if (body.mode !== undefined) {
    if (typeof body.mode !== "string" || !["password", "oidc", "saml", "proxy_jwt"].includes(body.mode)) {
      throw new ValidationError("mode must be one of password, oidc, saml, proxy_jwt", {
        source: { pointer: "/mode" },
      });
    }
    if (!AVAILABLE_MODES.includes(body.mode as AuthMode)) {
      throw new ValidationError(
        `mode '${body.mode}' is not available in this version of netmon (available: ${AVAILABLE_MODES.join(", ")})`,
        { source: { pointer: "/mode" } },
      );
    }
    next.mode = body.mode as AuthMode;
  }
  const proxy = objectOf(body.proxy_jwt, "/proxy_jwt");
  if (proxy) {
    const header = optionalString(proxy.header, "/proxy_jwt/header", 100);
    if (header !== undefined) {
      if (header === null || !HEADER_NAME.test(header)) {
        throw new ValidationError("proxy_jwt.header must be an HTTP header name", {
          source: { pointer: "/proxy_jwt/header" },
        });
      }
      next.proxyHeader = header;
    }
    const jwks = optionalString(proxy.jwks_url, "/proxy_jwt/jwks_url", 2000);
    if (jwks !== undefined) next.proxyJwksUrl = jwks;
    const pem = optionalString(proxy.public_key_pem, "/proxy_jwt/public_key_pem", 20_000);
    if (pem !== undefined) next.proxyPublicKeyPem = pem;
    const iss = optionalString(proxy.issuer, "/proxy_jwt/issuer", 2000);
    if (iss !== undefined) next.proxyIssuer = iss;
    const aud = optionalString(proxy.audience, "/proxy_jwt/audience", 2000);
    if (aud !== undefined) next.proxyAudience = aud;
  }
  const oidc = objectOf(body.oidc, "/oidc");
  let newSecret: string | null = null;
  if (oidc) {
    for (const k of Object.keys(oidc)) {
      if (!["discovery_url", "client_id", "client_secret", "scopes", "redirect_uri"].includes(k)) {
        throw new ValidationError(`oidc has no member '${k}'`, { source: { pointer: `/oidc/${k}` } });
      }
    }
    const url = optionalString(oidc.discovery_url, "/oidc/discovery_url", 2000);
    if (url !== undefined) {
      const problem = url === null ? null : oidcUrlProblem(url);
      if (problem)
        throw new ValidationError(`oidc.discovery_url ${problem}`, {
          source: { pointer: "/oidc/discovery_url" },
        });
      next.oidcDiscoveryUrl = url;
    }
    const id = optionalString(oidc.client_id, "/oidc/client_id", 500);
    if (id !== undefined) next.oidcClientId = id;
    // The write-only marker sent back, or the member left out, keeps the stored secret.
    const secret = oidc.client_secret;
    if (
      secret !== undefined &&
      !(secret && typeof secret === "object" && (secret as { set?: unknown }).set === true)
    ) {
      const s = optionalString(secret, "/oidc/client_secret", 2000);
      if (s === null) next.oidcClientSecretSealed = null;
      else if (s !== undefined) {
        newSecret = s;
        next.oidcClientSecretSealed = seal(ctx.secretKey, OIDC_SECRET_PURPOSE, s);
      }
    }
    const scopes = optionalString(oidc.scopes, "/oidc/scopes", 500);
    if (scopes !== undefined) {
      const list = (scopes ?? "").split(/\s+/).filter(Boolean);
      if (!list.includes("openid") || list.some((x) => !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(x))) {
        throw new ValidationError("oidc.scopes must be space-separated scopes including openid", {
          source: { pointer: "/oidc/scopes" },
        });
      }
      next.oidcScopes = list.join(" ");
    }
  }
  const samlIn = objectOf(body.saml, "/saml");
  if (samlIn) {
    for (const k of Object.keys(samlIn)) {
      if (!["metadata_url", "metadata_xml", "sp_entity_id"].includes(k)) {
        throw new ValidationError(`saml has no member '${k}' (metadata_url, metadata_xml, sp_entity_id)`, {
          source: { pointer: `/saml/${k}` },
        });
      }
    }
    const url = optionalString(samlIn.metadata_url, "/saml/metadata_url", 2000);
    if (url !== undefined) next.samlMetadataUrl = url;
    const xml = optionalString(samlIn.metadata_xml, "/saml/metadata_xml", 1_000_000);
    if (xml !== undefined) next.samlMetadataXml = xml;
    const entity = optionalString(samlIn.sp_entity_id, "/saml/sp_entity_id", 1000);
    if (entity !== undefined) next.samlSpEntityId = entity;
  }
  const claims = objectOf(body.claim_mappings, "/claim_mappings");
  if (claims) {
    for (const k of Object.keys(claims)) {
      if (k !== "email" && k !== "name" && k !== "sub") {
        throw new ValidationError(`claim_mappings has no member '${k}' (email, name, sub)`, {
          source: { pointer: `/claim_mappings/${k}` },
        });
      }
      const v = claims[k];
      if (typeof v !== "string" || !CLAIM_PATH.test(v)) {
        throw new ValidationError(
          `claim_mappings.${k} must be a claim name, dot notation for nested claims`,
          {
            source: { pointer: `/claim_mappings/${k}` },
          },
        );
      }
      next.claimMappings[k] = v;
    }
  }
  if (next.proxyJwksUrl !== null) {
    let url: URL | null = null;
    try {
      url = new URL(next.proxyJwksUrl);
    } catch {
      url = null;
    }
    if (!url || (url.protocol !== "https:" && url.protocol !== "http:")) {
      throw new ValidationError("proxy_jwt.jwks_url must be an http(s) URL", {
        source: { pointer: "/proxy_jwt/jwks_url" },
      });
    }
  }
  if (next.proxyPublicKeyPem !== null) {
    try {
      const key = createPublicKey(next.proxyPublicKeyPem);
      if (key.asymmetricKeyType === undefined) throw new Error("not an asymmetric key");
    } catch {
      throw new ValidationError("proxy_jwt.public_key_pem is not a PEM public key (SPKI)", {
        source: { pointer: "/proxy_jwt/public_key_pem" },
      });
    }
  }
  if (next.mode === "proxy_jwt") {
    if (!next.proxyJwksUrl && !next.proxyPublicKeyPem) {
      throw new ValidationError(
        "the gateway proxy mode needs proxy_jwt.jwks_url or proxy_jwt.public_key_pem",
        {
          source: { pointer: "/proxy_jwt" },
        },
      );
    }
    if (next.proxyJwksUrl) {
      // Fetched now, through the outbound guard: a mode that cannot verify a token is not enabled.
      try {
        await fetchJwks(ctx, next.proxyJwksUrl, { force: true });
      } catch (err) {
        throw new ValidationError(`proxy_jwt.jwks_url could not be used: ${(err as Error).message}`, {
          source: { pointer: "/proxy_jwt/jwks_url" },
        });
      }
    }
  }
  if (next.mode === "saml" && (samlIn || current.mode !== "saml")) {
    // The IdP's metadata is read now (fetched through the outbound guard, or the pasted XML) and
    // its sign-on URL and signing certificates stored: no mode that cannot verify an assertion.
    let xml = next.samlMetadataXml;
    if (next.samlMetadataUrl) {
      const problem = httpUrlProblem(next.samlMetadataUrl);
      if (problem)
        throw new ValidationError(`saml.metadata_url ${problem}`, {
          source: { pointer: "/saml/metadata_url" },
        });
      try {
        xml = await fetchIdpMetadata(ctx, next.samlMetadataUrl);
      } catch (err) {
        throw new ValidationError(`saml.metadata_url could not be used: ${(err as Error).message}`, {
          source: { pointer: "/saml/metadata_url" },
        });
      }
    }
    if (!xml) {
      throw new ValidationError("the SAML mode needs saml.metadata_url or saml.metadata_xml", {
        source: { pointer: "/saml" },
      });
    }
    try {
      const idp = parseIdpMetadata(xml);
      next.samlIdpEntryPoint = idp.entryPoint;
      next.samlIdpCerts = idp.certs;
    } catch (err) {
      const at = next.samlMetadataUrl ? "/saml/metadata_url" : "/saml/metadata_xml";
      throw new ValidationError(`saml.${at.slice(6)} could not be used: ${(err as Error).message}`, {
        source: { pointer: at },
      });
    }
  }
  if (next.mode === "oidc") {
    const secret = newSecret ?? oidcClientSecret(ctx, next);
    if (!next.oidcDiscoveryUrl || !next.oidcClientId || !secret) {
      throw new ValidationError(
        "the OIDC mode needs oidc.discovery_url, oidc.client_id and oidc.client_secret",
        {
          source: { pointer: "/oidc" },
        },
      );
    }
    try {
      // The discovery document is fetched and parsed now: a mode that cannot sign anyone in is not enabled.
      await oidcConfiguration(
        ctx,
        {
          discoveryUrl: next.oidcDiscoveryUrl,
          clientId: next.oidcClientId,
          clientSecret: secret,
          scopes: next.oidcScopes,
        },
        { fresh: true },
      );
    } catch (err) {
      throw new ValidationError(`oidc.discovery_url could not be used: ${(err as Error).message}`, {
        source: { pointer: "/oidc/discovery_url" },
      });
    }
  }
  const by = actor.email ?? actor.id;
  await ctx.db.query(sql`
    UPDATE auth_settings SET mode = ${next.mode}, proxy_header = ${next.proxyHeader},
      proxy_jwks_url = ${next.proxyJwksUrl}, proxy_public_key_pem = ${next.proxyPublicKeyPem},
      proxy_issuer = ${next.proxyIssuer}, proxy_audience = ${next.proxyAudience},
      claim_mappings = ${JSON.stringify(next.claimMappings)}::jsonb,
      oidc_discovery_url = ${next.oidcDiscoveryUrl}, oidc_client_id = ${next.oidcClientId},
      oidc_client_secret_sealed = ${next.oidcClientSecretSealed}, oidc_scopes = ${next.oidcScopes},
      saml_metadata_url = ${next.samlMetadataUrl}, saml_metadata_xml = ${next.samlMetadataXml},
      saml_idp_entry_point = ${next.samlIdpEntryPoint}, saml_idp_certs = ${next.samlIdpCerts}::text[],
      saml_sp_entity_id = ${next.samlSpEntityId},
      updated_at = ${ctx.now()}, updated_by = ${by}
    WHERE id = 1`);
  cache.delete(ctx.db);
  return loadAuthSettings(ctx, true);
}

/**
 * May this account sign in with a password (or reset one) now? The per-account toggle
 * (`local_login_enabled`, set by admins; off for accounts an identity provider created) decides
 * in every mode; in an SSO mode SERVICE_AUTH_FORCE_LOCAL_LOGIN=true lets any account that has a
 * password in as well (the deployment's escape hatch, spec 5).
 */
export async function localLoginAllowed(
  ctx: AppContext,
  user: { local_login_enabled: boolean; password_hash: string | null },
): Promise<boolean> {
  if (user.local_login_enabled) return true;
  if (!ctx.config.forceLocalLogin || user.password_hash === null) return false;
  return (await loadAuthSettings(ctx)).mode !== "password";
}

const OIDC_SECRET_PURPOSE = "oidc-client-secret";

/** The stored client secret, unsealed (null when unset, or sealed under another instance's key). */
export function oidcClientSecret(ctx: AppContext, s: AuthSettings): string | null {
  return s.oidcClientSecretSealed ? open(ctx.secretKey, OIDC_SECRET_PURPOSE, s.oidcClientSecretSealed) : null;
}

/** The relying party's settings when the OIDC mode is usable, else null. */
export function oidcClientSettings(ctx: AppContext, s: AuthSettings): OidcClientSettings | null {
  const secret = oidcClientSecret(ctx, s);
  if (s.mode !== "oidc" || !s.oidcDiscoveryUrl || !s.oidcClientId || !secret) return null;
  return {
    discoveryUrl: s.oidcDiscoveryUrl,
    clientId: s.oidcClientId,
    clientSecret: secret,
    scopes: s.oidcScopes,
  };
}

/** This SP's entity id: as configured, else the SP metadata URL (a common convention). */
export function spEntityId(s: AuthSettings, baseUrl: string): string {
  return s.samlSpEntityId ?? `${baseUrl}/auth/saml/metadata`;
}

/** The service provider's settings when the SAML mode is usable, else null. */
export function samlSpSettings(s: AuthSettings, baseUrl: string): SamlSpSettings | null {
  if (s.mode !== "saml" || !s.samlIdpEntryPoint || s.samlIdpCerts.length === 0) return null;
  return {
    spEntityId: spEntityId(s, baseUrl),
    idp: { entryPoint: s.samlIdpEntryPoint, certs: s.samlIdpCerts },
  };
}

function httpUrlProblem(raw: string): string | null {
  try {
    const u = new URL(raw);
    return u.protocol === "https:" || u.protocol === "http:" ? null : "must be an http(s) URL";
  } catch {
    return "must be a URL";
  }
}
