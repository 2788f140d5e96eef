-- Sliding-window check-and-record for the shared PostgreSQL request-budget store in ONE round
-- trip: per-key advisory lock (held until the calling statement's transaction ends), drop
-- expired seconds, count, and record the hit when below the limit. Denied hits are not recorded.
CREATE OR REPLACE FUNCTION netmon_rate_limit_hit(
  p_key text, p_now bigint, p_window integer, p_limit integer, p_record boolean
) RETURNS TABLE (out_allowed boolean, out_count integer, out_oldest bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
  v_oldest bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('netmon-rl:' || p_key, 0));
  DELETE FROM rate_limit_counters WHERE key = p_key AND second <= p_now - p_window;
  SELECT COALESCE(sum(c.hits), 0)::integer, min(c.second) INTO v_count, v_oldest
    FROM rate_limit_counters c WHERE c.key = p_key AND c.second > p_now - p_window;
  IF v_count >= p_limit THEN
    RETURN QUERY SELECT false, v_count, v_oldest;
    RETURN;
  END IF;
  IF p_record THEN
    INSERT INTO rate_limit_counters AS c (key, second, hits) VALUES (p_key, p_now, 1)
      ON CONFLICT (key, second) DO UPDATE SET hits = c.hits + 1;
    v_count := v_count + 1;
    v_oldest := COALESCE(v_oldest, p_now);
  END IF;
  RETURN QUERY SELECT true, v_count, v_oldest;
END
$$;
