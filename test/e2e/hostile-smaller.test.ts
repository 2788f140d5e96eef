import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SESSION_COOKIE } from "../../src/access/sessions.ts";
import { authHeaders, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** Issue 10 item 9: the smaller holes. */
describe("smaller hardening", () => {
  let server: TestServer;
  let operator: string;

  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_AUTH_FAILURES: "5/2s" } });
    operator = await tokenFor(server, "operator");
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("budgets failed authentications per IP on their own, never charging api_default", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await server.fetch("/api/v2/devices", {
        headers: { authorization: `Bearer not-a-token-${i}` },
      });
      statuses.push(res.status);
      if (res.status === 429) expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.slice(5)).toEqual([429, 429, 429]);
    // The budget is for guessing: once its window has passed, a valid credential from the same
    // IP is served, and the 401s and 429s above never touched its api_default budget.
    await new Promise((r) => setTimeout(r, 2200));
    const ok = await server.fetch("/api/v2/devices", { headers: authHeaders(operator) });
    expect(ok.status).toBe(200);
    expect(Number(ok.headers.get("x-ratelimit-remaining"))).toBe(
      Number(ok.headers.get("x-ratelimit-limit")) - 1,
    );
  });

  it("sends CSP, frame-ancestors and nosniff on HTML pages, with no inline script or style", async () => {
    const signedIn = authHeaders(await tokenFor(server, "viewer"));
    for (const path of ["/users/log-in", "/api/v2/swaggerui"]) {
      // Swagger UI needs authentication, like the document it loads (issue 20).
      const res = await server.fetch(path, { headers: path === "/users/log-in" ? {} : signedIn });
      expect(res.status, path).toBe(200);
      const csp = res.headers.get("content-security-policy") ?? "";
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(csp, path).toContain("script-src 'self'");
      expect(csp, path).not.toMatch(/script-src[^;]*unsafe-inline/);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("referrer-policy")).toBeTruthy();
      const html = await res.text();
      expect(html, path).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
      if (path === "/users/log-in") expect(html).not.toContain("<style");
    }
    const css = await server.fetch("/users/log-in.css");
    expect(css.status).toBe(200);
  });

  it("names the session cookie the server really sets in the OpenAPI document", async () => {
    const user = await createUser(server, { role: "viewer" });
    const form = new URLSearchParams({ email: user.email, password: user.password });
    const res = await server.fetch("/users/log-in", {
      method: "POST",
      headers: { "content-type": "application/json", origin: server.url },
      body: JSON.stringify(Object.fromEntries(form)),
      redirect: "manual",
    });
    const cookies = res.headers.getSetCookie().map((c) => c.split("=")[0]);
    expect(cookies).toContain(SESSION_COOKIE);
    const doc = (await (
      await server.fetch("/api/v2/open_api", { headers: authHeaders(operator) })
    ).json()) as {
      components: { securitySchemes: Record<string, { in?: string; name?: string }> };
    };
    const cookieScheme = Object.values(doc.components.securitySchemes).find((s) => s.in === "cookie");
    expect(cookieScheme?.name).toBe(SESSION_COOKIE);
  });

  it("does not let a caller set created_by on a gateway", async () => {
    const res = await server.fetch("/api/v2/gateways", {
      method: "POST",
      headers: {
        ...authHeaders(await tokenFor(server, "admin")),
        "content-type": "application/vnd.api+json",
      },
      body: JSON.stringify({
        data: { type: "gateway", id: "gw-forged", attributes: { created_by: "gateway:someone-else" } },
      }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: { source?: { pointer?: string } }[] };
    expect(body.errors[0]?.source?.pointer).toContain("created_by");
  });
});
