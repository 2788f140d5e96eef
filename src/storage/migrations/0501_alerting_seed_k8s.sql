-- Managed rules of the Kubernetes node NotReady incident flow (reference 7.4):
-- the event rule promotes readiness logs to events without alerting by itself, and the
-- stateful rule opens one critical alert per (cluster_id, node) and clears it on node.ready.
INSERT INTO event_rules (name, description, enabled, priority, source_type, source, match, event, managed)
VALUES (
  'k8s_node_readiness',
  'Promotes Kubernetes node readiness flips (node.not_ready / node.ready) to events.',
  true, 10, 'log', '{"stream": "logs.internal.k8s"}'::jsonb,
  '{"event_type": ["node.not_ready", "node.ready"]}'::jsonb,
  '{"alert": false, "activity_name": "Kubernetes node readiness"}'::jsonb,
  true
) ON CONFLICT (name) DO NOTHING;

INSERT INTO stateful_alert_rules (name, description, enabled, priority, signal, match, group_by, threshold,
  window_seconds, bucket_seconds, cooldown_seconds, renotify_seconds, event, alert, managed)
VALUES (
  'k8s_node_not_ready',
  'One critical incident per Kubernetes node that becomes NotReady; cleared when it is Ready again.',
  true, 10, 'event',
  '{"event_type": "node.not_ready"}'::jsonb,
  ARRAY['cluster_id', 'node'],
  1, 300, 60, 300, 21600,
  '{}'::jsonb,
  '{"title": "{{body}}", "severity": "critical", "auto_resolve": false,
    "recover_match": {"event_type": "node.ready"},
    "metadata": {"incident_rule_name": "k8s_node_not_ready"}}'::jsonb,
  true
) ON CONFLICT (name) DO NOTHING;
