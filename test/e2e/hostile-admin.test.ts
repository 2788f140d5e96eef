import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bootstrapAdmin } from "../../src/access/bootstrap.ts";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** Issue 10 item 6: the instance never loses its last active admin. */
describe("the last active admin", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ env: { SERVICE_ADMIN_PASSWORD: "bootstrap-password-1" } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function call(token: string, method: string, path: string, body?: unknown) {
    const res = await server.fetch(path, {
      method,
      headers: { ...authHeaders(token), ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it("cannot be demoted or deactivated, by itself or another admin, and says why (409)", async () => {
    // Only the bootstrap admin and one more admin exist.
    const boot = await server.db.one<{ id: string }>(
      sql`SELECT id FROM users WHERE email = 'admin@localhost'`,
    );
    const second = await createUser(server, { role: "admin" });
    const secondToken = await tokenFor(server, { id: second.id });
    // Two admins: one may go.
    const off = await call(secondToken, "POST", `/api/admin/users/${boot?.id}/deactivate`);
    expect(off.status).toBe(200);
    // Now `second` is the last active admin: demoting itself is refused.
    const demote = await call(secondToken, "PATCH", `/api/admin/users/${second.id}`, { role: "operator" });
    expect(demote.status).toBe(409);
    expect(demote.body.error).toBe("last_admin");
    const still = await server.db.one<{ role: string }>(sql`SELECT role FROM users WHERE id = ${second.id}`);
    expect(still?.role).toBe("admin");
    // Reactivating the other admin makes a demotion possible again.
    expect((await call(secondToken, "POST", `/api/admin/users/${boot?.id}/reactivate`)).status).toBe(200);
    expect(
      (await call(secondToken, "PATCH", `/api/admin/users/${second.id}`, { role: "operator" })).status,
    ).toBe(200);
  });

  it("is restored by SERVICE_ADMIN_PASSWORD when none is left", async () => {
    await server.db.query(sql`UPDATE users SET role = 'viewer' WHERE role = 'admin'`);
    expect(await bootstrapAdmin(server.ctx)).toBe("restored");
    const row = await server.db.one<{ role: string; status: string }>(
      sql`SELECT role, status FROM users WHERE email = 'admin@localhost'`,
    );
    expect(row).toEqual({ role: "admin", status: "active" });
  });
});
