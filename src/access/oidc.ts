/**
 * OIDC sign-in (spec 5; issue 17): the authorization code flow with PKCE, state and nonce, by
 * `openid-client` (a certified relying party). Discovery, token and userinfo requests go through
 * netmon's outbound guard (the address connected to is the address vetted). The in-flight login
 * (state → nonce, code verifier, where to return) lives in `oidc_logins`, single use, ten
 * minutes, so any replica can finish a login another started.
 */
import * as client from "openid-client";
import type { AppContext } from "../kernel/context.ts";
import { parseAddress } from "../kernel/net/address.ts";
import { guardedRequest } from "../kernel/net/guarded-request.ts";
import { outboundPolicyFor } from "../kernel/net/outbound-policy.ts";
import { sql } from "../storage/sql.ts";
import { type ClaimMappings, claimAt } from "./proxy-jwt.ts";
import { sha256Hex } from "./util.ts";

export const OIDC_LOGIN_TTL_MS = 10 * 60_000;
const DISCOVERY_TTL_MS = 60 * 60_000;

export interface OidcClientSettings {
  discoveryUrl: string;
  clientId: string;
  clientSecret: string;
  scopes: string;
}

export class OidcError extends Error {}

/** openid-client wraps transport failures ("something went wrong"): name the underlying cause. */
function reason(err: unknown): string {
  const e = err as Error & { cause?: unknown };
  const cause = e.cause instanceof Error ? e.cause.message : undefined;
  return cause && cause !== e.message ? `${e.message}: ${cause}` : e.message;
}

/** http:// is accepted only for a loopback issuer (development, tests); real IdPs use https. */
export function oidcUrlProblem(raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "must be a URL";
  }
  if (url.protocol === "https:") return null;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const addr = parseAddress(host);
  const loopback = host === "localhost" || (addr !== null && addr.range() === "loopback");
  return url.protocol === "http:" && loopback
    ? null
    : "must be an https URL (http only for a loopback issuer)";
}

/** fetch for openid-client, through the outbound guard. */
function guardedFetch(ctx: AppContext): client.CustomFetch {
  return async (url, options) => {
    const headers: Record<string, string> = {};
    new Headers(options.headers as ConstructorParameters<typeof Headers>[0]).forEach((v, k) => {
      headers[k] = v;
    });
    const res = await guardedRequest(outboundPolicyFor(ctx), url, {
      method: options.method ?? "GET",
      headers,
      body: typeof options.body === "string" ? options.body : options.body ? String(options.body) : undefined,
      timeoutMs: 10_000,
      maxBody: 1024 * 1024,
    });
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers)) {
      if (typeof v === "string") out.set(k, v);
      else if (Array.isArray(v)) for (const x of v) out.append(k, x);
    }
    return new Response(res.status === 204 || res.status === 304 ? null : res.body, {
      status: res.status,
      headers: out,
    });
  };
}

const configs = new Map<string, { at: number; config: client.Configuration }>();

/** The IdP's configuration (discovery document), cached an hour per issuer and client. */
export async function oidcConfiguration(
  ctx: AppContext,
  s: OidcClientSettings,
  opts: { fresh?: boolean } = {},
): Promise<client.Configuration> {
  const key = `${s.discoveryUrl}\n${s.clientId}\n${sha256Hex(s.clientSecret)}`;
  const hit = configs.get(key);
  if (!opts.fresh && hit && Date.now() - hit.at < DISCOVERY_TTL_MS) return hit.config;
  const problem = oidcUrlProblem(s.discoveryUrl);
  if (problem) throw new OidcError(`the discovery URL ${problem}`);
  const insecure = new URL(s.discoveryUrl).protocol === "http:";
  let config: client.Configuration;
  try {
    config = await client.discovery(
      new URL(s.discoveryUrl),
      s.clientId,
      s.clientSecret,
      client.ClientSecretBasic(s.clientSecret),
      {
        [client.customFetch]: guardedFetch(ctx),
        ...(insecure ? { execute: [client.allowInsecureRequests] } : {}),
      },
    );
  } catch (err) {
    throw new OidcError(`discovery failed: ${reason(err)}`);
  }
  config[client.customFetch] = guardedFetch(ctx);
  configs.set(key, { at: Date.now(), config });
  return config;
}

/** Start a login: remember state, nonce and the PKCE verifier; answer the IdP URL to go to. */
export async function startOidcLogin(
  ctx: AppContext,
  s: OidcClientSettings,
  returnTo: string,
): Promise<string> {
  const config = await oidcConfiguration(ctx, s);
  const state = client.randomState();
  const nonce = client.randomNonce();
  const verifier = client.randomPKCECodeVerifier();
  const now = ctx.now();
  await ctx.db.query(
    sql`DELETE FROM oidc_logins WHERE created_at < ${new Date(now.getTime() - OIDC_LOGIN_TTL_MS)}`,
  );
  await ctx.db.query(sql`
    INSERT INTO oidc_logins (state_hash, nonce, code_verifier, return_to, created_at)
    VALUES (${sha256Hex(state)}, ${nonce}, ${verifier}, ${returnTo}, ${now})`);
  return client
    .buildAuthorizationUrl(config, {
      redirect_uri: `${ctx.config.baseUrl}/auth/oidc/callback`,
      scope: s.scopes,
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    })
    .toString();
}

export interface OidcIdentity {
  sub: string;
  email: string;
  name: string | null;
  returnTo: string;
}

/** Finish a login at the callback: the state is consumed once; the ID token is validated. */
export async function finishOidcLogin(
  ctx: AppContext,
  s: OidcClientSettings,
  mappings: ClaimMappings,
  callbackQuery: string,
): Promise<OidcIdentity> {
  const params = new URLSearchParams(callbackQuery);
  const state = params.get("state");
  if (!state) throw new OidcError("the callback carries no state");
  const login = await ctx.db.one<{
    nonce: string;
    code_verifier: string;
    return_to: string;
    created_at: Date;
  }>(
    sql`DELETE FROM oidc_logins WHERE state_hash = ${sha256Hex(state)} RETURNING nonce, code_verifier, return_to, created_at`,
  );
  if (!login || ctx.now().getTime() - login.created_at.getTime() > OIDC_LOGIN_TTL_MS) {
    throw new OidcError("this sign-in link is unknown, used or expired; start again");
  }
  if (params.get("error")) {
    throw new OidcError(
      `the identity provider refused: ${params.get("error_description") ?? params.get("error")}`,
    );
  }
  const config = await oidcConfiguration(ctx, s);
  let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
  try {
    tokens = await client.authorizationCodeGrant(
      config,
      new URL(`${ctx.config.baseUrl}/auth/oidc/callback?${params.toString()}`),
      {
        pkceCodeVerifier: login.code_verifier,
        expectedState: state,
        expectedNonce: login.nonce,
        idTokenExpected: true,
      },
    );
  } catch (err) {
    throw new OidcError(`the sign-in could not be completed: ${reason(err)}`);
  }
  let claims = (tokens.claims() ?? {}) as Record<string, unknown>;
  if (claimAt(claims, mappings.email) === undefined && typeof tokens.access_token === "string") {
    // Some providers put the email in userinfo only.
    try {
      const info = await client.fetchUserInfo(config, tokens.access_token, String(claims.sub));
      claims = { ...info, ...claims };
    } catch (err) {
      ctx.log.warn({ err: (err as Error).message }, "OIDC userinfo request failed");
    }
  }
  const sub = claimAt(claims, mappings.sub);
  const email = claimAt(claims, mappings.email);
  const name = claimAt(claims, mappings.name);
  if (typeof sub !== "string" || sub === "")
    throw new OidcError(`the ID token has no '${mappings.sub}' claim`);
  if (typeof email !== "string" || !/^[^\s@]+@[^\s@]+$/.test(email)) {
    throw new OidcError(`the identity provider sent no '${mappings.email}' claim`);
  }
  return {
    sub,
    email: email.trim(),
    name: typeof name === "string" && name.trim() !== "" ? name.trim().slice(0, 200) : null,
    returnTo: login.return_to,
  };
}
