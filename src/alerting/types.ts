/** Alerting enumerations and row shapes (tables from migration 0500_alerting.sql). */

export const ALERT_SEVERITIES = ["info", "warning", "critical", "emergency"] as const;
export type AlertSeverity = (typeof ALERT_SEVERITIES)[number];

export const ALERT_STATUSES = ["pending", "acknowledged", "escalated", "suppressed", "resolved"] as const;
export type AlertStatus = (typeof ALERT_STATUSES)[number];

/** Statuses of an open alert (`/alerts/active`; suppressed is excluded, as the original). */
export const ACTIVE_STATUSES: readonly AlertStatus[] = ["pending", "acknowledged", "escalated"];

export const ALERT_SOURCE_TYPES = [
  "service_check",
  "device",
  "gateway",
  "agent",
  "event",
  "system",
  "external",
] as const;
export type AlertSourceType = (typeof ALERT_SOURCE_TYPES)[number];

export const COMPARISONS = ["greater_than", "less_than", "equals", "not_equals"] as const;
export type Comparison = (typeof COMPARISONS)[number];

export interface AlertRow {
  id: string;
  title: string;
  description: string | null;
  severity: AlertSeverity;
  status: AlertStatus;
  source_type: AlertSourceType | null;
  source_id: string | null;
  service_check_id: string | null;
  device_uid: string | null;
  agent_uid: string | null;
  event_id: string | null;
  event_time: Date | null;
  metric_name: string | null;
  metric_value: number | null;
  threshold_value: number | null;
  comparison: Comparison | null;
  triggered_at: Date;
  acknowledged_at: Date | null;
  acknowledged_by: string | null;
  acknowledged_by_user_id: string | null;
  acknowledge_note: string | null;
  resolved_at: Date | null;
  resolved_by: string | null;
  resolution_note: string | null;
  escalated_at: Date | null;
  escalation_level: number;
  escalation_reason: string | null;
  suppressed_until: Date | null;
  snooze_until: Date | null;
  last_notification_at: Date | null;
  notification_count: number;
  metadata: Record<string, unknown>;
  tags: string[];
  incident_key: string | null;
  created_at: Date;
  updated_at: Date;
  [key: string]: unknown;
}

/**
 * A log or event as the rule matchers see it (reference 7.1/7.2). For `signal: event`,
 * log_name acts as subject, log_provider as service_name, message as body.
 */
export interface SignalRecord {
  kind: "log" | "event";
  id: string | null;
  timestamp: Date;
  subject: string | null;
  service_name: string | null;
  severity_number: number | null;
  severity_text: string | null;
  body: string | null;
  attributes: Record<string, unknown>;
  resource_attributes: Record<string, unknown>;
  device_uid: string | null;
  host: string | null;
}
