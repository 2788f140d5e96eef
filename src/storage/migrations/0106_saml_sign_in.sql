-- SAML 2.0 sign-in (spec 5, issue 17): the identity provider as its metadata describes it
-- (from a URL or pasted XML; its sign-on URL and signing certificates parsed when the mode is
-- enabled), this service provider's entity id, and the assertion ids already used (replay
-- protection: remembered until the assertion would have expired anyway).
ALTER TABLE auth_settings
  ADD COLUMN IF NOT EXISTS saml_metadata_url text,
  ADD COLUMN IF NOT EXISTS saml_metadata_xml text,
  ADD COLUMN IF NOT EXISTS saml_idp_entry_point text,
  ADD COLUMN IF NOT EXISTS saml_idp_certs text[],
  ADD COLUMN IF NOT EXISTS saml_sp_entity_id text;

CREATE TABLE IF NOT EXISTS saml_assertions (
  id text PRIMARY KEY,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS saml_assertions_expires_at_idx ON saml_assertions (expires_at);
