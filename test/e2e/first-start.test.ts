import fs from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** A first start with nothing configured leaves a way in: a generated admin password in a 0600 file. */
let server: TestServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

describe("first start", () => {
  it("creates admin@localhost with a generated password in a private file, never in the log", async () => {
    server = await startTestServer({ env: { NETMON_INITIAL_ADMIN: "true" } });
    const file = path.join(server.dataDir, "initial-admin-password");
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const password = fs.readFileSync(file, "utf8").trim();
    expect(password.length).toBeGreaterThanOrEqual(20);
    expect(server.logs.join("\n")).not.toContain(password);
    expect(server.logs.some((l) => l.includes("initial-admin-password"))).toBe(true);

    const page = await (await server.fetch("/users/log-in")).text();
    expect(page).toContain("First start");
    expect(page).toContain(file);
    const res = await server.fetch("/users/log-in", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "admin@localhost", password }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { user: { role: string } }).user.role).toBe("admin");

    // Once the operator deletes the file, the sign-in page stops pointing at it.
    fs.rmSync(file);
    expect(await (await server.fetch("/users/log-in")).text()).not.toContain("First start");
  });

  it("generates nothing when the operator chose a password", async () => {
    server = await startTestServer({
      env: { NETMON_INITIAL_ADMIN: "true", SERVICE_ADMIN_PASSWORD: "chosen-by-the-operator" },
    });
    expect(fs.existsSync(path.join(server.dataDir, "initial-admin-password"))).toBe(false);
  });
});
