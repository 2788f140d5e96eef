-- OIDC sign-in (spec 5, issue 17): the relying party's settings, the client secret sealed with
-- a key derived from the instance secret key, and the in-flight logins (state → nonce and PKCE
-- verifier), single use and short-lived, shared by every replica.
ALTER TABLE auth_settings
  ADD COLUMN IF NOT EXISTS oidc_discovery_url text,
  ADD COLUMN IF NOT EXISTS oidc_client_id text,
  ADD COLUMN IF NOT EXISTS oidc_client_secret_sealed text,
  ADD COLUMN IF NOT EXISTS oidc_scopes text NOT NULL DEFAULT 'openid email profile';

CREATE TABLE IF NOT EXISTS oidc_logins (
  state_hash text PRIMARY KEY,
  nonce text NOT NULL,
  code_verifier text NOT NULL,
  return_to text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS oidc_logins_created_at_idx ON oidc_logins (created_at);
