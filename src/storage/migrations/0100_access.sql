-- Access domain: users, role profiles, sessions, API tokens, API keys, control-plane
-- credentials and rate-limit counters.

CREATE TABLE IF NOT EXISTS role_profiles (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- Set for the built-in profiles (viewer/operator/admin); NULL for custom ones.
  system_name text UNIQUE,
  name text NOT NULL,
  description text,
  base_role text NOT NULL CHECK (base_role IN ('viewer', 'operator', 'admin')),
  -- Permissions added to / removed from the base role's default set.
  grants text[] NOT NULL DEFAULT '{}',
  revokes text[] NOT NULL DEFAULT '{}',
  system boolean NOT NULL DEFAULT false,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS role_profiles_name_key ON role_profiles (lower(name));

CREATE TABLE IF NOT EXISTS users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email text NOT NULL,
  display_name text,
  role text NOT NULL DEFAULT 'viewer' CHECK (role IN ('viewer', 'operator', 'admin')),
  role_profile_id uuid REFERENCES role_profiles (id) ON DELETE RESTRICT,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  password_hash text,
  external_id text,
  external_provider text,
  local_login_enabled boolean NOT NULL DEFAULT true,
  -- Every token issued before this instant is rejected (user-wide revocation).
  revoked_before timestamptz,
  confirmed_at timestamptz,
  last_login_at timestamptz,
  last_auth_method text,
  authenticated_at timestamptz,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS users_email_key ON users (lower(email));
CREATE UNIQUE INDEX IF NOT EXISTS users_external_id_key ON users (external_provider, external_id)
  WHERE external_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS users_inserted_at_idx ON users (inserted_at DESC);

-- Browser sessions. Only a SHA-256 of the cookie value is stored.
CREATE TABLE IF NOT EXISTS sessions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  token_hash text NOT NULL UNIQUE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  ip text,
  user_agent text
);
CREATE INDEX IF NOT EXISTS sessions_user_idx ON sessions (user_id);

-- Bearer JWTs: the token itself is never stored; its jti is, so it can be listed and revoked.
CREATE TABLE IF NOT EXISTS api_tokens (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  jti text NOT NULL UNIQUE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL,
  scopes text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz,
  revoked_at timestamptz,
  last_used_at timestamptz
);
CREATE INDEX IF NOT EXISTS api_tokens_user_idx ON api_tokens (user_id);

-- X-API-Key credentials, created by admins; stored as SHA-256, acting as their owner.
CREATE TABLE IF NOT EXISTS api_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  key_hash text NOT NULL UNIQUE,
  key_prefix text NOT NULL,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz,
  revoked_at timestamptz,
  last_used_at timestamptz
);

-- Gateway / agent bearer credentials (control plane).
CREATE TABLE IF NOT EXISTS control_credentials (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  jti text NOT NULL UNIQUE,
  kind text NOT NULL CHECK (kind IN ('gateway', 'agent')),
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz,
  revoked_at timestamptz,
  last_used_at timestamptz
);
CREATE INDEX IF NOT EXISTS control_credentials_name_idx ON control_credentials (kind, name);

-- Sliding-window rate-limit counters (used when the database is PostgreSQL so replicas
-- share one budget). One row per key and second.
CREATE TABLE IF NOT EXISTS rate_limit_counters (
  key text NOT NULL,
  second bigint NOT NULL,
  hits integer NOT NULL,
  PRIMARY KEY (key, second)
);

-- The built-in profiles, one per role (their permissions are the role defaults).
INSERT INTO role_profiles (system_name, name, description, base_role, system) VALUES
  ('admin', 'Admin', 'Full access to the platform', 'admin', true),
  ('operator', 'Operator', 'Create and update resources without destructive deletes', 'operator', true),
  ('viewer', 'Viewer', 'Read-only access', 'viewer', true)
ON CONFLICT (system_name) DO NOTHING;
