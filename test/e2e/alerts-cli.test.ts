import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { triggerAlert } from "../../src/alerting/actions.ts";
import type { Db } from "../../src/storage/db.ts";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * `netmon alerts …` against a real database: the queue listed and changed from a terminal,
 * through the same actions as the API (the v2 API then shows what the CLI did).
 */
describe("netmon alerts CLI", () => {
  let ws: CliWorkspace;
  const netmon = (...args: string[]) => ws.netmon(...args);
  const ids: Record<string, string> = {};

  /** A server on the workspace's database for the duration of `fn` (PGlite has one owner). */
  async function withServer<T>(fn: (s: TestServer) => Promise<T>): Promise<T> {
    const db: Db =
      ws.dbUrl !== null
        ? await PostgresDb.open({ connectionString: ws.dbUrl, poolSize: 3 })
        : await PgliteDb.open({ dataDir: path.join(ws.dir, "pg") });
    const server = await startTestServer({
      db,
      dbUrl: ws.dbUrl,
      env: { NETMON_SECRET_KEY_FILE: path.join(ws.dir, "secret.key") },
    });
    try {
      return await fn(server);
    } finally {
      await server.stop();
      await db.close();
    }
  }

  beforeAll(async () => {
    ws = await cliWorkspace("netmon-alerts-cli", 60_000);
    expect((await netmon("migrate")).code).toBe(0);
    await withServer(async (s) => {
      for (const [key, severity] of [
        ["disk", "warning"],
        ["core", "critical"],
        ["info", "info"],
      ] as const) {
        const a = await triggerAlert(s.ctx, SYSTEM_ACTOR, {
          title: `${key} alert`,
          severity,
          device_uid: `sr:${key}`,
        });
        ids[key] = a.id;
      }
    });
  }, 180_000);
  afterAll(() => {
    ws?.cleanup();
  });

  it("lists open alerts, filtered by severity, one tab-separated line each", async () => {
    const all = await netmon("alerts", "list");
    expect(all.code).toBe(0);
    const lines = all.stdout.trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines.map((l) => l.split("\t")[0]).sort()).toEqual(Object.values(ids).sort());
    const critical = await netmon("alerts", "list", "--severity", "critical,warning");
    expect(
      critical.stdout
        .trim()
        .split("\n")
        .map((l) => l.split("\t").slice(1, 3)),
    ).toEqual(
      expect.arrayContaining([
        ["critical", "pending"],
        ["warning", "pending"],
      ]),
    );
    expect(critical.stdout).not.toContain("info alert");
  });

  it("acknowledges and resolves through the alert's actions, recording who did it", async () => {
    const ack = await netmon("alerts", "ack", ids.core as string, "--note", "on it");
    expect(ack.code).toBe(0);
    expect(ack.stdout).toContain("\tacknowledged\t");
    const show = await netmon("alerts", "show", ids.core as string);
    expect(show.stdout).toMatch(/acknowledged:\s+\S+ by cli:/);
    expect(show.stdout).toMatch(/note:\s+on it/);

    const resolved = await netmon(
      "alerts",
      "resolve",
      ids.disk as string,
      "--by",
      "alice",
      "--note",
      "disk swapped",
    );
    expect(resolved.code).toBe(0);
    // A resolved alert cannot be acknowledged: the action's transition check answers.
    const again = await netmon("alerts", "ack", ids.disk as string);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^error: .*resolved/m);

    expect((await netmon("alerts", "list")).stdout).not.toContain(ids.disk);
    expect((await netmon("alerts", "list", "--all")).stdout).toContain(ids.disk);

    await withServer(async (s) => {
      const token = await tokenFor(s, "admin");
      const res = await s.fetch(`/api/v2/alerts/${ids.disk}`, {
        headers: { ...authHeaders(token), accept: "application/vnd.api+json" },
      });
      expect(res.status).toBe(200);
      const attrs = ((await res.json()) as { data: { attributes: Record<string, unknown> } }).data.attributes;
      expect(attrs).toMatchObject({
        status: "resolved",
        resolved_by: "alice",
        resolution_note: "disk swapped",
      });
    });
  });

  it("suppresses for a while and reopens", async () => {
    const before = Date.now();
    const s = await netmon("alerts", "suppress", ids.info as string, "--for", "2h");
    expect(s.code).toBe(0);
    const shown = await netmon("alerts", "show", ids.info as string);
    const until = /suppressed until:\s+(\S+)/.exec(shown.stdout)?.[1];
    expect(Date.parse(until as string) - before).toBeGreaterThanOrEqual(2 * 3600_000 - 1000);
    expect((await netmon("alerts", "reopen", ids.info as string)).stdout).toContain("\tpending\t");
  });

  it("refuses bad input with a usage message, never a stack trace", async () => {
    for (const [args, want] of [
      [["alerts", "list", "--status", "open"], /--status must be one of/],
      [["alerts", "list", "--limit", "0"], /--limit must be an integer/],
      [["alerts", "suppress", ids.core as string, "--for", "soon"], /--for must be a duration/],
      [["alerts", "suppress", ids.core as string, "--for", "999999999999d"], /--for must give a time/],
      [
        ["alerts", "suppress", ids.core as string, "--until", "+275760-09-13T00:00:00Z"],
        /--until must give a time/,
      ],
      [["alerts", "show", "not-an-id"], /no alert not-an-id/],
      [["alerts", "show", "00000000-0000-4000-8000-000000000000"], /no alert/],
      [["alerts", "frobnicate", "x"], /unknown action/],
    ] as const) {
      const r = await netmon(...args);
      expect(r.code, args.join(" ")).not.toBe(0);
      expect(r.stderr).toMatch(want);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
  });
});
