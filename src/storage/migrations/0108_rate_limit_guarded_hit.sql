-- One round trip for an authenticated request's two budget checks (issue 14): look at the
-- client IP's failed-authentication budget (p_guard, never recorded here) and, only when it is
-- not exhausted, check-and-record the route's budget (p_key). Same semantics as calling
-- netmon_rate_limit_hit twice (record = false, then true), as the access hook did.
CREATE OR REPLACE FUNCTION netmon_rate_limit_guarded_hit(
  p_guard text, p_guard_window integer, p_guard_limit integer,
  p_key text, p_now bigint, p_window integer, p_limit integer
) RETURNS TABLE (
  guard_allowed boolean, guard_count integer, guard_oldest bigint,
  out_allowed boolean, out_count integer, out_oldest bigint
)
LANGUAGE plpgsql AS $$
DECLARE
  g record;
  h record;
BEGIN
  SELECT * INTO g FROM netmon_rate_limit_hit(p_guard, p_now, p_guard_window, p_guard_limit, false);
  IF NOT g.out_allowed THEN
    RETURN QUERY SELECT false, g.out_count, g.out_oldest, false, 0, NULL::bigint;
    RETURN;
  END IF;
  SELECT * INTO h FROM netmon_rate_limit_hit(p_key, p_now, p_window, p_limit, true);
  RETURN QUERY SELECT true, g.out_count, g.out_oldest, h.out_allowed, h.out_count, h.out_oldest;
END $$;
