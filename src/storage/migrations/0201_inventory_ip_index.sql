-- Batch lookups join the devices table on equality (`d.partition = q.p AND d.ip = q.ip`,
-- `d.mac = ...`, `uid = ANY(...)`). pg_trgm's GIN operator class also supports `=`, and the
-- planner under-costs it: it probed the trigram index (40 ms per row) instead of the btree.
-- 1. The live-IP unique index loses its `ip IS NOT NULL` predicate (the planner cannot prove it
--    from a join qual; NULLs never conflict in a unique index anyway).
-- 2. The substring-search indexes on ip, mac and uid move to lower(...) expressions, which
--    equality on the bare column cannot use; the devices list searches `lower(col) LIKE`.
--    (hostname keeps its plain trigram index: no equality lookups use it, SRQL searches it.)
DROP INDEX IF EXISTS devices_partition_ip_live_idx;
CREATE UNIQUE INDEX devices_partition_ip_live_idx ON devices (partition, ip) WHERE deleted_at IS NULL;
DROP INDEX IF EXISTS devices_ip_trgm_idx;
DROP INDEX IF EXISTS devices_mac_trgm_idx;
DROP INDEX IF EXISTS devices_uid_trgm_idx;
CREATE INDEX devices_ip_lower_trgm_idx ON devices USING gin (lower(ip) gin_trgm_ops);
CREATE INDEX devices_mac_lower_trgm_idx ON devices USING gin (lower(mac) gin_trgm_ops);
CREATE INDEX devices_uid_lower_trgm_idx ON devices USING gin (lower(uid) gin_trgm_ops);
