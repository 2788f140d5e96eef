// Seeding for bench/inventory/reads.ts: n devices bulk-loaded with INSERT … SELECT (indexes
// dropped first, rebuilt after), the shape POST /api/v1/device-updates leaves (hostname, IP, MAC,
// vendor, discovery source, metadata). Device g is host-<g zero-padded to 7 digits>.example.net,
// so `search=host-00012` matches 100 devices at 1M (host-0001200 … host-0001299) and fewer below.
// Reused when the table already holds exactly n live devices and the seed marker.
import type { Db } from "../../src/storage/db.ts";
import { sql } from "../../src/storage/sql.ts";

const log = (m: string) =>
  process.stderr.write(`[reads-seed ${new Date().toISOString().slice(11, 19)}] ${m}\n`);

export async function seedDevices(db: Db, n: number): Promise<void> {
  const have = await db.one<{ n: number; marked: number }>(
    sql`SELECT count(*)::int AS n, count(*) FILTER (WHERE metadata ? 'reads_bench')::int AS marked FROM devices`,
  );
  if (have?.n === n && have.marked === n) {
    log(`reusing ${n} seeded devices`);
    return;
  }
  log(`seeding ${n} devices`);
  await db.query(sql`TRUNCATE devices CASCADE`);
  const idx = await db.many<{ indexname: string; indexdef: string }>(
    sql`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'devices'
          AND indexname NOT IN (SELECT conname FROM pg_constraint)`,
  );
  for (const i of idx) await db.query(`DROP INDEX IF EXISTS "${i.indexname}"`);
  const chunk = 250_000;
  for (let from = 0; from < n; from += chunk) {
    const to = Math.min(n, from + chunk) - 1;
    await db.query(
      sql`INSERT INTO devices (uid, partition, ip, mac, hostname, type_id, type, vendor_name, is_available,
            gateway_id, discovery_sources, metadata, first_seen_time, last_seen_time, created_time, modified_time)
          SELECT 'sr:' || md5('reads' || g)::uuid::text, 'default',
            '10.' || ((g >> 16) & 255) || '.' || ((g >> 8) & 255) || '.' || (g & 255),
            upper(regexp_replace('0016' || lpad(to_hex(g), 8, '0'), '(..)(?!$)', '\\1:', 'g')),
            'host-' || lpad(g::text, 7, '0') || '.example.net', CASE WHEN g % 10 = 0 THEN 10 ELSE 1 END,
            CASE WHEN g % 10 = 0 THEN 'Switch' ELSE 'Server' END, 'Vendor' || (g % 7),
            g % 3 <> 0, 'gw-' || (g % 4), ARRAY['sweep'],
            jsonb_build_object('reads_bench', true, 'source', 'sweep', 'rack', 'r' || (g % 40)),
            timestamptz '2026-01-01T00:00:00Z', timestamptz '2026-01-01T00:00:00Z' + (g % 86400) * interval '1 second',
            timestamptz '2026-01-01T00:00:00Z', timestamptz '2026-01-01T00:00:00Z'
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
}
