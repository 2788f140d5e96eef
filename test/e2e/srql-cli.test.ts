import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Db } from "../../src/storage/db.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { insertLogs } from "../../src/telemetry/write.ts";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";

/** `netmon query` against a real database seeded beforehand. */
describe("netmon query CLI", () => {
  let ws: CliWorkspace;
  let dir: string;
  const netmon = (...args: string[]) => ws.netmon(...args);

  beforeAll(async () => {
    ws = await cliWorkspace("netmon-srql-cli", 60_000);
    ({ dir } = ws);
    let db: Db;
    if (ws.dbUrl) {
      db = await PostgresDb.open({ connectionString: ws.dbUrl, poolSize: 2 });
    } else {
      db = await PgliteDb.open({ dataDir: path.join(dir, "pg") });
      await migrate(db);
    }
    await insertLogs(db, [
      {
        timestamp: new Date(Date.now() - 60_000),
        severity_text: "ERROR",
        body: "disk failure",
        service_name: "core",
      },
      {
        timestamp: new Date(Date.now() - 120_000),
        severity_text: "INFO",
        body: "started",
        service_name: "core",
      },
      {
        timestamp: new Date(Date.now() - 180_000),
        severity_text: "ERROR",
        body: "timeout",
        service_name: "web",
      },
    ]);
    await db.close();
  });
  afterAll(() => {
    ws?.cleanup();
  });

  it("prints a table", async () => {
    const r = await netmon("query", "in:logs severity:ERROR sort:timestamp:desc");
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^id\s+trace_id/);
    expect(lines).toHaveLength(4);
    expect(lines[2]).toContain("disk failure");
    expect(lines[3]).toContain("timeout");
  });

  it("prints JSON with --json and honours --limit", async () => {
    const r = await netmon("query", "in:logs", "--json", "--limit", "2");
    expect(r.code).toBe(0);
    const body = JSON.parse(r.stdout) as {
      results: unknown[];
      pagination: { next_cursor: string | null; limit: number };
    };
    expect(body.results).toHaveLength(2);
    expect(body.pagination.limit).toBe(2);
    expect(body.pagination.next_cursor).toBeTruthy();
    const stats = await netmon("query", 'in:logs stats:"count() as n by service_name"', "--json");
    expect(JSON.parse(stats.stdout).results).toEqual([
      { service_name: "core", n: 2 },
      { service_name: "web", n: 1 },
    ]);
  });

  it("reports invalid queries on stderr with exit code 1", async () => {
    const r = await netmon("query", "in:logs severty:error");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("unsupported filter field 'severty' for logs");
    expect(r.stderr).toContain("position 9");
  });
});
