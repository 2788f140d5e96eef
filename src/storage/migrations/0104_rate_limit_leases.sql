-- Request budgets shared through PostgreSQL, taken in leases (src/access/rate-limit.ts
-- PostgresRateStore): one call records up to `p_want` hits of a key at `p_now` — never more
-- than the budget has left — and can first give back `p_return` hits a replica recorded at
-- `p_return_second` but did not use. Same table, same per-key advisory lock as
-- netmon_rate_limit_hit (0101), which stays for replicas still running the previous version.
CREATE OR REPLACE FUNCTION netmon_rate_limit_take(
  p_key text, p_now bigint, p_window integer, p_limit integer, p_want integer,
  p_return_second bigint, p_return integer
) RETURNS TABLE (out_granted integer, out_count integer, out_oldest bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
  v_oldest bigint;
  v_granted integer;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('netmon-rl:' || p_key, 0));
  IF p_return > 0 THEN
    UPDATE rate_limit_counters SET hits = hits - p_return WHERE key = p_key AND second = p_return_second;
    DELETE FROM rate_limit_counters WHERE key = p_key AND second = p_return_second AND hits <= 0;
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
