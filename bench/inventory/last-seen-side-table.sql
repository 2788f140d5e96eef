-- Re-sighting update with and without devices_last_seen_idx on devices (issue 14, goal 2):
-- A = today (every re-sighting is a non-HOT update through every index of devices); B = the
-- last-seen order index moved to a narrow side table (devices update HOT, side table takes two
-- index inserts). 500 random seeded devices of the bench database, rolled back. Needs, once:
--   CREATE TABLE _exp_seen WITH (fillfactor = 80) AS SELECT uid, last_seen_time FROM devices;
--   ALTER TABLE _exp_seen ADD PRIMARY KEY (uid); CREATE INDEX ON _exp_seen (last_seen_time DESC);
-- Run (on a bench database nobody else uses: B drops an index inside the transaction):
--   psql -v B=false|true postgres://root@127.0.0.1:5432/inventory_bench_200000 -f bench/inventory/last-seen-side-table.sql
-- Uids follow the seed of inventory.ts ('sr:' || md5('bench' || g)::uuid); 199999 = devices - 1.
\timing on
BEGIN;
CREATE TEMP TABLE u ON COMMIT DROP AS SELECT DISTINCT 'sr:' || md5('bench' || ((random() * 199999)::int))::uuid::text AS uid FROM generate_series(1, 500);
\if :B
DROP INDEX devices_last_seen_idx;
\endif
SELECT pg_current_wal_insert_lsn() AS w0 \gset
UPDATE devices d SET last_seen_time = d.last_seen_time + interval '3 hours', modified_time = now(),
  is_available = true, discovery_sources = CASE WHEN 'bench2' = ANY(discovery_sources) THEN discovery_sources ELSE discovery_sources || '{bench2}'::text[] END
  FROM u WHERE d.uid = u.uid;
\if :B
UPDATE _exp_seen s SET last_seen_time = s.last_seen_time + interval '3 hours' FROM u WHERE s.uid = u.uid;
\endif
SELECT pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'w0')) AS wal;
SELECT pg_stat_force_next_flush();
ROLLBACK;
