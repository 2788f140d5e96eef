-- Access changes are announced on the channel `netmon_access` (payload: the table name) so
-- every server on this database drops its cached credential lookups (src/access/
-- credential-cache.ts). NOTIFY is transactional: it is delivered when the change commits.
--
-- Every INSERT, DELETE and TRUNCATE of the tables a credential lookup reads announces a change
-- (statement-level). An UPDATE announces one when any column other than the bookkeeping ones
-- changed (row-level with a WHEN condition, so a future column is covered without a new
-- migration): last_used_at / last_seen_at are written at most once a minute by the lookups
-- themselves, and last_login_at / authenticated_at / last_auth_method by sign-in.
CREATE OR REPLACE FUNCTION netmon_access_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('netmon_access', TG_TABLE_NAME);
  RETURN NULL;
END
$$;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT * FROM (VALUES
    ('users', ARRAY['last_login_at', 'authenticated_at', 'last_auth_method']),
    ('role_profiles', ARRAY[]::text[]),
    ('sessions', ARRAY['last_seen_at']),
    ('api_tokens', ARRAY['last_used_at']),
    ('api_keys', ARRAY['last_used_at']),
    ('control_credentials', ARRAY['last_used_at'])
  ) AS v (tbl, bookkeeping)
  LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS netmon_access_changed_stmt ON %I', t.tbl);
    EXECUTE format(
      'CREATE TRIGGER netmon_access_changed_stmt AFTER INSERT OR DELETE OR TRUNCATE ON %I '
      'FOR EACH STATEMENT EXECUTE FUNCTION netmon_access_changed()', t.tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS netmon_access_changed_row ON %I', t.tbl);
    EXECUTE format(
      'CREATE TRIGGER netmon_access_changed_row AFTER UPDATE ON %I FOR EACH ROW '
      'WHEN ((to_jsonb(OLD) - %L::text[]) IS DISTINCT FROM (to_jsonb(NEW) - %L::text[])) '
      'EXECUTE FUNCTION netmon_access_changed()', t.tbl, t.bookkeeping, t.bookkeeping);
  END LOOP;
END
$$;
