-- SRQL helpers. netmon_try_inet: text → inet, NULL instead of an error for values that are
-- not addresses, so CIDR and range filters on text IP columns never fail a query.
CREATE OR REPLACE FUNCTION netmon_try_inet(value text) RETURNS inet
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF value IS NULL OR value !~ '^[0-9a-fA-F:.]+(/[0-9]{1,3})?$' THEN
    RETURN NULL;
  END IF;
  RETURN value::inet;
EXCEPTION WHEN others THEN
  RETURN NULL;
END;
$$;
