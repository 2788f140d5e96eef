-- Pools by label (issue 13): an operator labels agents (site=dc1, role=edge) and a check may
-- name a label selector instead of one agent; its jobs go to any connected agent whose labels
-- contain every pair of the selector. The selector travels on the job so a claim decides
-- without reading the check.
ALTER TABLE agents ADD COLUMN IF NOT EXISTS labels jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE service_checks ADD COLUMN IF NOT EXISTS agent_labels jsonb;
ALTER TABLE poll_jobs ADD COLUMN IF NOT EXISTS target_agent_labels jsonb;
-- A monitoring profile may place its checks on a pool too.
ALTER TABLE monitoring_profiles ADD COLUMN IF NOT EXISTS agent_labels jsonb;
