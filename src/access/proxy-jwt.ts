/**
 * The gateway-proxy JWT mode (spec 5; facts 4.4): an upstream gateway (an identity-aware proxy)
 * injects a JWT in a configured header. netmon verifies the signature against a JWKS URL
 * (cached an hour, refetched when a token names a key it does not have: rotation) or a static
 * PEM public key, with asymmetric algorithms only (HS* and `none` are refused), checks `exp`,
 * `nbf`, and `iss`/`aud` when configured, reads the mapped claims and signs the user in.
 */
import { createPublicKey, type KeyObject } from "node:crypto";
import {
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  type JSONWebKeySet,
  type JWTPayload,
  jwtVerify,
} from "jose";
import type { AppContext } from "../kernel/context.ts";
import { guardedRequest } from "../kernel/net/guarded-request.ts";
import { outboundPolicyFor } from "../kernel/net/outbound-policy.ts";

export interface ClaimMappings {
  email: string;
  name: string;
  sub: string;
}

/** What verification needs of the instance's authentication settings. */
export interface ProxyVerification {
  proxyJwksUrl: string | null;
  proxyPublicKeyPem: string | null;
  proxyIssuer: string | null;
  proxyAudience: string | null;
  claimMappings: ClaimMappings;
}

export const PROXY_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
] as const;

/** A JWKS is kept this long; a token naming an unknown key refetches at most every REFETCH_MS. */
const JWKS_TTL_MS = 60 * 60_000;
const REFETCH_MS = 5_000;
const CLOCK_TOLERANCE_S = 60;

interface CachedJwks {
  jwks: JSONWebKeySet;
  fetchedAt: number;
}
const jwksCache = new Map<string, CachedJwks>();

/** Fetch (through the outbound guard) and parse a JWKS; cached per URL. */
export async function fetchJwks(
  ctx: AppContext,
  url: string,
  opts: { force?: boolean } = {},
): Promise<JSONWebKeySet> {
  const hit = jwksCache.get(url);
  if (!opts.force && hit && Date.now() - hit.fetchedAt < JWKS_TTL_MS) return hit.jwks;
  const res = await guardedRequest(outboundPolicyFor(ctx), url, {
    method: "GET",
    headers: { accept: "application/json", "user-agent": "netmon-auth/1" },
    timeoutMs: 5_000,
    maxBody: 1024 * 1024,
  });
  if (res.status !== 200) throw new Error(`the JWKS URL answered ${res.status}`);
  let jwks: JSONWebKeySet;
  try {
    jwks = JSON.parse(res.body) as JSONWebKeySet;
  } catch {
    throw new Error("the JWKS URL did not answer JSON");
  }
  if (!jwks || !Array.isArray(jwks.keys) || jwks.keys.length === 0) {
    throw new Error("the JWKS has no keys");
  }
  createLocalJWKSet(jwks); // throws on a malformed set
  jwksCache.set(url, { jwks, fetchedAt: Date.now() });
  return jwks;
}

export interface ProxyIdentity {
  sub: string;
  email: string;
  name: string | null;
}

export class ProxyTokenError extends Error {}

/** A claim by dot path, own properties only (claims are attacker-shaped JSON). */
export function claimAt(payload: Record<string, unknown>, path: string): unknown {
  let cur: unknown = payload;
  for (const part of path.split(".")) {
    if (cur === null || typeof cur !== "object" || Array.isArray(cur) || !Object.hasOwn(cur, part)) {
      return undefined;
    }
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

export function identityFromClaims(payload: JWTPayload, mappings: ClaimMappings): ProxyIdentity {
  const p = payload as Record<string, unknown>;
  const sub = claimAt(p, mappings.sub);
  const email = claimAt(p, mappings.email);
  const name = claimAt(p, mappings.name);
  if (typeof sub !== "string" || sub === "" || sub.length > 500) {
    throw new ProxyTokenError(`the token has no '${mappings.sub}' claim`);
  }
  if (typeof email !== "string" || !/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 320) {
    throw new ProxyTokenError(`the token has no valid '${mappings.email}' claim`);
  }
  return {
    sub,
    email: email.trim(),
    name: typeof name === "string" && name.trim() !== "" ? name.trim().slice(0, 200) : null,
  };
}

/** True when the token is one of netmon's own (HMAC-signed API/access tokens), not a gateway's. */
export function isNetmonToken(token: string): boolean {
  try {
    return decodeProtectedHeader(token).alg?.startsWith("HS") === true;
  } catch {
    return false;
  }
}

export async function verifyProxyToken(
  ctx: AppContext,
  settings: ProxyVerification,
  token: string,
): Promise<ProxyIdentity> {
  const options = {
    algorithms: [...PROXY_ALGORITHMS],
    clockTolerance: CLOCK_TOLERANCE_S,
    ...(settings.proxyIssuer ? { issuer: settings.proxyIssuer } : {}),
    ...(settings.proxyAudience ? { audience: settings.proxyAudience } : {}),
  };
  let payload: JWTPayload;
  try {
    if (settings.proxyJwksUrl) {
      const url = settings.proxyJwksUrl;
      try {
        payload = (await jwtVerify(token, createLocalJWKSet(await fetchJwks(ctx, url)), options)).payload;
      } catch (err) {
        // Key rotation: a key id the cached set lacks refetches the set (rate-limited).
        const hit = jwksCache.get(url);
        if (!(err instanceof errors.JWKSNoMatchingKey) || (hit && Date.now() - hit.fetchedAt < REFETCH_MS))
          throw err;
        payload = (
          await jwtVerify(token, createLocalJWKSet(await fetchJwks(ctx, url, { force: true })), options)
        ).payload;
      }
    } else if (settings.proxyPublicKeyPem) {
      const key: KeyObject = createPublicKey(settings.proxyPublicKeyPem);
      payload = (await jwtVerify(token, key, options)).payload;
    } else {
      throw new ProxyTokenError("verification is not configured");
    }
  } catch (err) {
    if (err instanceof ProxyTokenError) throw err;
    throw new ProxyTokenError(describeJoseError(err));
  }
  return identityFromClaims(payload, settings.claimMappings);
}

function describeJoseError(err: unknown): string {
  if (err instanceof errors.JWTExpired) return "the token has expired";
  if (err instanceof errors.JWTClaimValidationFailed) return `claim check failed (${err.claim})`;
  if (err instanceof errors.JOSEAlgNotAllowed) return "the token's algorithm is not accepted";
  if (err instanceof errors.JWSSignatureVerificationFailed) return "the signature does not verify";
  if (err instanceof errors.JWKSNoMatchingKey) return "no key of the key set matches the token";
  if (err instanceof errors.JOSEError) return `invalid token (${err.code})`;
  return `the token could not be verified (${(err as Error).message})`;
}
