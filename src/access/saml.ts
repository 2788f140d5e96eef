/**
 * SAML 2.0 sign-in (spec 5, issue 17): netmon as a service provider, by `@node-saml/node-saml`.
 * The identity provider comes from its metadata (a URL fetched through the outbound guard, or
 * pasted XML): its HTTP-Redirect sign-on URL and signing certificates. Assertions must be signed
 * by one of those certificates, addressed to this SP (audience), within their validity (60 s
 * clock skew); each assertion id is accepted once (remembered until it expires).
 */

import { createRequire } from "node:module";
import type { Profile, SAML } from "@node-saml/node-saml";
import type { AppContext } from "../kernel/context.ts";
import { guardedRequest } from "../kernel/net/guarded-request.ts";
import { outboundPolicyFor } from "../kernel/net/outbound-policy.ts";
import { sql } from "../storage/sql.ts";
import { type ClaimMappings, claimAt } from "./proxy-jwt.ts";

export const SAML_CLOCK_SKEW_MS = 60_000;
/** How long a used assertion id is remembered when the assertion names no expiry. */
const DEFAULT_REPLAY_WINDOW_MS = 60 * 60_000;

export class SamlError extends Error {}

export interface IdpDescription {
  entryPoint: string;
  certs: string[];
}

export interface SamlSpSettings {
  spEntityId: string;
  idp: IdpDescription;
}

// @xmldom/xmldom is loaded without its type declarations: they pull the DOM lib into the whole
// program (changing fetch's types everywhere). The few members used are typed here.
interface XNode {
  nodeType: number;
  localName: string | null;
  namespaceURI: string | null;
  textContent: string | null;
  childNodes: { length: number; [i: number]: XNode };
  getAttribute(name: string): string | null;
  hasAttribute(name: string): boolean;
}
const { DOMParser } = createRequire(import.meta.url)("@xmldom/xmldom") as {
  DOMParser: new (opts: {
    errorHandler: {
      error: (m: string) => void;
      fatalError: (m: string) => void;
      warning?: (m: string) => void;
    };
  }) => { parseFromString(xml: string, type: string): { documentElement: XNode | null } };
};
const MD = "urn:oasis:names:tc:SAML:2.0:metadata";
const DS = "http://www.w3.org/2000/09/xmldsig#";

function descendants(node: XNode, ns: string, name: string, out: XNode[] = []): XNode[] {
  for (let i = 0; i < node.childNodes.length; i++) {
    const c = node.childNodes[i] as XNode;
    if (c.nodeType !== 1) continue;
    if (c.namespaceURI === ns && c.localName === name) out.push(c);
    descendants(c, ns, name, out);
  }
  return out;
}

/** The IdP's sign-on URL and signing certificates from its metadata XML. */
export function parseIdpMetadata(xml: string): IdpDescription {
  if (xml.length > 1_000_000) throw new SamlError("the metadata is larger than 1 MB");
  const problems: string[] = [];
  let root: XNode | null = null;
  try {
    root = new DOMParser({
      errorHandler: {
        error: (m) => problems.push(m),
        fatalError: (m) => problems.push(m),
        warning: () => undefined,
      },
    }).parseFromString(xml, "text/xml").documentElement;
  } catch (err) {
    throw new SamlError(`the metadata is not XML: ${(err as Error).message}`);
  }
  if (problems.length > 0 || !root) {
    const first = (problems[0] ?? "empty").replace(/^\[xmldom [a-z]+\]\s*/i, "").split("\n")[0];
    throw new SamlError(`the metadata is not XML (${first})`);
  }
  const idps =
    root.namespaceURI === MD && root.localName === "IDPSSODescriptor"
      ? [root]
      : descendants(root, MD, "IDPSSODescriptor");
  const idp = idps[0];
  if (!idp) throw new SamlError("the metadata has no IDPSSODescriptor");
  const entryPoint = descendants(idp, MD, "SingleSignOnService")
    .find((n) => n.getAttribute("Binding") === "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect")
    ?.getAttribute("Location");
  if (!entryPoint)
    throw new SamlError("the metadata names no HTTP-Redirect SingleSignOnService of an IDPSSODescriptor");
  const certs = descendants(idp, MD, "KeyDescriptor")
    .filter((k) => !k.hasAttribute("use") || k.getAttribute("use") === "signing")
    .flatMap((k) => descendants(k, DS, "X509Certificate"))
    .map((n) => (n.textContent ?? "").replace(/\s+/g, ""))
    .filter((c) => c !== "");
  if (certs.length === 0) throw new SamlError("the metadata names no signing certificate (X509Certificate)");
  return { entryPoint, certs };
}

export async function fetchIdpMetadata(ctx: AppContext, url: string): Promise<string> {
  const res = await guardedRequest(outboundPolicyFor(ctx), url, {
    method: "GET",
    headers: {
      accept: "application/samlmetadata+xml, application/xml, text/xml",
      "user-agent": "netmon-auth/1",
    },
    timeoutMs: 10_000,
    maxBody: 1024 * 1024,
  });
  if (res.status !== 200) throw new SamlError(`the metadata URL answered ${res.status}`);
  return res.body;
}

/** The library, loaded on first use: most servers never sign anyone in by SAML (docs/decisions/0112). */
function samlLib(): typeof import("@node-saml/node-saml") {
  return createRequire(import.meta.url)("@node-saml/node-saml") as typeof import("@node-saml/node-saml");
}

function saml(ctx: AppContext, s: SamlSpSettings): SAML {
  const { SAML } = samlLib();
  return new SAML({
    callbackUrl: `${ctx.config.baseUrl}/auth/saml/consume`,
    entryPoint: s.idp.entryPoint,
    issuer: s.spEntityId,
    audience: s.spEntityId,
    idpCert: s.idp.certs,
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: false,
    acceptedClockSkewMs: SAML_CLOCK_SKEW_MS,
    // Replay protection is by assertion id in the database (shared by replicas); the library's
    // InResponseTo cache is per process, so IdP-initiated and cross-replica logins would fail it.
    validateInResponseTo: "never" as never,
    identifierFormat: null,
    disableRequestedAuthnContext: true,
  });
}

export function spMetadata(ctx: AppContext, spEntityId: string): string {
  const { SAML } = samlLib();
  const sp = new SAML({
    callbackUrl: `${ctx.config.baseUrl}/auth/saml/consume`,
    issuer: spEntityId,
    idpCert: "unused-for-metadata",
    wantAssertionsSigned: true,
  });
  return sp.generateServiceProviderMetadata(null, null);
}

export async function samlLoginUrl(ctx: AppContext, s: SamlSpSettings, returnTo: string): Promise<string> {
  return saml(ctx, s).getAuthorizeUrlAsync(returnTo, undefined, {});
}

export interface SamlIdentity {
  sub: string;
  email: string;
  name: string | null;
}

/** Validate a posted SAMLResponse; throws SamlError for anything not to be trusted. */
export async function consumeSamlResponse(
  ctx: AppContext,
  s: SamlSpSettings,
  mappings: ClaimMappings,
  samlResponse: string,
): Promise<SamlIdentity> {
  let profile: Profile | null;
  try {
    profile = (await saml(ctx, s).validatePostResponseAsync({ SAMLResponse: samlResponse })).profile;
  } catch (err) {
    throw new SamlError(`the SAML response is not valid: ${(err as Error).message}`);
  }
  if (!profile) throw new SamlError("the SAML response carries no assertion");
  const assertionXml = profile.getAssertionXml?.() ?? "";
  const id = /\bID="([^"]{1,200})"/.exec(assertionXml)?.[1];
  if (!id) throw new SamlError("the assertion has no ID");
  const until = /NotOnOrAfter="([^"]+)"/.exec(assertionXml)?.[1];
  const expires =
    until && !Number.isNaN(Date.parse(until)) ? new Date(Date.parse(until) + SAML_CLOCK_SKEW_MS) : null;
  const now = ctx.now();
  await ctx.db.query(sql`DELETE FROM saml_assertions WHERE expires_at < ${now}`);
  const fresh = await ctx.db.one(sql`
    INSERT INTO saml_assertions (id, expires_at)
    VALUES (${`${profile.issuer}\n${id}`}, ${expires ?? new Date(now.getTime() + DEFAULT_REPLAY_WINDOW_MS)})
    ON CONFLICT (id) DO NOTHING RETURNING id`);
  if (!fresh) throw new SamlError("this assertion was already used (replayed)");
  const attrs = profile as unknown as Record<string, unknown>;
  const pick = (path: string) => {
    const v = claimAt(attrs, path);
    return Array.isArray(v) ? v[0] : v;
  };
  const sub = mappings.sub === "sub" ? profile.nameID : pick(mappings.sub);
  const email = pick(mappings.email) ?? profile.email ?? profile.mail;
  const name = pick(mappings.name);
  if (typeof sub !== "string" || sub === "") throw new SamlError("the assertion has no subject (NameID)");
  if (typeof email !== "string" || !/^[^\s@]+@[^\s@]+$/.test(email)) {
    throw new SamlError(`the assertion carries no '${mappings.email}' attribute`);
  }
  return {
    sub,
    email: email.trim(),
    name: typeof name === "string" && name.trim() ? name.trim().slice(0, 200) : null,
  };
}
