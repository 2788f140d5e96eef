import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

describe("credentials never reach the logs", () => {
  const bootstrapPassword = "Bootstrap-Secret-9f3a";
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      env: { SERVICE_ADMIN_PASSWORD: bootstrapPassword, NETMON_LOG_LEVEL: "trace" },
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("no password, token, API key, session or CSRF value appears in any log line", async () => {
    const secrets: string[] = [bootstrapPassword];
    {
      const json = (body: unknown, headers: Record<string, string> = {}) => ({
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });
      // Sign-ins: good, bad, and through the query string by mistake.
      const login = await server.fetch(
        "/users/log-in",
        json({ email: "admin@localhost", password: bootstrapPassword }),
      );
      expect(login.status).toBe(200);
      const { csrf_token } = (await login.json()) as { csrf_token: string };
      const session = login.headers
        .getSetCookie()
        .find((c) => c.startsWith("netmon_session="))
        ?.split(";")[0]
        ?.split("=")[1] as string;
      secrets.push(csrf_token, session);
      await server.fetch(
        "/users/log-in",
        json({ email: "admin@localhost", password: "Wrong-Password-77aa" }),
      );
      secrets.push("Wrong-Password-77aa");
      await server.fetch(`/users/log-in?password=${encodeURIComponent("Query-Password-5b5b")}`, json({}));
      secrets.push("Query-Password-5b5b");
      const form = new URLSearchParams({ email: "x@example.test", password: "Form-Password-6c6c" });
      await server.fetch("/users/log-in", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: form,
      });
      secrets.push("Form-Password-6c6c");

      // Session-authenticated request with CSRF header.
      const cookie = `netmon_session=${session}`;
      const created = await server.fetch(
        "/api/v1/api-credentials",
        json({ name: "logged?" }, { cookie, "x-csrf-token": csrf_token }),
      );
      expect(created.status).toBe(201);
      const apiToken = ((await created.json()) as { token: string }).token;
      secrets.push(apiToken);

      // Admin creates a user with a password and an API key.
      const adminToken = await tokenFor(server, "admin");
      secrets.push(adminToken);
      await server.fetch(
        "/api/admin/users",
        json({ email: "new@example.test", password: "NewUser-Password-8d8d" }, authHeaders(adminToken)),
      );
      secrets.push("NewUser-Password-8d8d");
      const keyRes = await server.fetch("/api/admin/api-keys", json({ name: "k" }, authHeaders(adminToken)));
      const apiKey = ((await keyRes.json()) as { key: string }).key;
      secrets.push(apiKey);

      // Use every credential, valid and invalid, including a token in the query string.
      await server.fetch("/api/v1/me", { headers: authHeaders(apiToken) });
      await server.fetch("/api/v1/me", { headers: { "x-api-key": apiKey } });
      await server.fetch("/api/v1/me", { headers: authHeaders(`${apiToken}x`) });
      await server.fetch(`/api/v1/me?token=${apiToken}&api_key=${apiKey}`);
      const user = await createUser(server, { role: "viewer" });
      secrets.push(user.password);
      await server.fetch("/users/log-in", json({ email: user.email, password: user.password }));

      // Something was logged at all (the test would be vacuous otherwise).
      expect(server.logs.length).toBeGreaterThan(20);
      expect(server.logs.some((l) => l.includes("/api/v1/me"))).toBe(true);
      for (const secret of secrets) {
        const hits = server.logs.filter((l) => l.includes(secret));
        expect(hits, `secret ${secret.slice(0, 6)}… leaked`).toEqual([]);
      }
      // Nor any password hash.
      expect(server.logs.some((l) => l.includes("$argon2id$"))).toBe(false);
    }
  }, 120_000);
});
