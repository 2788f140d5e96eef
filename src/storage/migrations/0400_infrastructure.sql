-- JSON:API infrastructure resources: gateways, agents, agent release rollouts
-- (reference §2.1, §2.2, §2.5). Owned by src/jsonapi/infrastructure.

CREATE TABLE IF NOT EXISTS gateways (
  gateway_id text PRIMARY KEY,
  component_id text,
  registration_source text,
  status text NOT NULL DEFAULT 'inactive'
    CHECK (status IN ('inactive', 'healthy', 'degraded', 'offline', 'recovering', 'maintenance', 'draining')),
  status_reason text,
  spiffe_identity text,
  first_registered timestamptz,
  first_seen timestamptz,
  last_seen timestamptz,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_by text,
  is_healthy boolean NOT NULL DEFAULT true,
  agent_count integer NOT NULL DEFAULT 0,
  checker_count integer NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now(),
  partition_id uuid,
  -- Insertion order: the default sort, so offset pages are stable under concurrent inserts.
  seq bigint GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX IF NOT EXISTS gateways_status_idx ON gateways (status);
CREATE UNIQUE INDEX IF NOT EXISTS gateways_seq_idx ON gateways (seq);

CREATE TABLE IF NOT EXISTS agents (
  uid text PRIMARY KEY,
  name text,
  type_id integer NOT NULL DEFAULT 0,
  type text,
  uid_alt text,
  vendor_name text DEFAULT 'netmon',
  version text,
  desired_version text,
  policies jsonb NOT NULL DEFAULT '[]'::jsonb,
  gateway_id text,
  device_uid text,
  capabilities jsonb NOT NULL DEFAULT '[]'::jsonb,
  host text,
  port integer CHECK (port IS NULL OR (port >= 0 AND port <= 65535)),
  spiffe_identity text,
  status text NOT NULL DEFAULT 'connecting'
    CHECK (status IN ('connecting', 'connected', 'degraded', 'disconnected', 'unavailable')),
  status_reason text,
  is_healthy boolean NOT NULL DEFAULT true,
  first_seen_time timestamptz,
  last_seen_time timestamptz,
  created_time timestamptz,
  modified_time timestamptz,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  release_rollout_state text CHECK (release_rollout_state IS NULL OR release_rollout_state IN
    ('pending', 'dispatched', 'downloading', 'verifying', 'staged', 'restarting', 'healthy', 'failed', 'rolled_back', 'canceled')),
  last_update_at timestamptz,
  last_update_error text,
  config_source text CHECK (config_source IS NULL OR config_source IN ('remote', 'local', 'cached', 'unassigned')),
  config_health text NOT NULL DEFAULT 'unknown' CHECK (config_health IN ('unknown', 'healthy', 'unhealthy')),
  config_pushed_at timestamptz,
  plugin_engine_max_memory_mb integer,
  plugin_engine_max_cpu_ms integer,
  plugin_engine_max_concurrent integer,
  plugin_engine_max_open_connections integer,
  seq bigint GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX IF NOT EXISTS agents_gateway_idx ON agents (gateway_id);
CREATE INDEX IF NOT EXISTS agents_status_idx ON agents (status);
CREATE UNIQUE INDEX IF NOT EXISTS agents_seq_idx ON agents (seq);

-- A release rollout: move a set of agents to desired_version, batch_size at a time.
CREATE TABLE IF NOT EXISTS agent_release_rollouts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  desired_version text NOT NULL,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'completed', 'canceled')),
  batch_size integer NOT NULL DEFAULT 10 CHECK (batch_size > 0),
  batch_delay_seconds integer NOT NULL DEFAULT 0 CHECK (batch_delay_seconds >= 0),
  notes text,
  created_by text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);

-- Per-agent target of a rollout; its status is mirrored into agents.release_rollout_state.
CREATE TABLE IF NOT EXISTS agent_release_targets (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  rollout_id uuid NOT NULL REFERENCES agent_release_rollouts (id) ON DELETE CASCADE,
  agent_uid text NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN
    ('pending', 'dispatched', 'downloading', 'verifying', 'staged', 'restarting', 'healthy', 'failed', 'rolled_back', 'canceled')),
  progress_percent integer NOT NULL DEFAULT 0 CHECK (progress_percent BETWEEN 0 AND 100),
  command_id text,
  current_version text,
  message text,
  last_error text,
  dispatched_at timestamptz,
  completed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (rollout_id, agent_uid)
);
CREATE INDEX IF NOT EXISTS agent_release_targets_agent_idx ON agent_release_targets (agent_uid);
