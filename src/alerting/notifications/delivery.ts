/**
 * Delivery of notification_deliveries rows (reference 7.3 "Retry vs failover").
 *
 * `dispatchDueDeliveries` claims due `pending` rows (FOR UPDATE SKIP LOCKED, so replicas never
 * send one row twice), sends each through its channel's provider and records the outcome:
 *   - success → `sent` (alert notification_count/last_notification_at, channel health)
 *   - retryable failure (HTTP 5xx/408/429, timeout, connection error, SMTP 4xx) with attempts
 *     left → back to `pending` with `next_attempt_at` = now + backoff (base × 2^(attempt−1))
 *   - otherwise → `failed`; when the channel has a fallback and is not fail_closed, one
 *     failover delivery on the fallback channel (originating_delivery_id set).
 *
 * `status` is written only through the action runner's state writer (issue 11): every outcome
 * is a transition of `deliveryMachine`, guarded by the state it leaves, so a row another replica
 * already concluded (a stale claim taken over) is never overwritten.
 */

import { createHmac } from "node:crypto";
import { type Changes, stateTable, transitionRows } from "../../jsonapi/engine/transitions.ts";
import { defineStateMachine } from "../../jsonapi/state-machine.ts";
import type { AppContext } from "../../kernel/context.ts";
import { parseAddress } from "../../kernel/net/address.ts";
import { guardedRequest } from "../../kernel/net/guarded-request.ts";
import {
  type OutboundPolicy,
  outboundPolicyFor,
  TargetRefusedError,
} from "../../kernel/net/outbound-policy.ts";
import { sql } from "../../storage/sql.ts";
import type { AlertRow } from "../types.ts";
import { alertMatchContext } from "./match-context.ts";
import { evaluateMatchExpression } from "./match-expression.ts";
import { renderWebhookBody } from "./webhook-templates.ts";

export interface DeliveryOptions {
  /** First retry delay; doubles per attempt (default 30 s). */
  backoffBaseMs?: number;
  /** Longest retry delay (default 1 h). */
  backoffMaxMs?: number;
  /** Per-attempt timeout for webhook and SMTP (default 10 s). */
  timeoutMs?: number;
  /** Rows claimed per call (default 50). */
  batchSize?: number;
  /** Deliveries sent at the same time within a batch (default 8). */
  concurrency?: number;
}

export const DELIVERY_STATUSES = [
  "pending",
  "dispatching",
  "sent",
  "failed",
  "expired",
  "cancelled",
  "suppressed",
  "skipped",
] as const;

/**
 * A delivery's life: routing inserts it `pending` (or `suppressed` when the channel is disabled);
 * the dispatcher claims it (`dispatching`, also re-taking a row a dead replica left dispatching
 * past the claim timeout) and records the outcome. `expired` and `skipped` are allowed by the
 * table but nothing writes them.
 */
export const deliveryMachine = defineStateMachine({
  name: "notification-delivery",
  attribute: "status",
  states: DELIVERY_STATUSES,
  initial: ["pending", "suppressed"],
  transitions: {
    claim: { from: ["pending", "dispatching"], to: "dispatching" },
    mark_sent: { from: ["dispatching"], to: "sent" },
    schedule_retry: { from: ["dispatching"], to: "pending" },
    give_up: { from: ["dispatching"], to: "failed" },
    suppress: { from: ["dispatching"], to: "suppressed" },
    cancel: { from: ["dispatching"], to: "cancelled" },
  },
});

export const deliveryTable = stateTable({
  machine: deliveryMachine,
  table: "notification_deliveries",
  key: "id",
  keyType: "uuid",
  touch: "updated_at",
  columns: {
    attempts: "int",
    next_attempt_at: "timestamptz",
    last_error: "text",
    response_status: "int",
    suppression_reason: "text",
    sent_at: "timestamptz",
    payload: "jsonb",
    payload_format: "text",
  },
});

interface DeliveryRow {
  id: string;
  alert_id: string;
  route_id: string | null;
  policy_id: string | null;
  step_number: number;
  repeat_number: number;
  channel_id: string | null;
  lifecycle_reason: string;
  attempts: number;
  max_attempts: number;
  alert_snapshot: AlertRow | null;
  [key: string]: unknown;
}

export interface ChannelRow {
  id: string;
  name: string;
  provider: "webhook" | "email";
  enabled: boolean;
  config: Record<string, unknown>;
  secret_refs: Record<string, unknown>;
  fallback_channel_id: string | null;
  fail_closed: boolean;
  max_attempts: number;
  [key: string]: unknown;
}

export interface SendOutcome {
  ok: boolean;
  retryable: boolean;
  status?: number;
  error?: string;
  payload?: unknown;
  format?: string;
}

/** What a receiver needs beyond the alert row: where to click, and what failed on which host. */
export interface PayloadContext {
  baseUrl?: string;
  check?: { id: string; name: string; check_type: string; target: string; port: number | null } | null;
  device?: { uid: string; hostname: string | null; ip: string | null } | null;
}

export async function payloadContext(ctx: AppContext, alert: AlertRow): Promise<PayloadContext> {
  const check = alert.service_check_id
    ? await ctx.db.one<NonNullable<PayloadContext["check"]>>(
        sql`SELECT id, name, check_type, target, port FROM service_checks WHERE id = ${alert.service_check_id}`,
      )
    : null;
  const deviceUid = alert.device_uid ?? null;
  const device = deviceUid
    ? await ctx.db.one<NonNullable<PayloadContext["device"]>>(
        sql`SELECT uid, hostname, ip FROM devices WHERE uid = ${deviceUid}`,
      )
    : null;
  return { baseUrl: ctx.config.baseUrl, check: check ?? null, device: device ?? null };
}

export function buildPayload(
  d: DeliveryRow,
  alert: AlertRow,
  pc: PayloadContext = {},
): Record<string, unknown> {
  const base = pc.baseUrl?.replace(/\/+$/, "");
  return {
    type: `alert.${d.lifecycle_reason}`,
    // A link back to the alert in the console.
    url: base ? `${base}/alerts/${alert.id}` : null,
    check: pc.check ?? null,
    device: pc.device ?? null,
    delivery_id: d.id,
    lifecycle_reason: d.lifecycle_reason,
    step_number: d.step_number,
    repeat_number: d.repeat_number,
    alert: {
      id: alert.id,
      title: alert.title,
      description: alert.description,
      severity: alert.severity,
      status: alert.status,
      source_type: alert.source_type,
      source_id: alert.source_id,
      device_uid: alert.device_uid,
      agent_uid: alert.agent_uid,
      service_check_id: alert.service_check_id,
      metric_name: alert.metric_name,
      metric_value: alert.metric_value,
      triggered_at: alert.triggered_at,
      acknowledged_at: alert.acknowledged_at,
      acknowledged_by: alert.acknowledged_by,
      resolved_at: alert.resolved_at,
      resolved_by: alert.resolved_by,
      escalation_level: alert.escalation_level,
      metadata: alert.metadata,
    },
  };
}

export async function sendWebhook(
  channel: ChannelRow,
  payload: Record<string, unknown>,
  timeoutMs: number,
  policy: OutboundPolicy,
): Promise<SendOutcome> {
  // The channel's template (Slack, Teams, Discord, PagerDuty or its own) shapes the body; the
  // delivery log keeps the same body with secrets replaced.
  const rendered = renderWebhookBody(channel.config, channel.secret_refs ?? {}, payload);
  const body = JSON.stringify(rendered.send);
  payload = rendered.log as Record<string, unknown>;
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": "netmon-notifier/1",
  };
  for (const [k, v] of Object.entries((channel.config.headers as Record<string, unknown>) ?? {}))
    headers[k.toLowerCase()] = String(v);
  const secret = channel.secret_refs?.webhook_secret;
  if (typeof secret === "string" && secret) {
    headers["x-netmon-signature"] = `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
  }
  try {
    const res = await guardedRequest(policy, String(channel.config.url), {
      method: "POST",
      headers,
      body,
      timeoutMs,
    });
    if (res.status >= 300 && res.status < 400) {
      // Not followed: a redirect could lead anywhere the guard would refuse.
      return {
        ok: false,
        retryable: false,
        status: res.status,
        error: `webhook answered HTTP ${res.status} (redirects are not followed; use the final URL)`,
        payload,
        format: "json",
      };
    }
    if (res.status >= 200 && res.status < 300)
      return { ok: true, retryable: false, status: res.status, payload, format: "json" };
    const retryable = res.status >= 500 || res.status === 429 || res.status === 408;
    return {
      ok: false,
      retryable,
      status: res.status,
      error: `webhook answered HTTP ${res.status}`,
      payload,
      format: "json",
    };
  } catch (err) {
    const e = err as Error & { code?: string };
    if (err instanceof TargetRefusedError) {
      return { ok: false, retryable: false, error: `webhook refused: ${e.message}`, payload, format: "json" };
    }
    const msg =
      e.name === "TimeoutError" ? "webhook timed out" : `webhook request failed: ${e.code ?? e.message}`;
    return { ok: false, retryable: true, error: msg, payload, format: "json" };
  }
}

export function renderEmail(payload: Record<string, unknown>): { subject: string; text: string } {
  const a = payload.alert as Record<string, unknown>;
  const reason = String(payload.lifecycle_reason);
  const prefix = reason === "resolve" ? "RESOLVED" : String(a.severity).toUpperCase();
  const lines = [
    `${a.title}`,
    "",
    `Severity: ${a.severity}`,
    `Status: ${a.status}`,
    `Triggered at: ${a.triggered_at instanceof Date ? a.triggered_at.toISOString() : String(a.triggered_at)}`,
  ];
  if (a.description) lines.push(`Description: ${a.description}`);
  const device = payload.device as Record<string, unknown> | null | undefined;
  const check = payload.check as Record<string, unknown> | null | undefined;
  if (device) lines.push(`Device: ${device.hostname ?? device.uid}${device.ip ? ` (${device.ip})` : ""}`);
  else if (a.device_uid) lines.push(`Device: ${a.device_uid}`);
  if (check)
    lines.push(
      `Check: ${check.name} (${check.check_type} ${check.target}${check.port ? `:${check.port}` : ""})`,
    );
  if (reason === "resolve" && a.resolved_by) lines.push(`Resolved by: ${a.resolved_by}`);
  lines.push(`Alert id: ${a.id}`, `Notification: ${reason} (step ${payload.step_number ?? 0})`);
  if (typeof payload.url === "string") lines.push(`Open: ${payload.url}`);
  return { subject: `[${prefix}] ${a.title}`, text: `${lines.join("\n")}\n` };
}

export async function sendEmail(
  channel: ChannelRow,
  payload: Record<string, unknown>,
  timeoutMs: number,
  policy: OutboundPolicy,
): Promise<SendOutcome> {
  const cfg = channel.config;
  const smtp = (cfg.smtp ?? {}) as Record<string, unknown>;
  const port = Number(smtp.port ?? 25);
  let address: string;
  try {
    // nodemailer resolves names itself: resolve and vet here, hand it the vetted address, and
    // keep the name for TLS (servername) so certificates still verify.
    address = await policy.resolve(String(smtp.host), port);
  } catch (err) {
    const refused = err instanceof TargetRefusedError;
    return {
      ok: false,
      retryable: !refused,
      error: `${refused ? "smtp host refused" : "smtp host lookup failed"}: ${(err as Error).message}`,
      payload,
      format: "plain",
    };
  }
  const user = channel.secret_refs?.smtp_user;
  const pass = channel.secret_refs?.smtp_password;
  // Loaded on the first mail, not at start-up (issue 14: start-up CPU, docs/decisions/0112).
  const { default: nodemailer } = await import("nodemailer");
  const transport = nodemailer.createTransport({
    host: address,
    port,
    secure: smtp.secure === true,
    ignoreTLS: smtp.starttls === false,
    requireTLS: smtp.starttls === true,
    auth: typeof user === "string" && typeof pass === "string" ? { user, pass } : undefined,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    tls: {
      servername: parseAddress(String(smtp.host)) ? undefined : String(smtp.host),
      ...(smtp.tls_reject_unauthorized === false ? { rejectUnauthorized: false } : {}),
    },
  });
  const { subject, text } = renderEmail(payload);
  try {
    const info = await transport.sendMail({
      from: typeof cfg.from === "string" ? cfg.from : "netmon@localhost",
      to: Array.isArray(cfg.to) ? (cfg.to as string[]) : String(cfg.to),
      subject,
      text,
      headers: { "x-netmon-alert-id": String((payload.alert as Record<string, unknown>).id) },
    });
    return { ok: true, retryable: false, payload: { subject, message_id: info.messageId }, format: "plain" };
  } catch (err) {
    const e = err as Error & { responseCode?: number; code?: string };
    const permanent = typeof e.responseCode === "number" && e.responseCode >= 500;
    return {
      ok: false,
      retryable: !permanent,
      status: e.responseCode,
      error: `smtp: ${e.responseCode ? `${e.responseCode} ` : ""}${e.message}`,
      payload: { subject },
      format: "plain",
    };
  } finally {
    transport.close();
  }
}

export function backoffMs(attempt: number, opts: DeliveryOptions): number {
  const base = opts.backoffBaseMs ?? 30_000;
  const max = opts.backoffMaxMs ?? 3_600_000;
  return Math.min(max, base * 2 ** Math.max(0, attempt - 1));
}

/** Send every due delivery once. Returns how many rows were attempted. */
export async function dispatchDueDeliveries(ctx: AppContext, opts: DeliveryOptions = {}): Promise<number> {
  const now = ctx.now();
  // A row still `dispatching` after the claim timeout was claimed by a replica that died mid-send
  // (a send is bounded by timeoutMs, far below it): send it again — at least once, never lost.
  const stale = new Date(now.getTime() - ctx.config.monitoring.notifyClaimTimeoutSeconds * 1000);
  const claimed = await transitionRows<DeliveryRow>(
    ctx.db,
    deliveryTable,
    "claim",
    {
      where: sql`(status = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= ${now}))
         OR (status = 'dispatching' AND updated_at < ${stale})`,
      orderBy: sql`next_attempt_at NULLS FIRST, inserted_at`,
      limit: opts.batchSize ?? 50,
      skipLocked: true,
    },
    { attempts: sql`attempts + 1` },
    now,
  );
  let next = 0;
  const worker = async () => {
    while (next < claimed.length) {
      const d = claimed[next++] as DeliveryRow;
      let outcome: DeliveryOutcome = "failed";
      try {
        outcome = await deliverOne(ctx, d, opts);
      } catch (err) {
        ctx.log.error({ err, delivery_id: d.id }, "notification delivery crashed");
        // Only a delivery still dispatching: one the crash left after its outcome was written keeps it.
        await conclude(ctx, d, "give_up", { last_error: "internal error" });
      }
      ctx.metrics?.deliveries.inc({
        provider: typeof d.provider === "string" ? d.provider : "unknown",
        outcome,
      });
    }
  };
  await Promise.all(
    Array.from({ length: Math.max(1, Math.min(opts.concurrency ?? 8, claimed.length)) }, worker),
  );
  return claimed.length;
}

/** What one delivery attempt ended as (self-metrics label; `retry`: pending again with backoff). */
type DeliveryOutcome = "sent" | "retry" | "failed" | "suppressed" | "cancelled";

async function deliverOne(ctx: AppContext, d: DeliveryRow, opts: DeliveryOptions): Promise<DeliveryOutcome> {
  const channel = d.channel_id
    ? await ctx.db.one<ChannelRow>(sql`SELECT * FROM notification_channels WHERE id = ${d.channel_id}`)
    : undefined;
  const alert =
    (await ctx.db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${d.alert_id}`)) ??
    d.alert_snapshot ??
    undefined;
  if (!channel || !alert) {
    await conclude(ctx, d, "cancel", { last_error: "channel or alert gone" });
    return "cancelled";
  }
  if (!channel.enabled) {
    await conclude(ctx, d, "suppress", { suppression_reason: "channel_disabled" });
    return "suppressed";
  }
  const silence = await activeSilenceFor(ctx, alert);
  if (silence) {
    await conclude(ctx, d, "suppress", {
      suppression_reason: `silenced:${silence.id}`,
      next_attempt_at: null,
    });
    return "suppressed";
  }
  const payload = buildPayload(d, alert, await payloadContext(ctx, alert));
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const out =
    channel.provider === "webhook"
      ? await sendWebhook(channel, payload, timeoutMs, outboundPolicyFor(ctx))
      : await sendEmail(channel, payload, timeoutMs, outboundPolicyFor(ctx));
  const now = ctx.now();
  if (out.ok) {
    await conclude(
      ctx,
      d,
      "mark_sent",
      {
        sent_at: now,
        response_status: out.status ?? null,
        payload: sql`CAST(${JSON.stringify(out.payload ?? null)} AS jsonb)`,
        payload_format: out.format ?? null,
        last_error: null,
        next_attempt_at: null,
      },
      now,
    );
    await ctx.db.query(sql`UPDATE alerts SET notification_count = notification_count + 1, last_notification_at = ${now}
      WHERE id = ${d.alert_id}`);
    await ctx.db.query(sql`UPDATE notification_channels SET health = 'healthy', last_success_at = ${now}, updated_at = ${now}
      WHERE id = ${channel.id}`);
    return "sent";
  }
  const retry = out.retryable && d.attempts < d.max_attempts;
  await ctx.db.query(sql`UPDATE notification_channels SET health = ${retry ? "degraded" : "failing"}, last_failure_at = ${now},
    last_error = ${out.error ?? null}, updated_at = ${now} WHERE id = ${channel.id}`);
  if (retry) {
    const next = new Date(now.getTime() + backoffMs(d.attempts, opts));
    await conclude(
      ctx,
      d,
      "schedule_retry",
      { next_attempt_at: next, last_error: out.error ?? null, response_status: out.status ?? null },
      now,
    );
    return "retry";
  }
  await conclude(
    ctx,
    d,
    "give_up",
    { next_attempt_at: null, last_error: out.error ?? null, response_status: out.status ?? null },
    now,
  );
  if (channel.fallback_channel_id && !channel.fail_closed && d.lifecycle_reason !== "failover") {
    await ctx.db.query(sql`
      INSERT INTO notification_deliveries (alert_id, route_id, policy_id, step_number, repeat_number, channel_id,
        originating_delivery_id, lifecycle_reason, dedupe_key, status, provider, max_attempts, next_attempt_at,
        alert_snapshot, inserted_at, updated_at)
      SELECT ${d.alert_id}, ${d.route_id}, ${d.policy_id}, ${d.step_number}, ${d.repeat_number}, c.id, ${d.id},
        'failover', ${d.id}, 'pending', c.provider, c.max_attempts, ${now}, ${JSON.stringify(alert)}::jsonb, ${now}, ${now}
      FROM notification_channels c WHERE c.id = ${channel.fallback_channel_id}
      ON CONFLICT DO NOTHING`);
  }
  return "failed";
}

/**
 * Record the outcome of a claimed delivery (one guarded UPDATE). A delivery no longer
 * dispatching was concluded by whoever re-took it after the claim timeout: its outcome stands.
 */
async function conclude(
  ctx: AppContext,
  d: DeliveryRow,
  transition: "mark_sent" | "schedule_retry" | "give_up" | "suppress" | "cancel",
  changes: Changes,
  now = ctx.now(),
): Promise<void> {
  const [row] = await transitionRows(ctx.db, deliveryTable, transition, { ids: [d.id] }, changes, now);
  if (!row)
    ctx.log.warn(
      { delivery_id: d.id, transition },
      "notification delivery no longer dispatching (concluded already); this outcome not recorded",
    );
}

/**
 * `POST /api/v2/notification-channels/{id}/test`: one test notification through the channel,
 * now, bypassing routes and rate limits; the outcome updates the channel's health like a real
 * delivery, so a broken channel shows as failing before an alert needs it.
 */
export async function sendTestNotification(
  ctx: AppContext,
  channel: ChannelRow,
  actor: string,
): Promise<{ ok: boolean; status: number | null; error: string | null; sent_at: string }> {
  const now = ctx.now();
  const base = ctx.config.baseUrl.replace(/\/+$/, "");
  const payload = {
    type: "test",
    url: `${base}/rules?tab=channels`,
    check: null,
    device: null,
    lifecycle_reason: "test",
    alert: {
      id: "00000000-0000-0000-0000-000000000000",
      title: `Test notification from netmon (${channel.name})`,
      description: `Sent by ${actor} to check that this channel delivers.`,
      severity: "info",
      status: "pending",
      source_type: "test",
      triggered_at: now.toISOString(),
      metadata: {},
    },
  };
  const out =
    channel.provider === "webhook"
      ? await sendWebhook(channel, payload, 10_000, outboundPolicyFor(ctx))
      : await sendEmail(channel, payload, 10_000, outboundPolicyFor(ctx));
  if (out.ok) {
    await ctx.db.query(sql`UPDATE notification_channels SET health = 'healthy', last_success_at = ${now}, updated_at = ${now}
      WHERE id = ${channel.id}`);
  } else {
    await ctx.db.query(sql`UPDATE notification_channels SET health = 'failing', last_failure_at = ${now},
      last_error = ${out.error ?? null}, updated_at = ${now} WHERE id = ${channel.id}`);
  }
  ctx.log.info(
    { event: "notification_test", channel_id: channel.id, ok: out.ok, status: out.status },
    "test notification",
  );
  return { ok: out.ok, status: out.status ?? null, error: out.error ?? null, sent_at: now.toISOString() };
}

/** The first active silence whose matchers match the alert (silences are few; evaluated here). */
export async function activeSilenceFor(ctx: AppContext, alert: AlertRow): Promise<{ id: string } | null> {
  const now = ctx.now();
  const silences = await ctx.db.many<{ id: string; matchers: unknown }>(
    sql`SELECT id, matchers FROM alert_silences WHERE starts_at <= ${now} AND ends_at > ${now} ORDER BY ends_at DESC LIMIT 1000`,
  );
  if (silences.length === 0) return null;
  const context = await alertMatchContext(ctx.db, alert);
  return silences.find((s) => evaluateMatchExpression(s.matchers, context)) ?? null;
}
