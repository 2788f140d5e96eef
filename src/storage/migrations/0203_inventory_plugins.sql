-- Inventory plugins (issue 20, spec 4.4): only an approved plugin's owner may report a source
-- inventory snapshot. A plugin names the (source, instance, partition) it reports and the user
-- whose credentials (tokens, API keys) submit for it; an admin approves, disables or re-enables it.
CREATE TABLE IF NOT EXISTS inventory_plugins (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  description text,
  source text NOT NULL,
  source_instance text NOT NULL,
  partition text NOT NULL DEFAULT 'default',
  owner_user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'disabled')),
  status_reason text,
  approved_by text,
  approved_at timestamptz,
  last_snapshot_at timestamptz,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (source, source_instance, partition)
);
