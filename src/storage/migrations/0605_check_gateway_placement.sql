-- Placement by gateway (issue 13): a check may name the gateway (the site) it runs behind
-- instead of one agent; its jobs then go only to that gateway, which hands them to any of its
-- agents. An agent pin still wins when both are set.
ALTER TABLE service_checks ADD COLUMN IF NOT EXISTS gateway_id text;
ALTER TABLE poll_jobs ADD COLUMN IF NOT EXISTS target_gateway_id text;
