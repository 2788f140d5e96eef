// Inventory benchmark: identity batch of 128 (p50/p99), devices list search (p50/p99) and
// ingestion of sightings (sightings/s), on PostgreSQL and PGlite, each next to the same work as
// hand-written SQL on the same database (ratio = netmon / hand-written).
//
//   node --import tsx bench/inventory/inventory.ts
//
// Env: INVENTORY_BENCH_DEVICES (PostgreSQL, default 1000000), INVENTORY_BENCH_PGLITE_DEVICES
// (default 250000), INVENTORY_BENCH_SIGHTINGS (default 100000), INVENTORY_BENCH_PGLITE_SIGHTINGS (20000), INVENTORY_BENCH_BACKENDS
// ("postgres,pglite"), INVENTORY_BENCH_DATABASE_URL (default postgres://root@127.0.0.1:5432/inventory_bench;
// seeded once, reused while it holds the requested number of devices), INVENTORY_BENCH_ITERATIONS (200),
// INVENTORY_BENCH_INGEST_CLIENTS (1: batches sent one after another; n: n batches in flight).
import { createHash } from "node:crypto";
import os from "node:os";
import pg from "pg";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import type { Config } from "../../src/config/config.ts";
import { listDevices } from "../../src/inventory/devices.ts";
import { resolveAddresses } from "../../src/inventory/identity.ts";
import { ingestSightings } from "../../src/inventory/ingest.ts";
import { uidFromSeed } from "../../src/inventory/uid.ts";
import type { AppContext } from "../../src/kernel/context.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import type { Db } from "../../src/storage/db.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { sql } from "../../src/storage/sql.ts";
import { ensurePgDatabase } from "../_lib/pg-database.ts";

const PG_DEVICES = Number(process.env.INVENTORY_BENCH_DEVICES ?? 1_000_000);
const PGLITE_DEVICES = Number(process.env.INVENTORY_BENCH_PGLITE_DEVICES ?? 250_000);
const PG_SIGHTINGS = Number(process.env.INVENTORY_BENCH_SIGHTINGS ?? 100_000);
const PGLITE_SIGHTINGS = Number(process.env.INVENTORY_BENCH_PGLITE_SIGHTINGS ?? 20_000);
const ITER = Number(process.env.INVENTORY_BENCH_ITERATIONS ?? 200);
// Ingestion clients sending batches at once (several agents posting device updates).
const CLIENTS = Math.max(1, Number(process.env.INVENTORY_BENCH_INGEST_CLIENTS ?? 1));
const BACKENDS = (process.env.INVENTORY_BENCH_BACKENDS ?? "postgres,pglite").split(",").map((s) => s.trim());
const PG_URL = process.env.INVENTORY_BENCH_DATABASE_URL ?? "postgres://root@127.0.0.1:5432/inventory_bench";

const log = (m: string) =>
  process.stderr.write(`[inventory-bench ${new Date().toISOString().slice(11, 19)}] ${m}\n`);

// Device i lives at 10.<i>>16&255>.<i>>8&255>.<i&255> with the universal MAC 00:16:<i as 4 bytes>.
const ipOf = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
const macHexOf = (i: number) => `0016${i.toString(16).padStart(8, "0")}`;
const macOf = (i: number) => (macHexOf(i).toUpperCase().match(/../g) as string[]).join(":");

/** uid of seeded device at a 10.x IP: 'sr:' || md5('bench' || i)::uuid. */
function seededUid(ip: string): string {
  const [, a, b, c] = ip.split(".").map(Number) as [number, number, number, number];
  const i = (a << 16) | (b << 8) | c;
  const h = createHash("md5").update(`bench${i}`).digest("hex");
  return `sr:${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Bulk-load n devices (+ one MAC identifier each) with INSERT … SELECT, indexes built afterwards. */
async function seed(db: Db, n: number): Promise<void> {
  const have = (await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM devices`))?.n ?? 0;
  const ids = (await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM device_identifiers`))?.n ?? 0;
  if (have === n && ids === n) {
    log(`reusing ${n} seeded devices`);
    return;
  }
  log(`seeding ${n} devices`);
  await db.query(sql`TRUNCATE devices CASCADE`);
  const idx = await db.many<{ indexname: string; indexdef: string }>(
    sql`SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('devices', 'device_identifiers')
          AND indexname NOT IN (SELECT conname FROM pg_constraint)`,
  );
  for (const i of idx) await db.query(`DROP INDEX IF EXISTS "${i.indexname}"`);
  const chunk = 250_000;
  for (let from = 0; from < n; from += chunk) {
    const to = Math.min(n, from + chunk) - 1;
    await db.query(
      sql`INSERT INTO devices (uid, partition, ip, mac, hostname, type_id, type, vendor_name, is_available,
            gateway_id, discovery_sources, first_seen_time, last_seen_time)
          SELECT 'sr:' || md5('bench' || g)::uuid::text, 'default',
            '10.' || ((g >> 16) & 255) || '.' || ((g >> 8) & 255) || '.' || (g & 255),
            upper(regexp_replace('0016' || lpad(to_hex(g), 8, '0'), '(..)(?!$)', '\\1:', 'g')),
            'host-' || g || '.example.net', CASE WHEN g % 10 = 0 THEN 10 ELSE 1 END,
            CASE WHEN g % 10 = 0 THEN 'Switch' ELSE 'Server' END, 'Vendor' || (g % 7),
            g % 3 <> 0, 'gw-' || (g % 4), ARRAY['sweep'],
            now() - interval '30 days', now() - (g % 86400) * interval '1 second'
            FROM generate_series(${from}::int, ${to}::int) AS g`,
    );
    await db.query(
      sql`INSERT INTO device_identifiers (device_uid, partition, identifier_type, identifier_value, confidence, source)
          SELECT 'sr:' || md5('bench' || g)::uuid::text, 'default', 'mac', '0016' || lpad(to_hex(g), 8, '0'), 'strong', 'sweep'
            FROM generate_series(${from}::int, ${to}::int) AS g`,
    );
    log(`devices ${to + 1}/${n}`);
  }
  for (const i of idx) {
    const t0 = Date.now();
    await db.query(i.indexdef);
    log(`index ${i.indexname} ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  }
  await db.query(sql`ANALYZE devices`);
  await db.query(sql`ANALYZE device_identifiers`);
}

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))] as number;
}

async function time(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

// Deterministic pseudo-random numbers (mulberry32) so both backends see the same workload.
function rng(seedVal: number) {
  let a = seedVal;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Row {
  name: string;
  netmon: string;
  hand: string;
  ratio: string;
}

async function runBackend(
  kind: "postgres" | "pglite",
): Promise<{ rows: Row[]; n: number; seedSecs: number }> {
  const n = kind === "postgres" ? PG_DEVICES : PGLITE_DEVICES;
  const SIGHTINGS = kind === "postgres" ? PG_SIGHTINGS : PGLITE_SIGHTINGS;
  let db: Db;
  if (kind === "postgres") {
    await ensurePgDatabase(PG_URL);
    db = await PostgresDb.open({ connectionString: PG_URL, poolSize: Math.max(4, CLIENTS + 1) });
  } else {
    db = await PgliteDb.open();
  }
  const rows: Row[] = [];
  const t0 = Date.now();
  try {
    await migrate(db);
    await seed(db, n);
    const seedSecs = (Date.now() - t0) / 1000;
    const ctx: AppContext = {
      config: {} as Config,
      db,
      log: createLogger("silent"),
      secretKey: Buffer.alloc(32),
      now: () => new Date(),
    };
    const rand = rng(42);
    const pick = () => Math.floor(rand() * n);

    // 1. Identity batch of 128: 3/4 existing IPs (half with their own MAC, some with another
    // device's MAC), 1/4 unknown IPs.
    const batches = Array.from({ length: ITER }, () =>
      Array.from({ length: 128 }, (_, k) => {
        const i = pick();
        if (k % 4 === 3) return { ip: `11.0.${k}.${i & 255}`, partition: "default", mac: null };
        const mac = k % 4 === 0 ? macOf(i) : k % 4 === 1 ? macOf(pick()) : null;
        return { ip: ipOf(i), partition: "default", mac };
      }),
    );
    const idNet: number[] = [];
    const idHand: number[] = [];
    for (const b of batches.slice(0, 5)) await resolveAddresses(db, SYSTEM_ACTOR, b); // warm-up
    for (const b of batches) {
      idNet.push(await time(() => resolveAddresses(db, SYSTEM_ACTOR, b)));
      const ips = b.map((x) => x.ip);
      const macs = b.map((x) => (x.mac ? x.mac.replace(/:/g, "").toLowerCase() : null));
      idHand.push(
        await time(() =>
          db.many(
            sql`SELECT q.ip, d.uid, di.device_uid AS mac_uid
                  FROM unnest(${ips}::text[], ${macs}::text[]) AS q(ip, mac)
                  LEFT JOIN devices d ON d.partition = 'default' AND d.ip = q.ip AND d.deleted_at IS NULL
                  LEFT JOIN device_identifiers di ON di.partition = 'default' AND di.identifier_type = 'mac'
                       AND di.identifier_value = q.mac`,
          ),
        ),
      );
    }
    const ms = (v: number) => `${v.toFixed(2)} ms`;
    rows.push({
      name: "identity batch of 128, p50",
      netmon: ms(pct(idNet, 0.5)),
      hand: ms(pct(idHand, 0.5)),
      ratio: (pct(idNet, 0.5) / pct(idHand, 0.5)).toFixed(2),
    });
    rows.push({
      name: "identity batch of 128, p99",
      netmon: ms(pct(idNet, 0.99)),
      hand: ms(pct(idHand, 0.99)),
      ratio: (pct(idNet, 0.99) / pct(idHand, 0.99)).toFixed(2),
    });

    // 2. GET /api/devices?search=: hostname fragments ("host-1234" matches host-1234,
    // host-12340..9, …), IP prefixes and MAC fragments, limit 100.
    const terms = Array.from({ length: ITER }, (_, k) => {
      const i = pick();
      if (k % 3 === 0) return `host-${i}`;
      if (k % 3 === 1) return ipOf(i);
      return macOf(i).slice(3, 14);
    });
    const listNet: number[] = [];
    const listHand: number[] = [];
    for (const t of terms.slice(0, 5))
      await listDevices(db, SYSTEM_ACTOR, { limit: 100, offset: 0, search: t });
    for (const t of terms) {
      listNet.push(await time(() => listDevices(db, SYSTEM_ACTOR, { limit: 100, offset: 0, search: t })));
      const pat = `%${t.toLowerCase()}%`;
      // MACs are indexed in colon-free form since migration 0202 (no lower(mac) index any more).
      // LIMIT is a parameter as in listDevices: with server-side prepared statements a literal
      // LIMIT lets PostgreSQL settle on a generic plan after five runs, and the generic plan of a
      // parameterised LIKE walks devices_seq_key with a filter (measured 2–4 s per query).
      const hexPat = `%${t.toLowerCase().replace(/:/g, "")}%`;
      listHand.push(
        await time(() =>
          db.many(
            sql`SELECT * FROM devices WHERE deleted_at IS NULL
                  AND (hostname ILIKE ${pat} OR lower(ip) LIKE ${pat}
                    OR (replace(lower(mac), ':', '') LIKE ${hexPat} AND lower(mac) LIKE ${pat})
                    OR lower(uid) LIKE ${pat})
                ORDER BY seq LIMIT ${100}`,
          ),
        ),
      );
    }
    rows.push({
      name: "devices list search, p50",
      netmon: ms(pct(listNet, 0.5)),
      hand: ms(pct(listHand, 0.5)),
      ratio: (pct(listNet, 0.5) / pct(listHand, 0.5)).toFixed(2),
    });
    rows.push({
      name: "devices list search, p99",
      netmon: ms(pct(listNet, 0.99)),
      hand: ms(pct(listHand, 0.99)),
      ratio: (pct(listNet, 0.99) / pct(listHand, 0.99)).toFixed(2),
    });

    // 3. Ingestion: half sightings of existing devices (by IP; every other one with its MAC),
    // half new devices with a MAC, in batches of 1000 through ingestSightings.
    const mkSightings = (base: number) =>
      Array.from({ length: SIGHTINGS }, (_, k) => {
        if (k % 2 === 0) {
          const i = pick();
          return {
            ip: ipOf(i),
            mac: k % 4 === 0 ? macOf(i) : undefined,
            source: "bench",
            is_available: true,
          };
        }
        const j = base + k;
        return {
          ip: `12.${(j >> 16) & 255}.${(j >> 8) & 255}.${j & 255}`,
          mac: `00:17:${((j >> 24) & 255).toString(16).padStart(2, "0")}:${((j >> 16) & 255).toString(16).padStart(2, "0")}:${((j >> 8) & 255).toString(16).padStart(2, "0")}:${(j & 255).toString(16).padStart(2, "0")}`,
          hostname: `new-${j}`,
          source: "bench",
        };
      });
    // CLIENTS workers take the next batch of 1000 from a shared cursor until none are left.
    const inParallel = async (total: number, batch: (from: number) => Promise<unknown>) => {
      let next = 0;
      const worker = async () => {
        while (next < total) {
          const from = next;
          next += 1000;
          await batch(from);
        }
      };
      await Promise.all(Array.from({ length: CLIENTS }, worker));
    };
    const sightings = mkSightings(0);
    const tIngest = await time(() =>
      inParallel(sightings.length, (i) => ingestSightings(ctx, SYSTEM_ACTOR, sightings.slice(i, i + 1000))),
    );
    // Hand-written: the same rows upserted by uid (uids precomputed from the IP, no identity
    // matching), merging discovery_sources and advancing last_seen_time, batches of 1000.
    const hand = mkSightings(SIGHTINGS);
    const tHand = await time(() =>
      inParallel(hand.length, async (i) => {
        const chunk = hand.slice(i, i + 1000).map((s) => ({
          uid: s.ip.startsWith("10.") ? seededUid(s.ip) : uidFromSeed(`hand:${s.ip}`),
          ip: s.ip,
          mac: s.mac ?? null,
          hostname: (s as { hostname?: string }).hostname ?? null,
          source: s.source,
          seen: new Date().toISOString(),
        }));
        await db.transaction((tx) =>
          tx.query(
            sql`INSERT INTO devices AS d (uid, partition, ip, mac, hostname, discovery_sources, first_seen_time, last_seen_time)
                SELECT DISTINCT ON (uid) uid, 'default', ip, upper(mac), hostname, ARRAY[source], seen, seen
                  FROM jsonb_to_recordset(${JSON.stringify(chunk)}::jsonb)
                    AS x(uid text, ip text, mac text, hostname text, source text, seen timestamptz)
                ON CONFLICT (uid) DO UPDATE SET
                  discovery_sources = CASE WHEN EXCLUDED.discovery_sources[1] = ANY(d.discovery_sources)
                    THEN d.discovery_sources ELSE d.discovery_sources || EXCLUDED.discovery_sources END,
                  last_seen_time = greatest(d.last_seen_time, EXCLUDED.last_seen_time),
                  hostname = coalesce(EXCLUDED.hostname, d.hostname), modified_time = now()`,
          ),
        );
      }),
    );
    const rate = (SIGHTINGS / tIngest) * 1000;
    const rateHand = (SIGHTINGS / tHand) * 1000;
    rows.push({
      name: `ingestion of ${SIGHTINGS.toLocaleString("en")} sightings, ${CLIENTS} client(s)`,
      netmon: `${Math.round(rate).toLocaleString("en")} sightings/s`,
      hand: `${Math.round(rateHand).toLocaleString("en")} rows/s`,
      ratio: (rateHand / rate).toFixed(2),
    });
    // Leave the seeded set as it was (new devices removed) so the next run can reuse it.
    if (kind === "postgres") {
      await db.query(sql`DELETE FROM devices WHERE ip LIKE '12.%'`);
    }
    return { rows, n, seedSecs };
  } finally {
    await db.close();
  }
}

const sections: string[] = [];
for (const b of BACKENDS) {
  if (b !== "postgres" && b !== "pglite") continue;
  log(`backend ${b}`);
  const t0 = Date.now();
  const { rows, n, seedSecs } = await runBackend(b);
  const total = ((Date.now() - t0) / 1000).toFixed(0);
  sections.push(
    [
      `### ${b === "postgres" ? "PostgreSQL" : "PGlite"}: ${n.toLocaleString("en")} devices (seed/reuse ${seedSecs.toFixed(0)} s, run ${total} s)`,
      "",
      "| measurement | netmon | hand-written SQL | ratio (time netmon / hand) |",
      "|---|---|---|---|",
      ...rows.map((r) => `| ${r.name} | ${r.netmon} | ${r.hand} | ${r.ratio} |`),
      "",
    ].join("\n"),
  );
}

process.stdout.write(
  [
    "## Inventory (bench/inventory/inventory.ts)",
    "",
    `Command: \`node --import tsx bench/inventory/inventory.ts\` (INVENTORY_BENCH_DEVICES=${PG_DEVICES}, INVENTORY_BENCH_PGLITE_DEVICES=${PGLITE_DEVICES}, INVENTORY_BENCH_SIGHTINGS=${PG_SIGHTINGS}, INVENTORY_BENCH_PGLITE_SIGHTINGS=${PGLITE_SIGHTINGS}, ${ITER} iterations).`,
    `Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, shared with other work. Domain functions are called directly on the database (no HTTP);`,
    "the hand-written column runs equivalent SQL on the same database. Identity: `resolveAddresses` (one round trip);",
    "list: `listDevices` with `search` (ILIKE over hostname/IP/MAC/uid, trigram indexes, limit 100); ingestion: `ingestSightings`",
    "in batches of 1000 (half updates of existing devices, half new devices) vs a plain upsert by precomputed uid.",
    "",
    ...sections,
  ].join("\n"),
);
