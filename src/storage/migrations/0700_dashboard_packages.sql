-- Signed dashboard packages (spec 4.6, 4.7). A package is one dashboard id at one version: its
-- closed manifest, the renderer's SHA-256 (the bytes live content-addressed under the data
-- directory, see src/dashboards/renderer-store.ts) and where it is mounted in the console.
CREATE TABLE IF NOT EXISTS dashboard_packages (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  dashboard_id text NOT NULL,
  version text NOT NULL,
  name text NOT NULL,
  manifest jsonb NOT NULL,
  content_hash text NOT NULL,
  renderer_path text NOT NULL,
  renderer_media_type text NOT NULL,
  renderer_size bigint NOT NULL,
  route_slug text,
  status text NOT NULL DEFAULT 'staged' CHECK (status IN ('staged', 'enabled', 'disabled')),
  verification_status text NOT NULL DEFAULT 'pending'
    CHECK (verification_status IN ('pending', 'verified', 'failed')),
  verification_error text,
  signature text,
  signed_by_key_id uuid,
  published_by uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT dashboard_packages_id_version UNIQUE (dashboard_id, version),
  -- An enabled package is always mounted somewhere.
  CONSTRAINT dashboard_packages_enabled_has_route CHECK (status <> 'enabled' OR route_slug IS NOT NULL)
);

-- Invariant 1: while enabled, a slug belongs to one package. The database decides concurrent
-- enables (the loser's insert/update fails with 23505), so any number of replicas agree.
CREATE UNIQUE INDEX IF NOT EXISTS dashboard_packages_enabled_slug
  ON dashboard_packages (route_slug) WHERE status = 'enabled';
CREATE INDEX IF NOT EXISTS dashboard_packages_slug ON dashboard_packages (route_slug);

-- Invariant 3: one record per publish, enable and disable (successes and refusals).
CREATE TABLE IF NOT EXISTS dashboard_package_audit (
  id bigserial PRIMARY KEY,
  actor_user_id uuid,
  jti text,
  action text NOT NULL,
  package_id uuid,
  dashboard_id text,
  version text,
  route_slug text,
  content_hash text,
  result text NOT NULL,
  reason text,
  at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS dashboard_package_audit_at ON dashboard_package_audit (at);

-- Ed25519 public keys whose signatures make a package `verified` at publish.
CREATE TABLE IF NOT EXISTS dashboard_publisher_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  public_key text NOT NULL UNIQUE,
  fingerprint text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);
