-- Time-partitioned raw telemetry (issue 19 item 4, decision 0320): every raw time-series table
-- becomes PARTITION BY RANGE on its time column with one partition per UTC day and a DEFAULT
-- partition for rows outside every daily range (clock skew, replayed history, restores), so
-- retention drops whole expired days instead of deleting rows. Native declarative partitioning
-- only: it runs unchanged on PGlite and PostgreSQL 15+ (TimescaleDB is not assumed).
--
-- A partitioned table's unique constraints must include the partition key, so the primary key
-- becomes (id, <time>). Ids stay UUIDs from gen_random_uuid(); only (id, time) is enforced.
-- Nothing references these tables by foreign key, and no upsert targets them.

-- The daily partition of `parent` for `day` (a UTC day), created unless it exists. Rows of that
-- day already in the DEFAULT partition (written while no partition covered it) would make
-- CREATE ... PARTITION OF fail, so then the partition is built beside the parent, the rows are
-- moved into it and it is attached, all in the caller's transaction. Returns NULL when the
-- partition existed, else the number of rows moved into it (0 on the ordinary path).
-- With `wait_ms`, the locks it needs are waited for that long at most (lock_not_available
-- otherwise): creating a partition locks the parent, and a request queued behind a long query
-- would stall every later reader and writer of the table.
CREATE OR REPLACE FUNCTION netmon_ensure_daily_partition(parent text, day date, wait_ms integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  part text := parent || '_p' || to_char(day, 'YYYYMMDD');
  def text := parent || '_default';
  -- ISO literals with an explicit offset: the bounds are UTC midnights whatever the session's
  -- TimeZone and DateStyle.
  lo text := to_char(day, 'YYYY-MM-DD') || ' 00:00:00+00';
  hi text := to_char(day + 1, 'YYYY-MM-DD') || ' 00:00:00+00';
  col text;
  stranded boolean := false;
  moved bigint;
BEGIN
  IF to_regclass(quote_ident(part)) IS NOT NULL THEN
    RETURN NULL;
  END IF;
  IF wait_ms IS NOT NULL THEN
    PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
  END IF;
  SELECT a.attname INTO col
  FROM pg_partitioned_table pt
  JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = pt.partattrs[0]
  WHERE pt.partrelid = to_regclass(quote_ident(parent));
  IF col IS NULL THEN
    RAISE EXCEPTION '% is not a partitioned table', parent;
  END IF;
  IF to_regclass(quote_ident(def)) IS NOT NULL THEN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE %I >= %L AND %I < %L)', def, col, lo, col, hi)
      INTO stranded;
  END IF;
  IF NOT stranded THEN
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', part, parent, lo, hi);
    RETURN 0;
  END IF;
  -- Writers of the whole table wait for the move (readers do not): an insert already routed
  -- to DEFAULT and waiting for it there would fail the new DEFAULT's constraint after the
  -- ATTACH, while one waiting on the parent is routed afresh, into the new partition.
  EXECUTE format('LOCK TABLE %I IN EXCLUSIVE MODE', parent);
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
  EXECUTE format(
    'WITH moved AS (DELETE FROM %I WHERE %I >= %L AND %I < %L RETURNING *) INSERT INTO %I SELECT * FROM moved',
    def, col, lo, col, hi, part);
  GET DIAGNOSTICS moved = ROW_COUNT;
  -- ATTACH builds the parent's indexes on the new partition.
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
  RETURN moved;
END $$;

-- Drop one expired partition unless its parent's lock cannot be had within `wait_ms` (5 s): DROP
-- needs an ACCESS EXCLUSIVE lock on the parent, and a DROP queued behind a long query would
-- stall every write to the table meanwhile. Returns false when it gave up (the next pass tries
-- again).
CREATE OR REPLACE FUNCTION netmon_drop_partition(part text, wait_ms integer DEFAULT 5000) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
  EXECUTE format('DROP TABLE IF EXISTS %I', part);
  RETURN true;
EXCEPTION WHEN lock_not_available THEN
  RETURN false;
END $$;

-- Convert a plain table to daily range partitions on `col`: same columns, defaults, checks and
-- secondary indexes; primary key (id, col); a DEFAULT partition; daily partitions for today-1
-- through today+2 (UTC) and for every earlier day of the last 92 that holds rows; the rows
-- copied over. The existing history gets its own days so that it can be dropped by retention
-- and DEFAULT starts small: creating a partition scans DEFAULT under a lock on the parent.
-- Idempotent: a partitioned table is left alone.
CREATE OR REPLACE FUNCTION netmon_partition_by_day(tbl text, col text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  old text := tbl || '_unpartitioned';
  oid_ regclass := to_regclass(quote_ident(tbl));
  defs text[];
  names text[];
  pk text;
  d text;
  cols text;
  day date;
  today date := (now() AT TIME ZONE 'UTC')::date;
BEGIN
  IF oid_ IS NULL OR EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = oid_) THEN
    RETURN;
  END IF;
  -- Secondary indexes (from 0300 and any later migration): recreated on the parent by their
  -- own definitions, so each partition gets them; their names must be free first.
  SELECT coalesce(array_agg(pg_get_indexdef(i.indexrelid) ORDER BY c.relname), '{}'),
         coalesce(array_agg(quote_ident(c.relname) ORDER BY c.relname), '{}')
    INTO defs, names
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
  WHERE i.indrelid = oid_ AND NOT i.indisprimary
    AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid);
  FOREACH d IN ARRAY names LOOP
    EXECUTE 'DROP INDEX ' || d;
  END LOOP;
  SELECT conname INTO pk FROM pg_constraint WHERE conrelid = oid_ AND contype = 'p';
  IF pk IS NOT NULL THEN
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', tbl, pk);
  END IF;
  EXECUTE format('ALTER TABLE %I RENAME TO %I', tbl, old);
  EXECUTE format(
    'CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING COMMENTS, '
    'PRIMARY KEY (id, %I)) PARTITION BY RANGE (%I)', tbl, old, col, col);
  EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', tbl || '_default', tbl);
  FOR i IN -1..2 LOOP
    PERFORM netmon_ensure_daily_partition(tbl, today + i);
  END LOOP;
  FOR day IN EXECUTE format(
    'SELECT DISTINCT (%I AT TIME ZONE ''UTC'')::date FROM %I WHERE %I >= %L AND %I < %L',
    col, old, col, to_char(today - 92, 'YYYY-MM-DD') || ' 00:00:00+00',
    col, to_char(today - 1, 'YYYY-MM-DD') || ' 00:00:00+00')
  LOOP
    PERFORM netmon_ensure_daily_partition(tbl, day);
  END LOOP;
  SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols
  FROM pg_attribute
  WHERE attrelid = to_regclass(quote_ident(tbl)) AND attnum > 0 AND NOT attisdropped AND attgenerated = '';
  EXECUTE format('INSERT INTO %I (%s) SELECT %s FROM %I', tbl, cols, cols, old);
  EXECUTE format('DROP TABLE %I', old);
  -- After the copy: one bulk build per index instead of row-by-row maintenance.
  FOREACH d IN ARRAY defs LOOP
    EXECUTE d;
  END LOOP;
END $$;

SELECT netmon_partition_by_day('logs', 'timestamp');
SELECT netmon_partition_by_day('events', 'time');
SELECT netmon_partition_by_day('otel_traces', 'timestamp');
SELECT netmon_partition_by_day('otel_metrics', 'timestamp');
SELECT netmon_partition_by_day('otel_metric_points', 'timestamp');
SELECT netmon_partition_by_day('timeseries_metrics', 'timestamp');
SELECT netmon_partition_by_day('cpu_metrics', 'timestamp');
SELECT netmon_partition_by_day('cpu_cluster_metrics', 'timestamp');
SELECT netmon_partition_by_day('memory_metrics', 'timestamp');
SELECT netmon_partition_by_day('disk_metrics', 'timestamp');
SELECT netmon_partition_by_day('process_metrics', 'timestamp');
SELECT netmon_partition_by_day('service_status', 'timestamp');
