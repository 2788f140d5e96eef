// Seeds the SRQL benchmark database on PostgreSQL with INSERT … SELECT generate_series:
// SRQL_BENCH_DEVICES devices (default 1,000,000) and SRQL_BENCH_LOGS logs (default 10,000,000).
// Idempotent: a table already holding the requested number of rows is left alone. Indexes of
// the logs table are dropped during the load and rebuilt afterwards (much faster than
// maintaining them row by row). Run alone: node --import tsx bench/srql/_seed.ts
import pg from "pg";
import { migrate } from "../../src/storage/migrate.ts";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { ensurePgDatabase } from "../_lib/pg-database.ts";

export const BENCH_URL = process.env.SRQL_BENCH_DATABASE_URL ?? "postgres://root@127.0.0.1:5432/srql_bench";
export const DEVICES = Number(process.env.SRQL_BENCH_DEVICES ?? 1_000_000);
export const LOGS = Number(process.env.SRQL_BENCH_LOGS ?? 10_000_000);
const CHUNK = 1_000_000;

const log = (msg: string) =>
  process.stderr.write(`[seed ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

async function rebuildWithoutIndexes(
  db: PostgresDb,
  table: string,
  load: () => Promise<void>,
): Promise<void> {
  const idx = await db.many<{ indexname: string; indexdef: string }>(
    `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = $1
       AND indexname NOT IN (SELECT conname FROM pg_constraint)`,
    [table],
  );
  for (const i of idx) await db.query(`DROP INDEX IF EXISTS "${i.indexname}"`);
  await load();
  for (const i of idx) {
    const t0 = Date.now();
    await db.query(i.indexdef);
    log(`index ${i.indexname} built in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  }
  await db.query(`VACUUM ANALYZE "${table}"`);
}

export async function seed(): Promise<PostgresDb> {
  await ensurePgDatabase(BENCH_URL);
  const db = await PostgresDb.open({ connectionString: BENCH_URL, poolSize: 4 });
  await migrate(db);
  await db.query("SET maintenance_work_mem = '512MB'");

  const devices = Number((await db.one<{ n: number }>("SELECT count(*)::int AS n FROM devices"))?.n);
  if (devices !== DEVICES) {
    log(`loading ${DEVICES} devices`);
    await db.query("TRUNCATE devices CASCADE");
    await rebuildWithoutIndexes(db, "devices", async () => {
      for (let from = 1; from <= DEVICES; from += CHUNK) {
        const to = Math.min(DEVICES, from + CHUNK - 1);
        await db.query(
          `INSERT INTO devices (uid, partition, ip, mac, hostname, type, type_id, vendor_name, is_available,
             discovery_sources, tags, metadata, os, first_seen_time, last_seen_time)
           SELECT 'sr:' || md5(i::text)::uuid::text,
             'default',
             '10.' || ((i >> 16) & 255) || '.' || ((i >> 8) & 255) || '.' || (i & 255),
             upper(substr(md5('m' || i), 1, 2) || ':' || substr(md5('m' || i), 3, 2) || ':' || substr(md5('m' || i), 5, 2) || ':' ||
                   substr(md5('m' || i), 7, 2) || ':' || substr(md5('m' || i), 9, 2) || ':' || substr(md5('m' || i), 11, 2)),
             (CASE WHEN i % 100 = 0 THEN 'cam-' WHEN i % 7 = 0 THEN 'sw-' ELSE 'host-' END) || i,
             (ARRAY['Server','Switch','Router','Camera','Firewall','Desktop'])[1 + i % 6],
             1 + i % 6,
             (ARRAY['Cisco','Juniper','Dell','HP','Axis','Ubiquiti','Aruba','Lenovo'])[1 + i % 8],
             i % 10 <> 0,
             CASE WHEN i % 3 = 0 THEN ARRAY['sweep','armis'] ELSE ARRAY['agent'] END,
             jsonb_build_object('role', CASE WHEN i % 2 = 0 THEN 'edge' ELSE 'core' END),
             jsonb_build_object('site', 'site-' || (i % 50)),
             jsonb_build_object('name', (ARRAY['Linux','IOS','Windows'])[1 + i % 3]),
             now() - (i % 1000000) * interval '10 second',
             now() - (i % 100000) * interval '1 second'
           FROM generate_series($1::int, $2::int) AS i`,
          [from, to],
        );
        log(`devices ${to}/${DEVICES}`);
      }
    });
  }

  const logs = Number((await db.one<{ n: number }>("SELECT count(*)::int AS n FROM logs"))?.n);
  if (logs !== LOGS) {
    log(`loading ${LOGS} logs`);
    await db.query("TRUNCATE logs");
    await rebuildWithoutIndexes(db, "logs", async () => {
      for (let from = 1; from <= LOGS; from += CHUNK) {
        const to = Math.min(LOGS, from + CHUNK - 1);
        // One row every 25 ms back from now: 10M rows span ~2.9 days.
        await db.query(
          `INSERT INTO logs (id, "timestamp", severity_text, severity_number, body, service_name, device_id, host,
             scope_name, attributes, partition)
           SELECT md5('log' || i)::uuid,
             now() - i * interval '25 millisecond',
             (ARRAY['ERROR','WARN','INFO','INFO','DEBUG'])[1 + i % 5],
             (ARRAY[17,13,9,9,5])[1 + i % 5],
             CASE WHEN i % 1000 = 0 THEN 'connection refused by upstream ' || (i % 97)
                  ELSE 'request ' || (i % 50000) || ' handled in ' || (i % 900) || ' ms' END,
             'svc-' || (i % 20),
             'sr:' || md5(((i % ${DEVICES}) + 1)::text)::uuid::text,
             'host-' || (i % 5000),
             'scope-' || (i % 4),
             jsonb_build_object('http.method', CASE WHEN i % 2 = 0 THEN 'GET' ELSE 'POST' END),
             'default'
           FROM generate_series($1::bigint, $2::bigint) AS i`,
          [from, to],
        );
        log(`logs ${to}/${LOGS}`);
      }
    });
  }
  return db;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const t0 = Date.now();
  const db = await seed();
  await db.close();
  log(`done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}
