-- Credential cache invalidation (src/access/credential-cache.ts). Every change to a credential,
-- a user or a role profile raises NOTIFY netmon_credentials, whoever the writer is: each
-- replica LISTENs and evicts what it cached. Payload: the user id whose credentials changed,
-- or '*' (role profiles, control-plane credentials, TRUNCATE, a row moved to another user).
-- TG_ARGV[0] names a column whose change alone notifies nobody (the throttled last-use
-- touches), so the touches do not evict the credential they touch.
CREATE OR REPLACE FUNCTION netmon_credentials_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_old jsonb;
  v_new jsonb;
  v_who text := '*';
BEGIN
  IF TG_LEVEL = 'STATEMENT' THEN
    PERFORM pg_notify('netmon_credentials', '*');
    RETURN NULL;
  END IF;
  v_old := to_jsonb(OLD);
  IF TG_OP = 'UPDATE' THEN
    v_new := to_jsonb(NEW);
    IF TG_NARGS > 0 AND (v_old - TG_ARGV[0]) = (v_new - TG_ARGV[0]) THEN
      RETURN NULL;
    END IF;
  END IF;
  IF TG_TABLE_NAME = 'users' THEN
    v_who := v_old ->> 'id';
  ELSIF TG_TABLE_NAME IN ('api_tokens', 'api_keys', 'sessions')
    AND (v_new IS NULL OR v_new ->> 'user_id' = v_old ->> 'user_id') THEN
    v_who := v_old ->> 'user_id';
  END IF;
  PERFORM pg_notify('netmon_credentials', COALESCE(v_who, '*'));
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS netmon_credentials_changed ON users;
CREATE TRIGGER netmon_credentials_changed AFTER UPDATE OR DELETE ON users
  FOR EACH ROW EXECUTE FUNCTION netmon_credentials_changed();
DROP TRIGGER IF EXISTS netmon_credentials_changed ON role_profiles;
CREATE TRIGGER netmon_credentials_changed AFTER UPDATE OR DELETE ON role_profiles
  FOR EACH ROW EXECUTE FUNCTION netmon_credentials_changed();
DROP TRIGGER IF EXISTS netmon_credentials_changed ON api_tokens;
CREATE TRIGGER netmon_credentials_changed AFTER UPDATE OR DELETE ON api_tokens
  FOR EACH ROW EXECUTE FUNCTION netmon_credentials_changed('last_used_at');
DROP TRIGGER IF EXISTS netmon_credentials_changed ON api_keys;
CREATE TRIGGER netmon_credentials_changed AFTER UPDATE OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION netmon_credentials_changed('last_used_at');
DROP TRIGGER IF EXISTS netmon_credentials_changed ON sessions;
CREATE TRIGGER netmon_credentials_changed AFTER UPDATE OR DELETE ON sessions
  FOR EACH ROW EXECUTE FUNCTION netmon_credentials_changed('last_seen_at');
DROP TRIGGER IF EXISTS netmon_credentials_changed ON control_credentials;
CREATE TRIGGER netmon_credentials_changed AFTER UPDATE OR DELETE ON control_credentials
  FOR EACH ROW EXECUTE FUNCTION netmon_credentials_changed('last_used_at');

DROP TRIGGER IF EXISTS netmon_credentials_truncated ON users;
CREATE TRIGGER netmon_credentials_truncated AFTER TRUNCATE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION netmon_credentials_changed();
DROP TRIGGER IF EXISTS netmon_credentials_truncated ON role_profiles;
CREATE TRIGGER netmon_credentials_truncated AFTER TRUNCATE ON role_profiles
  FOR EACH STATEMENT EXECUTE FUNCTION netmon_credentials_changed();
DROP TRIGGER IF EXISTS netmon_credentials_truncated ON api_tokens;
CREATE TRIGGER netmon_credentials_truncated AFTER TRUNCATE ON api_tokens
  FOR EACH STATEMENT EXECUTE FUNCTION netmon_credentials_changed();
DROP TRIGGER IF EXISTS netmon_credentials_truncated ON api_keys;
CREATE TRIGGER netmon_credentials_truncated AFTER TRUNCATE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION netmon_credentials_changed();
DROP TRIGGER IF EXISTS netmon_credentials_truncated ON sessions;
CREATE TRIGGER netmon_credentials_truncated AFTER TRUNCATE ON sessions
  FOR EACH STATEMENT EXECUTE FUNCTION netmon_credentials_changed();
DROP TRIGGER IF EXISTS netmon_credentials_truncated ON control_credentials;
CREATE TRIGGER netmon_credentials_truncated AFTER TRUNCATE ON control_credentials
  FOR EACH STATEMENT EXECUTE FUNCTION netmon_credentials_changed();
