/**
 * Notification routing and escalation (reference 7.3).
 *
 * When an alert fires, enabled routes are evaluated by priority (ties by id); the first match
 * wins unless it has `continue`. A matched route records a routing row (its `fired_at` is the
 * clock escalation steps run on). `advanceEscalations` creates the deliveries of every step
 * that is due: step delay elapsed (from fire time, repeated `repeat_count` times every
 * `repeat_interval_seconds`) and its condition holds (`if_unacknowledged`: the alert is still
 * pending or escalated; `always`: the alert is still open). Deliveries are idempotent: one row
 * per (alert, reason, step, repeat, channel). A step after the first escalates the alert.
 * Resolving an alert notifies the channels that were notified (policy `resolve_notifies`).
 */
import type { AppContext } from "../../kernel/context.ts";
import type { Queryable } from "../../storage/db.ts";
import { sql } from "../../storage/sql.ts";
import { recordPolicyEscalation } from "../actions.ts";
import type { AlertRow } from "../types.ts";
import { alertMatchContext, alertOnlyContext } from "./match-context.ts";
import { evaluateMatchExpression } from "./match-expression.ts";

interface RouteRow {
  id: string;
  name: string;
  priority: number;
  match_expression: Record<string, unknown>;
  escalation_policy_id: string;
  continue: boolean;
  dedupe_key_template: string | null;
  [key: string]: unknown;
}

function renderDedupeKey(tpl: string | null, alert: AlertRow): string {
  if (!tpl) return "";
  const ctx = alertOnlyContext(alert);
  return tpl.replace(/\{\{\s*([a-zA-Z0-9_.]+)\s*\}\}/g, (_m, p: string) => {
    let cur: unknown = ctx;
    for (const part of p.split("."))
      cur = cur && typeof cur === "object" ? (cur as Record<string, unknown>)[part] : undefined;
    return cur === undefined || cur === null ? "" : String(cur);
  });
}

/** Routes an alert matches, in evaluation order (first match stops unless `continue`). */
export async function matchingRoutes(q: Queryable, alert: AlertRow): Promise<RouteRow[]> {
  const routes = await q.many<RouteRow>(
    sql`SELECT * FROM notification_routes WHERE enabled ORDER BY priority ASC, id ASC`,
  );
  if (routes.length === 0) return [];
  const ctx = await alertMatchContext(q, alert);
  const out: RouteRow[] = [];
  for (const r of routes) {
    if (!evaluateMatchExpression(r.match_expression ?? {}, ctx)) continue;
    out.push(r);
    if (!r.continue) break;
  }
  return out;
}

/** Route a newly fired alert and create the deliveries that are due now. Returns matched route ids. */
export async function routeAlert(ctx: AppContext, alert: AlertRow): Promise<string[]> {
  const routes = await matchingRoutes(ctx.db, alert);
  const now = ctx.now();
  for (const r of routes) {
    await ctx.db.query(sql`
      INSERT INTO notification_alert_routings (alert_id, route_id, policy_id, fired_at)
      VALUES (${alert.id}, ${r.id}, ${r.escalation_policy_id}, ${now})
      ON CONFLICT (alert_id, route_id) DO NOTHING`);
  }
  if (routes.length > 0) await advanceEscalations(ctx, { alertId: alert.id });
  return routes.map((r) => r.id);
}

interface OpenRouting {
  alert_id: string;
  route_id: string;
  policy_id: string;
  fired_at: Date;
  repeat_count: number;
  repeat_interval_seconds: number | null;
  policy_enabled: boolean;
  dedupe_key_template: string | null;
  [key: string]: unknown;
}

interface StepRow {
  id: string;
  step_number: number;
  delay_seconds: number;
  condition: "always" | "if_unacknowledged";
  [key: string]: unknown;
}

/**
 * Create every due step delivery of open routings (all, or one alert's). Returns the number of
 * deliveries created.
 */
export async function advanceEscalations(ctx: AppContext, opts: { alertId?: string } = {}): Promise<number> {
  const routings = opts.alertId
    ? await ctx.db.many<OpenRouting>(sql`
        SELECT ar.*, p.repeat_count, p.repeat_interval_seconds, p.enabled AS policy_enabled, r.dedupe_key_template
        FROM notification_alert_routings ar
        JOIN notification_escalation_policies p ON p.id = ar.policy_id
        JOIN notification_routes r ON r.id = ar.route_id
        WHERE NOT ar.completed AND ar.alert_id = ${opts.alertId}`)
    : await ctx.db.many<OpenRouting>(sql`
        SELECT ar.*, p.repeat_count, p.repeat_interval_seconds, p.enabled AS policy_enabled, r.dedupe_key_template
        FROM notification_alert_routings ar
        JOIN notification_escalation_policies p ON p.id = ar.policy_id
        JOIN notification_routes r ON r.id = ar.route_id
        WHERE NOT ar.completed ORDER BY ar.fired_at LIMIT 500`);
  let created = 0;
  for (const rt of routings) created += await advanceOne(ctx, rt);
  return created;
}

async function advanceOne(ctx: AppContext, rt: OpenRouting): Promise<number> {
  const alert = await ctx.db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${rt.alert_id}`);
  const complete = () =>
    ctx.db.query(sql`UPDATE notification_alert_routings SET completed = true
      WHERE alert_id = ${rt.alert_id} AND route_id = ${rt.route_id}`);
  if (!alert || !rt.policy_enabled || !["pending", "acknowledged", "escalated"].includes(alert.status)) {
    await complete();
    return 0;
  }
  const steps = await ctx.db.many<StepRow>(
    sql`SELECT * FROM notification_escalation_steps WHERE policy_id = ${rt.policy_id} ORDER BY step_number`,
  );
  if (steps.length === 0) {
    await complete();
    return 0;
  }
  const now = ctx.now().getTime();
  const fired = new Date(rt.fired_at).getTime();
  const interval = (rt.repeat_interval_seconds ?? 0) * 1000;
  const repeats = interval > 0 ? rt.repeat_count : 0;
  const unacked = alert.status === "pending" || alert.status === "escalated";
  const firstStep = steps[0]?.step_number ?? 1;
  const dedupe = renderDedupeKey(rt.dedupe_key_template, alert);
  let created = 0;
  let pendingLater = false;
  for (let r = 0; r <= repeats; r++) {
    for (const s of steps) {
      const due = fired + r * interval + s.delay_seconds * 1000;
      if (due > now) {
        if (s.condition === "always" || unacked) pendingLater = true;
        continue;
      }
      if (s.condition === "if_unacknowledged" && !unacked) continue;
      const reason = r > 0 ? "renotify" : s.step_number === firstStep ? "fire" : "escalate";
      const n = await createStepDeliveries(ctx, alert, rt, s, r, reason, dedupe);
      created += n;
      if (n > 0 && s.step_number !== firstStep && r === 0 && unacked) {
        await recordPolicyEscalation(ctx, alert.id, steps.indexOf(s), `escalation step ${s.step_number}`);
      }
    }
  }
  if (!pendingLater) await complete();
  return created;
}

async function createStepDeliveries(
  ctx: AppContext,
  alert: AlertRow,
  rt: OpenRouting,
  step: StepRow,
  repeat: number,
  reason: string,
  dedupe: string,
): Promise<number> {
  const now = ctx.now();
  const res = await ctx.db.query(sql`
    INSERT INTO notification_deliveries (alert_id, route_id, policy_id, step_number, repeat_number, channel_id,
      lifecycle_reason, dedupe_key, status, suppression_reason, provider, max_attempts, next_attempt_at,
      alert_snapshot, inserted_at, updated_at)
    SELECT ${alert.id}, ${rt.route_id}, ${rt.policy_id}, ${step.step_number}, ${repeat}, c.id, ${reason}, ${dedupe},
      CASE WHEN c.enabled THEN 'pending' ELSE 'suppressed' END,
      CASE WHEN c.enabled THEN NULL ELSE 'channel_disabled' END,
      c.provider, c.max_attempts, ${now}, ${JSON.stringify(alert)}::jsonb, ${now}, ${now}
    FROM notification_escalation_step_channels sc
    JOIN notification_channels c ON c.id = sc.channel_id
    WHERE sc.step_id = ${step.id}
    ON CONFLICT DO NOTHING`);
  return res.rowCount;
}

/** On resolve: tell every channel that was notified about the alert (policy `resolve_notifies`). */
export async function notifyResolved(ctx: AppContext, alert: AlertRow): Promise<number> {
  const now = ctx.now();
  const res = await ctx.db.query(sql`
    INSERT INTO notification_deliveries (alert_id, route_id, policy_id, step_number, repeat_number, channel_id,
      lifecycle_reason, dedupe_key, status, provider, max_attempts, next_attempt_at, alert_snapshot, inserted_at, updated_at)
    SELECT DISTINCT ON (d.channel_id) d.alert_id, d.route_id, d.policy_id, 0, 0, d.channel_id, 'resolve', '',
      'pending', c.provider, c.max_attempts, ${now}, ${JSON.stringify(alert)}::jsonb, ${now}, ${now}
    FROM notification_deliveries d
    JOIN notification_channels c ON c.id = d.channel_id AND c.enabled
    JOIN notification_escalation_policies p ON p.id = d.policy_id AND p.resolve_notifies
    WHERE d.alert_id = ${alert.id} AND d.status = 'sent' AND d.lifecycle_reason <> 'resolve'
    ORDER BY d.channel_id, d.inserted_at
    ON CONFLICT DO NOTHING`);
  await ctx.db.query(
    sql`UPDATE notification_alert_routings SET completed = true WHERE alert_id = ${alert.id}`,
  );
  return res.rowCount;
}

/**
 * Stateful-rule renotify: notify again every enabled channel that received the alert's fire or
 * escalation notification (one delivery per channel per renotify round).
 */
export async function notifyRenotify(ctx: AppContext, alert: AlertRow): Promise<number> {
  const now = ctx.now();
  const prev = await ctx.db.one<{ n: number }>(sql`
    SELECT count(DISTINCT repeat_number)::int AS n FROM notification_deliveries
    WHERE alert_id = ${alert.id} AND lifecycle_reason = 'renotify' AND step_number = 0`);
  const round = (prev?.n ?? 0) + 1;
  const res = await ctx.db.query(sql`
    INSERT INTO notification_deliveries (alert_id, route_id, policy_id, step_number, repeat_number, channel_id,
      lifecycle_reason, dedupe_key, status, provider, max_attempts, next_attempt_at, alert_snapshot, inserted_at, updated_at)
    SELECT DISTINCT ON (d.channel_id) d.alert_id, d.route_id, d.policy_id, 0, ${round}, d.channel_id, 'renotify', '',
      'pending', c.provider, c.max_attempts, ${now}, ${JSON.stringify(alert)}::jsonb, ${now}, ${now}
    FROM notification_deliveries d
    JOIN notification_channels c ON c.id = d.channel_id AND c.enabled
    WHERE d.alert_id = ${alert.id} AND d.status = 'sent' AND d.lifecycle_reason IN ('fire', 'escalate', 'failover')
    ORDER BY d.channel_id, d.inserted_at
    ON CONFLICT DO NOTHING`);
  return res.rowCount;
}
