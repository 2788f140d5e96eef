/**
 * SAML 2.0 sign-in (spec 5, issue 17) with a test identity provider that signs real responses
 * with a real key (xml-crypto, RSA-SHA256): a valid one signs in (viewer provisioned, NameID as
 * external id); unsigned, wrongly signed, expired, wrong-audience and replayed ones are refused.
 * Also the IdP metadata handling of the settings API and the SP metadata and AuthnRequest.
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SignedXml } from "xml-crypto";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { selfSignedCert } from "../helpers/certs.ts";
import { freeTcpUdpPort } from "../helpers/ports.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

const IDP = "https://idp.example.test/saml";
const SSO = "https://idp.example.test/saml/sso";
let server: TestServer;
let admin: { authorization: string };
let metadataServer: http.Server;
let metadataUrl = "";
let idpKey = "";
let idpCert = "";
let attackerKey = "";
let attackerCert = "";
let sp = "";
let acs = "";

const bare = (pem: string) => pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");

function metadata(cert: string): string {
  return `<?xml version="1.0"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="${IDP}">
  <md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>${bare(cert)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${SSO}"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>`;
}

interface ResponseOpts {
  nameId: string;
  email?: string;
  audience?: string;
  /** Validity window relative to now, ms. */
  notBefore?: number;
  notOnOrAfter?: number;
  sign?: { key: string; cert: string } | null;
  assertionId?: string;
}

function samlResponse(o: ResponseOpts): string {
  const now = Date.now();
  const iso = (ms: number) => new Date(now + ms).toISOString();
  const aid = o.assertionId ?? `_a${randomUUID().replace(/-/g, "")}`;
  const until = iso(o.notOnOrAfter ?? 5 * 60_000);
  const xml = `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="_r${randomUUID().replace(/-/g, "")}" Version="2.0" IssueInstant="${iso(0)}" Destination="${acs}"><saml:Issuer>${IDP}</saml:Issuer><samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status><saml:Assertion ID="${aid}" Version="2.0" IssueInstant="${iso(0)}"><saml:Issuer>${IDP}</saml:Issuer><saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified">${o.nameId}</saml:NameID><saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData NotOnOrAfter="${until}" Recipient="${acs}"/></saml:SubjectConfirmation></saml:Subject><saml:Conditions NotBefore="${iso(o.notBefore ?? -60_000)}" NotOnOrAfter="${until}"><saml:AudienceRestriction><saml:Audience>${o.audience ?? sp}</saml:Audience></saml:AudienceRestriction></saml:Conditions><saml:AuthnStatement AuthnInstant="${iso(0)}" SessionIndex="_s1"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:Password</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement><saml:AttributeStatement>${
    o.email
      ? `<saml:Attribute Name="email"><saml:AttributeValue>${o.email}</saml:AttributeValue></saml:Attribute>`
      : ""
  }<saml:Attribute Name="displayName"><saml:AttributeValue>Sam L. User</saml:AttributeValue></saml:Attribute></saml:AttributeStatement></saml:Assertion></samlp:Response>`;
  const signer = o.sign === undefined ? { key: idpKey, cert: idpCert } : o.sign;
  if (!signer) return Buffer.from(xml).toString("base64");
  const sig = new SignedXml({
    privateKey: signer.key,
    publicCert: signer.cert,
    signatureAlgorithm: "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
    canonicalizationAlgorithm: "http://www.w3.org/2001/10/xml-exc-c14n#",
  });
  sig.addReference({
    xpath: "//*[local-name(.)='Assertion']",
    digestAlgorithm: "http://www.w3.org/2001/04/xmlenc#sha256",
    transforms: [
      "http://www.w3.org/2000/09/xmldsig#enveloped-signature",
      "http://www.w3.org/2001/10/xml-exc-c14n#",
    ],
  });
  sig.computeSignature(xml, {
    location: { reference: "//*[local-name(.)='Assertion']/*[local-name(.)='Issuer']", action: "after" },
  });
  return Buffer.from(sig.getSignedXml()).toString("base64");
}

const consume = (response: string, relay = "/alerts") =>
  server.fetch("/auth/saml/consume", {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://idp.example.test" },
    body: new URLSearchParams({ SAMLResponse: response, RelayState: relay }).toString(),
  });

const putSettings = (body: unknown) =>
  server.fetch("/api/admin/auth-settings", {
    method: "PUT",
    headers: { ...admin, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  ({ key: idpKey, cert: idpCert } = selfSignedCert("idp"));
  ({ key: attackerKey, cert: attackerCert } = selfSignedCert("attacker"));
  metadataServer = http.createServer((_req, res) => {
    res.setHeader("content-type", "application/samlmetadata+xml");
    res.end(metadata(idpCert));
  });
  await new Promise<void>((r) => metadataServer.listen(0, "127.0.0.1", r));
  metadataUrl = `http://127.0.0.1:${(metadataServer.address() as AddressInfo).port}/metadata`;
  const port = await freeTcpUdpPort();
  const base = `http://127.0.0.1:${port}`;
  sp = `${base}/auth/saml/metadata`;
  acs = `${base}/auth/saml/consume`;
  server = await startTestServer({ env: { PORT: String(port), NETMON_BASE_URL: base } });
  admin = authHeaders(await tokenFor(server, "admin"));
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => metadataServer.close(() => r()));
});

describe("SAML settings and metadata", () => {
  it("refuses the mode without usable IdP metadata, naming the member", async () => {
    for (const [body, member] of [
      [{ mode: "saml" }, "saml"],
      [{ mode: "saml", saml: { metadata_xml: "<not-xml" } }, "metadata_xml"],
      [
        {
          mode: "saml",
          saml: {
            metadata_xml: metadata(idpCert).replace(/<md:KeyDescriptor[\s\S]*<\/md:KeyDescriptor>/, ""),
          },
        },
        "metadata_xml",
      ],
      [{ mode: "saml", saml: { metadata_url: "http://127.0.0.1:1/metadata" } }, "metadata_url"],
      [{ saml: { entity: "x" } }, "entity"],
    ] as const) {
      const r = await putSettings(body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(422);
      expect(JSON.stringify(await r.json())).toContain(member);
    }
  });

  it("enables SAML from the IdP's metadata URL and publishes the SP metadata and AuthnRequest", async () => {
    const r = await putSettings({ mode: "saml", saml: { metadata_url: metadataUrl } });
    expect(r.status).toBe(200);
    const s = (await r.json()) as { saml: Record<string, unknown> };
    expect(s.saml).toMatchObject({
      idp_entry_point: SSO,
      idp_certificates: 1,
      acs_url: acs,
      sp_entity_id: sp,
    });
    const md = await server.fetch("/auth/saml/metadata");
    expect(md.status).toBe(200);
    const xml = await md.text();
    expect(xml).toContain(`entityID="${sp}"`);
    expect(xml).toContain(`Location="${acs}"`);
    const login = await server.fetch("/auth/saml/login?return_to=/devices", { redirect: "manual" });
    expect(login.status).toBe(302);
    const to = new URL(login.headers.get("location") as string);
    expect(`${to.origin}${to.pathname}`).toBe(SSO);
    expect(to.searchParams.get("SAMLRequest")).toBeTruthy();
    expect(to.searchParams.get("RelayState")).toBe("/devices");
    expect(await (await server.fetch("/users/log-in")).text()).toContain("/auth/saml/login");
  });
});

describe("SAML sign-in", () => {
  it("a signed assertion signs in: a viewer with the NameID as external id, and a session", async () => {
    const r = await consume(samlResponse({ nameId: "u-1001", email: "sam@corp.test" }), "/alerts");
    expect(r.status).toBe(303);
    expect(r.headers.get("location")).toBe("/alerts");
    const cookie = r.headers
      .getSetCookie()
      .map((c) => c.split(";")[0])
      .join("; ");
    const me = await server.fetch("/api/v1/me", { headers: { cookie } });
    expect(me.status).toBe(200);
    expect(JSON.stringify(await me.json())).toContain("sam@corp.test");
    const row = await server.db.one<Record<string, unknown>>(
      sql`SELECT role, external_id, external_provider, last_auth_method FROM users WHERE email = 'sam@corp.test'`,
    );
    expect(row).toEqual({
      role: "viewer",
      external_id: "u-1001",
      external_provider: "saml",
      last_auth_method: "saml",
    });
  });

  it("refuses unsigned, wrongly signed, expired, wrong-audience, attribute-less and replayed responses", async () => {
    const cases: Record<string, string> = {
      unsigned: samlResponse({ nameId: "u-2", email: "mallory@corp.test", sign: null }),
      "signed by another key": samlResponse({
        nameId: "u-2",
        email: "mallory@corp.test",
        sign: { key: attackerKey, cert: attackerCert },
      }),
      expired: samlResponse({
        nameId: "u-2",
        email: "mallory@corp.test",
        notBefore: -3_600_000,
        notOnOrAfter: -600_000,
      }),
      "wrong audience": samlResponse({
        nameId: "u-2",
        email: "mallory@corp.test",
        audience: "https://other-sp.test",
      }),
      "no email attribute": samlResponse({ nameId: "u-2" }),
      "not base64 XML": Buffer.from("hello").toString("base64"),
    };
    for (const [what, response] of Object.entries(cases)) {
      const r = await consume(response);
      expect(r.status, what).toBe(401);
      expect(
        r.headers.getSetCookie().filter((c) => c.startsWith("netmon_session=")),
        what,
      ).toEqual([]);
    }
    expect(await server.db.many(sql`SELECT id FROM users WHERE email = 'mallory@corp.test'`)).toEqual([]);

    const once = samlResponse({ nameId: "u-3", email: "rita@corp.test" });
    expect((await consume(once)).status).toBe(303);
    const replay = await consume(once);
    expect(replay.status).toBe(401);
    expect(await replay.text()).toContain("already used");
  });

  it("refuses a disabled account", async () => {
    await server.db.query(sql`UPDATE users SET status = 'disabled' WHERE email = 'sam@corp.test'`);
    const r = await consume(samlResponse({ nameId: "u-1001", email: "sam@corp.test" }));
    expect(r.status).toBe(403);
  });
});
