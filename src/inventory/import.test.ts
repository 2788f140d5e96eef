import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import type { DeviceRow } from "./device.ts";
import { ImportValidationError, importDevicesFile, parseCsvLine } from "./import.ts";
import { testContext } from "./testing/context.ts";

let db: Db;
let dir: string;
beforeEach(async () => {
  db = (await createTestDatabase()).db;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-import-"));
});
afterEach(async () => {
  await db.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("netmon devices import", () => {
  it("parses quoted CSV cells", () => {
    expect(parseCsvLine('a,"b,c","d ""q""",')).toEqual(["a", "b,c", 'd "q"', ""]);
  });

  it("imports CSV through ingestion, with metadata columns, defaults and progress", async () => {
    const file = path.join(dir, "devices.csv");
    const rows = ["ip,mac,hostname,is_available,rack"];
    for (let i = 0; i < 2500; i++)
      rows.push(`10.70.${i >> 8}.${i & 255},,host-${i},${i % 2 ? "true" : "false"},r${i % 5}`);
    rows.push('10.70.0.0,00:11:22:33:44:99,"host-0, renamed",true,r0');
    fs.writeFileSync(file, `${rows.join("\n")}\n`);
    const progress: number[] = [];
    const ctx = testContext(db);
    const res = await importDevicesFile(ctx, file, {
      source: "csv-import",
      onProgress: (d) => progress.push(d),
    });
    expect(res).toEqual({
      rows: 2501,
      created: 2500,
      updated: 1,
      batches: 3,
      unknown_fields: {},
      metadata_columns: ["rack"],
    });
    expect(progress).toEqual([0, 1000, 2000, 2501]);
    const d = await db.one<DeviceRow>(sql`SELECT * FROM devices WHERE ip = '10.70.0.0'`);
    expect(d).toMatchObject({
      hostname: "host-0, renamed",
      mac: "00:11:22:33:44:99",
      is_available: true,
      discovery_sources: ["csv-import"],
    });
    expect(d?.metadata).toEqual({ rack: "r0" });
  });

  it("imports JSON lines and refuses a file with an invalid row, writing nothing", async () => {
    const good = path.join(dir, "good.jsonl");
    fs.writeFileSync(
      good,
      `${JSON.stringify({ ip: "10.71.0.1", source: "x" })}\n\n${JSON.stringify({ ip: "10.71.0.2" })}\n`,
    );
    const ctx = testContext(db);
    expect(await importDevicesFile(ctx, good, { source: "jl" })).toMatchObject({ rows: 2, created: 2 });
    // Members netmon does not know are reported, never silently dropped (issue 13).
    const extra = path.join(dir, "extra.jsonl");
    fs.writeFileSync(
      extra,
      `${JSON.stringify({ ip: "10.71.0.3", hostnme: "typo", serial: "S1" })}\n${JSON.stringify({ ip: "10.71.0.4", hostnme: "t2" })}\n`,
    );
    expect((await importDevicesFile(ctx, extra, { source: "jl" })).unknown_fields).toEqual({
      hostnme: 2,
      serial: 1,
    });
    const bad = path.join(dir, "bad.jsonl");
    fs.writeFileSync(
      bad,
      `${JSON.stringify({ ip: "10.72.0.1" })}\nnot json\n${JSON.stringify({ ip: "10.72.0.300" })}\n`,
    );
    const err = await importDevicesFile(ctx, bad, { source: "jl" }).catch((e) => e);
    expect(err).toBeInstanceOf(ImportValidationError);
    expect((err as ImportValidationError).lineErrors.map((e) => [e.line, e.error])).toEqual([
      [2, "invalid_update"],
      [3, "invalid_ip"],
    ]);
    const n = await db.one<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM devices WHERE ip LIKE '10.72.%'`,
    );
    expect(n?.n).toBe(0);
  });
});
