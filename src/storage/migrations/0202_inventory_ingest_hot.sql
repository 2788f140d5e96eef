-- Cheaper re-sightings (docs/decisions/0200, "Ingestion cost"). A sighting of a known device
-- changes last_seen_time (and modified_time, discovery_sources, is_available...). Because
-- last_seen_time is indexed, such an update is not heap-only (HOT): it inserts a new entry into
-- each of the table's indexes (measured on 1,000,000 devices: 500 re-sightings 250-800 ms
-- non-HOT, 35 ms HOT). Dropping that index made ingestion ~2x faster but made the most common
-- read — the device list ordered by last seen (SRQL `in:devices` default sort, the OCSF export,
-- v2 sort=-last_seen_time) — ~40x slower at 1M devices (9.7 ms -> 400-485 ms), so the index
-- stays; re-sightings that only move last_seen by < 60 s are skipped in code instead.
-- Leave room on each page for updated row versions, so the updates that do not touch an indexed
-- column (identifier re-sightings, metadata-only changes) stay HOT (applies to pages written
-- from now on; a row moves once to a page with room, then stays HOT).
ALTER TABLE devices SET (fillfactor = 80);
-- Identifier re-sightings only advance last_seen/source (not indexed): HOT as well.
ALTER TABLE device_identifiers SET (fillfactor = 90);
-- MAC substring search: pg_trgm splits `AA:BB:CC:DD:EE:FF` into two-character words, whose
-- trigrams (' aa', 'aa ') are shared by most MACs, so a fragment like `16:00:09:8c` matched
-- thousands of candidates (up to 860 ms at 1,000,000 devices). The colon-free hex form is one
-- 12-character word with selective trigrams; the list search probes it with the colon-free term
-- and rechecks the colon form (src/inventory/devices.ts searchCondition).
DROP INDEX IF EXISTS devices_mac_lower_trgm_idx;
CREATE INDEX devices_mac_hex_trgm_idx ON devices USING gin (replace(lower(mac), ':', '') gin_trgm_ops);
