-- Leases for the shared PostgreSQL request-budget store (issue 14, decision 0111): a replica
-- reserves up to p_want slots of a key's budget in the current second and then admits requests
-- from them without a round trip each. Granted slots are recorded as hits at once, so every
-- replica counts them: the replicas together never admit more than the limit in a window.
-- Same per-key advisory lock as netmon_rate_limit_hit (0101), so the two serialise per key.
--
-- p_give_second/p_give: this replica's unused slots of an earlier second of the same key,
-- given back in the same statement before counting (its lease of that second ended).
CREATE OR REPLACE FUNCTION netmon_rate_limit_take(
  p_key text, p_now bigint, p_window integer, p_limit integer, p_want integer,
  p_give_second bigint DEFAULT NULL, p_give integer DEFAULT 0
) RETURNS TABLE (out_granted integer, out_count integer, out_oldest bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
  v_oldest bigint;
  v_granted integer;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('netmon-rl:' || p_key, 0));
  IF p_give > 0 AND p_give_second IS NOT NULL THEN
    UPDATE rate_limit_counters c SET hits = c.hits - p_give
      WHERE c.key = p_key AND c.second = p_give_second;
    DELETE FROM rate_limit_counters c WHERE c.key = p_key AND c.second = p_give_second AND c.hits <= 0;
  END IF;
  DELETE FROM rate_limit_counters WHERE key = p_key AND second <= p_now - p_window;
  SELECT COALESCE(sum(c.hits), 0)::integer, min(c.second) INTO v_count, v_oldest
    FROM rate_limit_counters c WHERE c.key = p_key AND c.second > p_now - p_window;
  v_granted := GREATEST(0, LEAST(p_want, p_limit - v_count));
  IF v_granted > 0 THEN
    INSERT INTO rate_limit_counters AS c (key, second, hits) VALUES (p_key, p_now, v_granted)
      ON CONFLICT (key, second) DO UPDATE SET hits = c.hits + v_granted;
    v_count := v_count + v_granted;
    v_oldest := COALESCE(v_oldest, p_now);
  END IF;
  RETURN QUERY SELECT v_granted, v_count, v_oldest;
END
$$;

-- Unused leased slots of ended seconds, many keys in one statement: subtract them from the
-- hits of that (key, second) and drop rows left empty (an empty row would still count as the
-- oldest second). Rows are visited in (key, second) order, so two replicas giving back at once
-- lock rows in the same order and cannot deadlock. No advisory lock: a decrement racing a
-- take only means the take counted the slots still held, which errs on the safe side.
CREATE OR REPLACE FUNCTION netmon_rate_limit_give_back(
  p_keys text[], p_seconds bigint[], p_counts integer[]
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  v_rows integer := 0;
BEGIN
  FOR r IN SELECT g.k, g.s, g.n FROM unnest(p_keys, p_seconds, p_counts) AS g(k, s, n)
      WHERE g.n > 0 ORDER BY g.k, g.s LOOP
    UPDATE rate_limit_counters c SET hits = c.hits - r.n WHERE c.key = r.k AND c.second = r.s;
    DELETE FROM rate_limit_counters c WHERE c.key = r.k AND c.second = r.s AND c.hits <= 0;
    v_rows := v_rows + 1;
  END LOOP;
  RETURN v_rows;
END
$$;
