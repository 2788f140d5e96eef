import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";
import { startTestServer } from "../helpers/server.ts";

/** `netmon notifications channel …` against a real database, then the v2 list over HTTP. */
describe("netmon notifications CLI", () => {
  let ws: CliWorkspace;
  let dir: string;
  let dbUrl: string | null = null;
  const netmon = (...args: string[]) => ws.netmon(...args);

  beforeAll(async () => {
    ws = await cliWorkspace("netmon-alerting-cli", 60000);
    ({ dir, dbUrl } = ws);
  });
  afterAll(() => {
    ws?.cleanup();
  });

  it("creates webhook and email channels, rejects bad input, and the API lists them without secrets", async () => {
    fs.writeFileSync(path.join(dir, "hook.secret"), "hook-secret-value\n");
    const hook = await netmon(
      "notifications",
      "channel",
      "create",
      "--name",
      "ops-hook",
      "--provider",
      "webhook",
      "--url",
      "http://127.0.0.1:9/hook",
      "--header",
      "X-Team=ops",
      "--secret-file",
      path.join(dir, "hook.secret"),
    );
    expect(hook.code).toBe(0);
    expect(hook.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);
    const mail = await netmon(
      "notifications",
      "channel",
      "create",
      "--name",
      "oncall-mail",
      "--provider",
      "email",
      "--to",
      "a@example.test",
      "--to",
      "b@example.test",
      "--smtp-host",
      "127.0.0.1",
      "--smtp-port",
      "2525",
    );
    expect(mail.code).toBe(0);
    const bad = await netmon(
      "notifications",
      "channel",
      "create",
      "--name",
      "bad",
      "--provider",
      "webhook",
      "--url",
      "ftp://x",
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("config.url");
    expect((await netmon("notifications", "channel", "disable", mail.stdout.trim())).code).toBe(0);
    const list = await netmon("notifications", "channel", "list");
    expect(list.stdout).toContain("ops-hook\twebhook\tenabled");
    expect(list.stdout).toContain("oncall-mail\temail\tdisabled");

    const db =
      dbUrl !== null
        ? await PostgresDb.open({ connectionString: dbUrl, poolSize: 3 })
        : await PgliteDb.open({ dataDir: path.join(dir, "pg") });
    const server = await startTestServer({
      db,
      dbUrl,
      env: { NETMON_SECRET_KEY_FILE: path.join(dir, "secret.key") },
    });
    try {
      const token = await tokenFor(server, "admin");
      const res = await server.fetch("/api/v2/notification-channels", {
        headers: { ...authHeaders(token), accept: "application/vnd.api+json" },
      });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).not.toContain("hook-secret-value");
      const data = JSON.parse(text).data as { id: string; attributes: Record<string, unknown> }[];
      expect(data.map((c) => c.attributes.name)).toEqual(["oncall-mail", "ops-hook"]);
      expect(data.find((c) => c.attributes.name === "ops-hook")?.attributes).toMatchObject({
        provider: "webhook",
        config: { url: "http://127.0.0.1:9/hook", headers: { "X-Team": "ops" } },
      });
    } finally {
      await server.stop();
      await db.close();
    }
  }, 240_000);
});
