-- Instance authentication settings (spec 5, issue 17): one row. `mode` chooses how browsers
-- sign in; the proxy_* columns configure the gateway-proxy JWT mode. OIDC and SAML columns are
-- added by their own migrations when those modes land.
CREATE TABLE IF NOT EXISTS auth_settings (
  id integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  mode text NOT NULL DEFAULT 'password' CHECK (mode IN ('password', 'oidc', 'saml', 'proxy_jwt')),
  proxy_header text NOT NULL DEFAULT 'Authorization',
  proxy_jwks_url text,
  proxy_public_key_pem text,
  proxy_issuer text,
  proxy_audience text,
  claim_mappings jsonb NOT NULL DEFAULT '{"email": "email", "name": "name", "sub": "sub"}',
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by text
);
INSERT INTO auth_settings (id) VALUES (1) ON CONFLICT (id) DO NOTHING;
