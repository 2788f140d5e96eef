import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueControlPlaneToken } from "../../src/access/tokens.ts";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { authHeaders } from "../helpers/auth.ts";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * The CLI against a real database, then a real server on the same database and secret:
 * users created and tokens issued by the CLI work over HTTP.
 */
describe("netmon users / tokens CLI", () => {
  let ws: CliWorkspace;
  let dir: string;
  let env: Record<string, string>;
  let dbUrl: string | null = null;
  const netmon = (...args: string[]) => ws.netmon(...args);

  beforeAll(async () => {
    ws = await cliWorkspace("netmon-cli", 240000);
    ({ dir, env, dbUrl } = ws);
  });
  afterAll(() => {
    ws?.cleanup();
  });

  it("creates users, sets passwords and issues tokens that the server accepts", async () => {
    const created = await netmon(
      "users",
      "create",
      "--email",
      "ops@example.test",
      "--role",
      "operator",
      "--password",
      "first-password",
    );
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/created user ops@example.test .*role operator/);
    expect(created.stdout).not.toContain("first-password");

    const generated = await netmon("users", "create", "--email", "gen@example.test", "--role", "viewer");
    expect(generated.code).toBe(0);
    const genPassword = /password: (\S+)/.exec(generated.stdout)?.[1];
    expect(genPassword).toBeTruthy();

    const badRole = await netmon("users", "create", "--email", "x@example.test", "--role", "boss");
    expect(badRole.code).toBe(2);
    expect(badRole.stderr).toContain("role must be one of");

    expect(
      (await netmon("users", "set-password", "--email", "ops@example.test", "--password", "second-password"))
        .code,
    ).toBe(0);

    const tok = await netmon(
      "tokens",
      "create",
      "--user",
      "ops@example.test",
      "--scope",
      "mcp",
      "--scope",
      "read",
      "--ttl",
      "2d",
    );
    expect(tok.code).toBe(0);
    const token = tok.stdout.trim();
    expect(token.split(".")).toHaveLength(3);
    const claims = JSON.parse(Buffer.from(token.split(".")[1] as string, "base64url").toString()) as {
      scope: string;
      exp: number;
      iat: number;
    };
    expect(claims.scope).toBe("mcp read");
    expect(claims.exp - claims.iat).toBe(2 * 86400);

    const cp = await netmon("tokens", "create", "--control-plane", "gateway", "--name", "edge-1");
    expect(cp.code).toBe(0);
    const cpToken = cp.stdout.trim();

    // Serve the same database with the same secret.
    const db = dbUrl ? undefined : await PgliteDb.open({ dataDir: path.join(dir, "pg") });
    let server: TestServer | undefined;
    try {
      server = await startTestServer({
        db,
        env: {
          NETMON_SECRET_KEY_FILE: env.NETMON_SECRET_KEY_FILE as string,
          ...(dbUrl ? { DATABASE_URL: dbUrl } : {}),
        },
      });
      const me = await server.fetch("/api/v1/me", { headers: authHeaders(token) });
      expect(me.status).toBe(200);
      expect(((await me.json()) as { user: { email: string; role: string } }).user).toMatchObject({
        email: "ops@example.test",
        role: "operator",
      });
      const signIn = (email: string, password: string) =>
        server?.fetch("/users/log-in", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email, password }),
        });
      expect((await signIn("ops@example.test", "second-password"))?.status).toBe(200);
      expect((await signIn("ops@example.test", "first-password"))?.status).toBe(401);
      expect((await signIn("gen@example.test", genPassword as string))?.status).toBe(200);
      // The control-plane credential is a real, verifiable credential of kind gateway.
      const row = await server.db.one<{ kind: string; name: string }>(
        "SELECT kind, name FROM control_credentials",
      );
      expect(row).toEqual({ kind: "gateway", name: "edge-1" });
      expect((await server.fetch("/api/v1/me", { headers: authHeaders(cpToken) })).status).toBe(403);
      // And one issued in-process by another domain looks the same.
      const other = await issueControlPlaneToken(server.ctx, { kind: "agent", name: "a-1" });
      expect(other.token.split(".")).toHaveLength(3);
    } finally {
      await server?.stop();
      await db?.close();
    }
  }, 900_000);
});
