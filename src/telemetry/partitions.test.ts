import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, testBackend } from "../../test/helpers/database.ts";
import { waitFor } from "../../test/helpers/wait.ts";
import type { Db } from "../storage/db.ts";
import { loadMigrations, migrate } from "../storage/migrate.ts";
import { sql } from "../storage/sql.ts";
import {
  dropExpiredPartitions,
  ensureTelemetryPartitions,
  listPartitions,
  PARTITION_DAYS_AHEAD,
  PARTITIONED_TABLES,
} from "./partitions.ts";
import { purgeExpiredTelemetry } from "./retention.ts";
import { insertLogs, insertServiceStatus } from "./write.ts";

const DAY = 86_400_000;
const HOUR = 3_600_000;
const dayName = (table: string, t: Date) => `${table}_p${t.toISOString().slice(0, 10).replaceAll("-", "")}`;
/** Noon UTC today: a day's boundaries are then 12 hours away on either side. */
const noon = new Date(`${new Date().toISOString().slice(0, 10)}T12:00:00Z`);
const at = (days: number, hours = 0) => new Date(noon.getTime() + days * DAY + hours * HOUR);

/** The partition holding the row `id` of `table`. */
async function home(db: Db, table: "logs" | "service_status", id: string): Promise<string | undefined> {
  const q =
    table === "logs"
      ? sql`SELECT tableoid::regclass::text AS p FROM logs WHERE id = ${id}`
      : sql`SELECT tableoid::regclass::text AS p FROM service_status WHERE id = ${id}`;
  return (await db.one<{ p: string }>(q))?.p;
}

describe("telemetry partitions (database)", () => {
  let db: Db;
  beforeAll(async () => {
    db = (await createTestDatabase()).db;
  });
  afterAll(async () => {
    await db?.close();
  });

  it("the migration partitions every raw table by day, with DEFAULT and (id, time) keys", async () => {
    for (const t of PARTITIONED_TABLES) {
      const parts = await listPartitions(db, t.table);
      expect(
        parts.filter((p) => p.isDefault).map((p) => p.name),
        t.table,
      ).toEqual([`${t.table}_default`]);
      const days = parts.filter((p) => !p.isDefault);
      expect(days.length, t.table).toBeGreaterThanOrEqual(4);
      for (const p of days) {
        expect(p.from?.getUTCHours(), p.name).toBe(0);
        expect((p.to?.getTime() ?? 0) - (p.from?.getTime() ?? 0), p.name).toBe(DAY);
      }
      const pk = await db.many<{ col: string }>(sql`
        SELECT a.attname AS col FROM pg_constraint k
        JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey)
        WHERE k.conrelid = to_regclass(${t.table}) AND k.contype = 'p' ORDER BY a.attname`);
      expect(pk.map((r) => r.col).sort(), t.table).toEqual(["id", t.column].sort());
    }
  });

  it("creates the coming days' partitions ahead, once", async () => {
    const { created, moved } = await ensureTelemetryPartitions(db, at(10));
    expect(moved).toEqual({});
    expect(created.length).toBe(PARTITIONED_TABLES.length * (PARTITION_DAYS_AHEAD + 2));
    expect(created).toContain(dayName("logs", at(10 + PARTITION_DAYS_AHEAD)));
    expect(created).toContain(dayName("service_status", at(9)));
    const names = (await listPartitions(db, "events")).map((p) => p.name);
    for (let d = 9; d <= 10 + PARTITION_DAYS_AHEAD; d++) expect(names).toContain(dayName("events", at(d)));
    expect((await ensureTelemetryPartitions(db, at(10))).created).toEqual([]);

    // A row of a day with a partition lands there, not in DEFAULT.
    const [id] = await insertLogs(db, [{ timestamp: at(11, 5), body: "ahead" }]);
    expect(await home(db, "logs", id as string)).toBe(dayName("logs", at(11)));
  });

  it("moves rows stranded in DEFAULT into the partition later created for their day", async () => {
    const ids = await insertLogs(db, [
      { timestamp: at(40, -3), body: "stranded 1" },
      { timestamp: at(40, 2), body: "stranded 2" },
      { timestamp: at(41, 1), body: "next day" },
    ]);
    for (const id of ids) expect(await home(db, "logs", id)).toBe("logs_default");

    const { created, moved } = await ensureTelemetryPartitions(db, at(40), { daysAhead: 0 });
    expect(created).toContain(dayName("logs", at(40)));
    expect(moved).toEqual({ [dayName("logs", at(40))]: 2 });
    expect(await home(db, "logs", ids[0] as string)).toBe(dayName("logs", at(40)));
    expect(await home(db, "logs", ids[1] as string)).toBe(dayName("logs", at(40)));
    // Outside the new partition's day: stays where it was.
    expect(await home(db, "logs", ids[2] as string)).toBe("logs_default");
    const bodies = await db.many<{ body: string }>(
      sql`SELECT body FROM logs WHERE body LIKE 'stranded%' OR body = 'next day' ORDER BY body`,
    );
    expect(bodies.map((b) => b.body)).toEqual(["next day", "stranded 1", "stranded 2"]);
    // The moved partition has the parent's indexes, like any other.
    const idx = await db.one<{ n: number }>(sql`
      SELECT count(*)::int AS n FROM pg_index WHERE indrelid = to_regclass(${dayName("logs", at(40))})`);
    const parentIdx = await db.one<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM pg_index WHERE indrelid = to_regclass('logs')`,
    );
    expect(idx?.n).toBe(parentIdx?.n);
  });

  it("retention drops wholly expired partitions and deletes the rest in batches", async () => {
    await ensureTelemetryPartitions(db, at(-40), { daysAhead: 0 }); // days -41 … -40
    await ensureTelemetryPartitions(db, at(-30), { daysAhead: 0 }); // days -31 … -30 (the cutoff falls in -30)
    const old = await insertLogs(db, [
      ...[-41, -40, -40].map((d) => ({ timestamp: at(d), body: "expired day" })),
      { timestamp: at(-30, -1), body: "expired hour" },
      { timestamp: at(-30, 1), body: "kept hour" },
      { timestamp: new Date("2019-03-01T00:00:00Z"), body: "ancient" },
      { timestamp: new Date("2090-03-01T00:00:00Z"), body: "far future" },
    ]);
    expect(await home(db, "logs", old[3] as string)).toBe(dayName("logs", at(-30)));
    expect(await home(db, "logs", old[5] as string)).toBe("logs_default");
    await insertServiceStatus(db, [
      {
        timestamp: at(-41),
        service_name: "old",
        service_type: "tcp",
        available: true,
        status: "success",
      },
    ]);
    const before = await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM logs`);

    const purged = await purgeExpiredTelemetry(
      db,
      noon,
      { metricsDays: 7, rollupDays: 90, logDays: 30 },
      { batchSize: 1 },
    );
    expect(purged).toEqual({ logs: 5, service_status: 1 });
    const names = (await listPartitions(db, "logs")).map((p) => p.name);
    expect(names).not.toContain(dayName("logs", at(-41)));
    expect(names).not.toContain(dayName("logs", at(-31)));
    expect(names).toContain(dayName("logs", at(-30)));
    expect(names).toContain("logs_default");
    expect((await listPartitions(db, "service_status")).map((p) => p.name)).not.toContain(
      dayName("service_status", at(-41)),
    );
    const after = await db.many<{ body: string }>(sql`SELECT body FROM logs WHERE id = ANY (${old}::uuid[])`);
    expect(after.map((r) => r.body).sort()).toEqual(["far future", "kept hour"]);
    expect((await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM logs`))?.n).toBe(
      (before?.n ?? 0) - 5,
    );
    // Nothing left to drop: the next pass reports nothing.
    expect(await dropExpiredPartitions(db, "logs", at(-30))).toBe(0);
    expect(await purgeExpiredTelemetry(db, noon, { metricsDays: 7, rollupDays: 90, logDays: 30 })).toEqual(
      {},
    );
  });
});

describe("migration 0320 on a database with telemetry", () => {
  let db: Db;
  beforeAll(async () => {
    db = (await createTestDatabase({ migrated: false })).db;
  });
  afterAll(async () => {
    await db?.close();
  });

  it("keeps every row and index, routing rows to their day or DEFAULT", async () => {
    const all = loadMigrations();
    // As on an installed database upgraded to this release: everything else already applied.
    await migrate(
      db,
      all.filter((m) => m.version !== 320),
    );
    const ids = await insertLogs(db, [
      { timestamp: at(0), body: "today", severity_text: "INFO", attributes: { k: 1 } },
      { timestamp: at(-1, -1), body: "yesterday" },
      { timestamp: at(-200), body: "old" },
      { timestamp: at(-10, 3), body: "last week" },
    ]);
    await insertServiceStatus(db, [
      { timestamp: at(1), service_name: "s", service_type: "tcp", available: false, status: "failed" },
    ]);
    const indexes = async () =>
      (
        await db.many<{ name: string }>(sql`
          SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
          WHERE i.indrelid = to_regclass('logs') ORDER BY 1`)
      ).map((r) => r.name);
    const before = await indexes();

    const r = await migrate(db, all);
    expect(r.applied).toEqual(["320_partitioned_telemetry"]);
    expect(await indexes()).toEqual(before);
    expect(await home(db, "logs", ids[0] as string)).toBe(dayName("logs", at(0)));
    expect(await home(db, "logs", ids[1] as string)).toBe(dayName("logs", at(-1)));
    // History of the last 92 days gets its own days (droppable); older rows go to DEFAULT.
    expect(await home(db, "logs", ids[2] as string)).toBe("logs_default");
    expect(await home(db, "logs", ids[3] as string)).toBe(dayName("logs", at(-10)));
    expect((await listPartitions(db, "logs")).filter((p) => !p.isDefault).length).toBe(5);
    const row = await db.one<{ body: string; severity_text: string; attributes: unknown }>(
      sql`SELECT body, severity_text, attributes FROM logs WHERE id = ${ids[0]}`,
    );
    expect(row).toEqual({ body: "today", severity_text: "INFO", attributes: { k: 1 } });
    const svc = await db.one<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM service_status WHERE NOT available`,
    );
    expect(svc?.n).toBe(1);
    // Defaults survived the rebuild.
    const [fresh] = await insertLogs(db, [{ timestamp: at(0), body: "after" }]);
    const f = await db.one<{ partition: string }>(sql`SELECT "partition" FROM logs WHERE id = ${fresh}`);
    expect(f?.partition).toBe("default");
  });
});

describe.runIf(testBackend() === "postgres")("dropping a partition of a busy table (PostgreSQL)", () => {
  let db: Db;
  let other: pg.Client;
  beforeAll(async () => {
    const t = await createTestDatabase();
    db = t.db;
    other = new pg.Client({ connectionString: t.url ?? "" });
    await other.connect();
  });
  afterAll(async () => {
    await other?.end();
    await db?.close();
  });

  it("moves stranded rows while writers insert into the same day: none fails, none is lost", async () => {
    // Without the parent locked for writes, an insert already routed to DEFAULT and waiting
    // there failed the new DEFAULT's constraint after the ATTACH (seen: 3 of 3 writers).
    const day = at(60);
    await insertLogs(
      db,
      Array.from({ length: 1000 }, (_, i) => ({ timestamp: new Date(day.getTime() + i), body: "stranded" })),
    );
    let stop = false;
    let written = 0;
    const errors: unknown[] = [];
    const writer = async () => {
      while (!stop) {
        try {
          await insertLogs(db, [{ timestamp: day, body: "during" }]);
          written++;
        } catch (err) {
          errors.push(err);
        }
      }
    };
    const writers = [writer(), writer(), writer()];
    await waitFor(async () => written >= 30, "writers under way");
    const { created, moved } = await ensureTelemetryPartitions(db, day, { daysAhead: 0 });
    const after = written;
    await waitFor(async () => written >= after + 30, "writers after the move");
    stop = true;
    await Promise.all(writers);
    expect(errors).toEqual([]);
    expect(created).toContain(dayName("logs", day));
    expect(moved[dayName("logs", day)]).toBeGreaterThanOrEqual(1000);
    const rows = await db.many<{ p: string; n: number }>(sql`
      SELECT tableoid::regclass::text AS p, count(*)::int AS n FROM logs
      WHERE body IN ('stranded', 'during') GROUP BY 1`);
    expect(rows).toEqual([{ p: dayName("logs", day), n: 1000 + written }]);
  });

  it("leaves a busy table's new partitions to the next pass and creates the others", async () => {
    await other.query("BEGIN");
    await other.query("SELECT count(*) FROM logs");
    let first: Awaited<ReturnType<typeof ensureTelemetryPartitions>>;
    try {
      first = await ensureTelemetryPartitions(db, at(80), { daysAhead: 0, lockTimeoutMs: 200 });
    } finally {
      await other.query("ROLLBACK");
    }
    expect(first.busy).toEqual(["logs"]);
    expect(first.created).not.toContain(dayName("logs", at(80)));
    expect(first.created).toContain(dayName("events", at(80)));
    const second = await ensureTelemetryPartitions(db, at(80), { daysAhead: 0, lockTimeoutMs: 200 });
    expect(second).toEqual({
      created: [dayName("logs", at(79)), dayName("logs", at(80))],
      moved: {},
      busy: [],
    });
  });

  it("gives up after the lock timeout instead of stalling the table, and the batches still purge", async () => {
    const fast = { lockTimeoutMs: 200 };
    await ensureTelemetryPartitions(db, at(-50), { daysAhead: 0 });
    await insertLogs(db, [{ timestamp: at(-50), body: "busy day" }]);
    // A long reader of the parent: DROP needs ACCESS EXCLUSIVE and would queue behind it.
    await other.query("BEGIN");
    await other.query("SELECT count(*) FROM logs");
    try {
      expect(await dropExpiredPartitions(db, "logs", at(-30), fast)).toBe(0);
      expect((await listPartitions(db, "logs")).map((p) => p.name)).toContain(dayName("logs", at(-50)));
      // The row goes anyway, deleted in batches (the DELETE needs no lock the reader holds).
      const purged = await purgeExpiredTelemetry(
        db,
        at(0),
        { metricsDays: 7, rollupDays: 90, logDays: 30 },
        fast,
      );
      expect(purged.logs).toBe(1);
    } finally {
      await other.query("ROLLBACK");
    }
    // Once the reader is gone the empty day is dropped (no rows left to report).
    expect(await dropExpiredPartitions(db, "logs", at(-30))).toBe(0);
    expect((await listPartitions(db, "logs")).map((p) => p.name)).not.toContain(dayName("logs", at(-50)));
  });
});
