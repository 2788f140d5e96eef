/**
 * Stateful alert rules (reference 7.1): count matching records per group over a sliding
 * window of buckets; at `threshold` open one alert per (rule, group key); resolve it when the
 * window count falls below the threshold (unless `alert.auto_resolve` is false) or when a
 * record matches `alert.recover_match` (e.g. node.ready clears k8s_node_not_ready).
 *
 * State per (rule, group) lives in `stateful_alert_rule_states` and is updated under its row
 * lock, so concurrent records for one group serialise. History rows record fire, resolve,
 * cooldown, renotify, rollover and recover. Neither is exposed over the API (behaviour 5).
 */
import { type Actor, hasRole, SYSTEM_ACTOR } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import {
  AuthenticationRequiredError,
  ForbiddenError,
  NotFoundError,
  ValidationError,
} from "../kernel/errors.ts";
import type { Db, Queryable } from "../storage/db.ts";
import { asDomainError } from "../storage/db-error.ts";
import { sql } from "../storage/sql.ts";
import { applyResolve, emitAlertLifecycle, insertAlert } from "./lifecycle.ts";
import { lookupPath, matches, validateMatch } from "./match.ts";
import { ALERT_SEVERITIES, type AlertRow, type AlertSeverity, type SignalRecord } from "./types.ts";

export interface StatefulRuleRow {
  id: string;
  name: string;
  description: string | null;
  enabled: boolean;
  priority: number;
  signal: "log" | "event";
  match: Record<string, unknown>;
  group_by: string[];
  threshold: number;
  window_seconds: number;
  bucket_seconds: number;
  cooldown_seconds: number;
  renotify_seconds: number;
  event: Record<string, unknown>;
  alert: Record<string, unknown>;
  managed: boolean;
  inserted_at: Date;
  updated_at: Date;
  [key: string]: unknown;
}

interface StateRow {
  rule_id: string;
  group_key: string;
  buckets: Record<string, number>;
  alert_id: string | null;
  last_seen_at: Date | null;
  last_fired_at: Date | null;
  cooldown_until: Date | null;
  last_notification_at: Date | null;
  [key: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Permissions and validation (behaviour 4: reads viewer+, mutations operator+).

export function assertCanReadStatefulRules(actor: Actor | null): void {
  if (!actor) throw new AuthenticationRequiredError();
  if (!hasRole(actor, "viewer")) throw new ForbiddenError();
}

export function assertCanWriteStatefulRules(actor: Actor | null): void {
  if (!actor) throw new AuthenticationRequiredError();
  if (!hasRole(actor, "operator")) throw new ForbiddenError();
}

export interface StatefulRuleInput {
  name?: string;
  description?: string | null;
  enabled?: boolean;
  priority?: number;
  signal?: "log" | "event";
  match?: Record<string, unknown>;
  group_by?: string[];
  threshold?: number;
  window_seconds?: number;
  bucket_seconds?: number;
  cooldown_seconds?: number;
  renotify_seconds?: number;
  event?: Record<string, unknown>;
  alert?: Record<string, unknown>;
}

const ptr = (f: string) => ({ source: { pointer: `/data/attributes/${f}` } });

/** Validate a full rule (the merged values after create or update). */
export function validateStatefulRule(r: StatefulRuleInput): void {
  if (typeof r.name !== "string" || r.name.trim() === "")
    throw new ValidationError("name is required", ptr("name"));
  if (r.signal !== undefined && r.signal !== "log" && r.signal !== "event") {
    throw new ValidationError("signal must be one of log, event", ptr("signal"));
  }
  for (const f of ["threshold", "window_seconds", "bucket_seconds"] as const) {
    const v = r[f];
    if (v !== undefined && (!Number.isInteger(v) || v <= 0))
      throw new ValidationError(`${f} must be greater than zero`, ptr(f));
  }
  for (const f of ["cooldown_seconds", "renotify_seconds"] as const) {
    const v = r[f];
    if (v !== undefined && (!Number.isInteger(v) || v < 0))
      throw new ValidationError(`${f} must be zero or more`, ptr(f));
  }
  const w = r.window_seconds ?? 600;
  const b = r.bucket_seconds ?? 60;
  if (w % b !== 0) throw new ValidationError("must divide window_seconds", ptr("bucket_seconds"));
  validateMatch(r.match, "/data/attributes/match");
  if (
    r.group_by !== undefined &&
    (!Array.isArray(r.group_by) || r.group_by.some((g) => typeof g !== "string" || !g))
  ) {
    throw new ValidationError("group_by must be an array of non-empty strings", ptr("group_by"));
  }
  const alert = r.alert ?? {};
  if (alert.severity !== undefined && !ALERT_SEVERITIES.includes(alert.severity as AlertSeverity)) {
    throw new ValidationError(`alert.severity must be one of ${ALERT_SEVERITIES.join(", ")}`, ptr("alert"));
  }
  if (alert.recover_match !== undefined)
    validateMatch(alert.recover_match, "/data/attributes/alert/recover_match");
}

// ---------------------------------------------------------------------------------------------
// Cache (same scheme as event rules: local drop + shared version).

const caches = new WeakMap<Db | Queryable, { version: number; rules: StatefulRuleRow[] }>();

export function invalidateStatefulRuleCache(db: Db | Queryable): void {
  caches.delete(db);
}

export async function bumpStatefulRuleVersion(q: Queryable): Promise<void> {
  await q.query(
    sql`UPDATE alerting_rule_versions SET version = version + 1 WHERE kind = 'stateful_alert_rules'`,
  );
}

export async function activeStatefulRules(db: Db): Promise<StatefulRuleRow[]> {
  const v = await db.one<{ version: number }>(
    sql`SELECT version FROM alerting_rule_versions WHERE kind = 'stateful_alert_rules'`,
  );
  const version = Number(v?.version ?? 0);
  const cached = caches.get(db);
  if (cached && cached.version === version) return cached.rules;
  const rules = await db.many<StatefulRuleRow>(
    sql`SELECT * FROM stateful_alert_rules WHERE enabled ORDER BY priority ASC, inserted_at ASC, id ASC`,
  );
  caches.set(db, { version, rules });
  return rules;
}

// ---------------------------------------------------------------------------------------------
// CRUD domain functions.

export async function createStatefulRule(
  ctx: AppContext,
  actor: Actor | null,
  input: StatefulRuleInput,
): Promise<StatefulRuleRow> {
  assertCanWriteStatefulRules(actor);
  validateStatefulRule(input);
  const now = ctx.now();
  try {
    return await ctx.db.transaction(async (tx) => {
      const row = await tx.one<StatefulRuleRow>(sql`
        INSERT INTO stateful_alert_rules (name, description, enabled, priority, signal, match, group_by, threshold,
          window_seconds, bucket_seconds, cooldown_seconds, renotify_seconds, event, alert, inserted_at, updated_at)
        VALUES (${input.name}, ${input.description ?? null}, ${input.enabled ?? true}, ${input.priority ?? 100},
          ${input.signal ?? "log"}, ${JSON.stringify(input.match ?? {})}::jsonb, ${input.group_by ?? []}::text[],
          ${input.threshold ?? 5}, ${input.window_seconds ?? 600}, ${input.bucket_seconds ?? 60},
          ${input.cooldown_seconds ?? 300}, ${input.renotify_seconds ?? 21600},
          ${JSON.stringify(input.event ?? {})}::jsonb, ${JSON.stringify(input.alert ?? {})}::jsonb, ${now}, ${now})
        RETURNING *`);
      await bumpStatefulRuleVersion(tx);
      return row as StatefulRuleRow;
    });
  } catch (err) {
    throw asDomainError(err, { message: "a stateful alert rule with this name already exists" });
  } finally {
    invalidateStatefulRuleCache(ctx.db);
  }
}

export async function updateStatefulRule(
  ctx: AppContext,
  actor: Actor | null,
  id: string,
  input: StatefulRuleInput,
): Promise<StatefulRuleRow> {
  assertCanWriteStatefulRules(actor);
  const now = ctx.now();
  try {
    return await ctx.db.transaction(async (tx) => {
      const cur = await tx.one<StatefulRuleRow>(
        sql`SELECT * FROM stateful_alert_rules WHERE id = ${id} FOR UPDATE`,
      );
      if (!cur) throw new NotFoundError("stateful alert rule not found");
      const m = {
        ...cur,
        ...Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)),
      } as StatefulRuleRow;
      validateStatefulRule(m);
      const row = await tx.one<StatefulRuleRow>(sql`
        UPDATE stateful_alert_rules SET name = ${m.name}, description = ${m.description}, enabled = ${m.enabled},
          priority = ${m.priority}, signal = ${m.signal}, match = ${JSON.stringify(m.match)}::jsonb,
          group_by = ${m.group_by}::text[], threshold = ${m.threshold}, window_seconds = ${m.window_seconds},
          bucket_seconds = ${m.bucket_seconds}, cooldown_seconds = ${m.cooldown_seconds},
          renotify_seconds = ${m.renotify_seconds}, event = ${JSON.stringify(m.event)}::jsonb,
          alert = ${JSON.stringify(m.alert)}::jsonb, updated_at = ${now}
        WHERE id = ${id} RETURNING *`);
      await bumpStatefulRuleVersion(tx);
      return row as StatefulRuleRow;
    });
  } catch (err) {
    throw asDomainError(err, { message: "a stateful alert rule with this name already exists" });
  } finally {
    invalidateStatefulRuleCache(ctx.db);
  }
}

export async function deleteStatefulRule(ctx: AppContext, actor: Actor | null, id: string): Promise<void> {
  assertCanWriteStatefulRules(actor);
  try {
    await ctx.db.transaction(async (tx) => {
      const res = await tx.query(sql`DELETE FROM stateful_alert_rules WHERE id = ${id}`);
      if (res.rowCount === 0) throw new NotFoundError("stateful alert rule not found");
      await bumpStatefulRuleVersion(tx);
    });
  } finally {
    invalidateStatefulRuleCache(ctx.db);
  }
}

// ---------------------------------------------------------------------------------------------
// Evaluation.

const RECORD_FIELDS = [
  "service_name",
  "severity_text",
  "severity_number",
  "body",
  "device_uid",
  "host",
] as const;

/** Resolve group values; null when any key is unresolved (the record is ignored). */
export function groupValues(
  rule: Pick<StatefulRuleRow, "group_by">,
  r: SignalRecord,
): Record<string, string> | null {
  const out: Record<string, string> = {};
  for (const key of rule.group_by ?? []) {
    let v = lookupPath(r.attributes, key);
    if (v === undefined || v === null) v = lookupPath(r.resource_attributes, key);
    if ((v === undefined || v === null) && (RECORD_FIELDS as readonly string[]).includes(key)) {
      v = r[key as (typeof RECORD_FIELDS)[number]];
    }
    if ((v === undefined || v === null) && r.kind === "event") {
      if (key === "log_name") v = r.subject;
      if (key === "log_provider") v = r.service_name;
    }
    if (v === undefined || v === null || v === "") return null;
    out[key] = typeof v === "object" ? JSON.stringify(v) : String(v);
  }
  return out;
}

export function groupKeyOf(values: Record<string, string>): string {
  const entries = Object.entries(values);
  return entries.length === 0 ? "global" : entries.map(([k, v]) => `${k}=${v}`).join("|");
}

/** `{{path}}` placeholders filled from group values, record fields and attributes. */
export function renderTemplate(tpl: string, r: SignalRecord, groups: Record<string, string>): string {
  return tpl.replace(/\{\{\s*([a-zA-Z0-9_.-]+)\s*\}\}/g, (_m, path: string) => {
    if (path in groups) return groups[path] as string;
    if (path === "body" || path === "message") return r.body ?? "";
    if (path === "service_name") return r.service_name ?? "";
    if (path === "severity") return r.severity_text ?? "";
    const v = lookupPath(r.attributes, path) ?? lookupPath(r.resource_attributes, path);
    return v === undefined || v === null ? "" : String(v);
  });
}

function pruneBuckets(
  buckets: Record<string, number>,
  nowSec: number,
  rule: StatefulRuleRow,
): Record<string, number> {
  const current = nowSec - (nowSec % rule.bucket_seconds);
  const oldest = current - (rule.window_seconds - rule.bucket_seconds);
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(buckets ?? {})) if (Number(k) >= oldest) out[k] = v;
  return out;
}

const sum = (b: Record<string, number>) => Object.values(b).reduce((a, v) => a + Number(v), 0);

async function lockState(q: Queryable, ruleId: string, groupKey: string, now: Date): Promise<StateRow> {
  await q.query(sql`
    INSERT INTO stateful_alert_rule_states (rule_id, group_key, updated_at) VALUES (${ruleId}, ${groupKey}, ${now})
    ON CONFLICT (rule_id, group_key) DO NOTHING`);
  const s = await q.one<StateRow>(
    sql`SELECT * FROM stateful_alert_rule_states WHERE rule_id = ${ruleId} AND group_key = ${groupKey} FOR UPDATE`,
  );
  if (!s) throw new Error("stateful rule state vanished");
  return s;
}

async function openAlertOf(q: Queryable, s: StateRow): Promise<AlertRow | undefined> {
  if (!s.alert_id) return undefined;
  return q.one<AlertRow>(
    sql`SELECT * FROM alerts WHERE id = ${s.alert_id} AND status IN ('pending', 'acknowledged', 'escalated')`,
  );
}

async function history(
  q: Queryable,
  rule: StatefulRuleRow,
  groupKey: string,
  type: string,
  now: Date,
  alertId: string | null,
  windowCount: number | null,
  details: Record<string, unknown> = {},
): Promise<void> {
  await q.query(sql`
    INSERT INTO stateful_alert_rule_history (rule_id, group_key, event_type, alert_id, window_count, details, created_at)
    VALUES (${rule.id}, ${groupKey}, ${type}, ${alertId}, ${windowCount}, ${JSON.stringify(details)}::jsonb, ${now})`);
}

function alertInput(
  rule: StatefulRuleRow,
  r: SignalRecord,
  groups: Record<string, string>,
  windowCount: number,
) {
  const cfg = rule.alert ?? {};
  const title = typeof cfg.title === "string" && cfg.title ? renderTemplate(cfg.title, r, groups) : "";
  return {
    title: title || `${rule.name}: ${windowCount} matching records in ${rule.window_seconds}s`,
    description:
      typeof cfg.description === "string"
        ? renderTemplate(cfg.description, r, groups)
        : (rule.description ?? null),
    severity: (typeof cfg.severity === "string" ? cfg.severity : "warning") as AlertSeverity,
    source_type: (r.kind === "event" ? "event" : "system") as "event" | "system",
    source_id: rule.id,
    event_id: r.kind === "event" ? r.id : null,
    event_time: r.kind === "event" ? r.timestamp : null,
    device_uid: r.device_uid,
    incident_key: `stateful:${rule.id}:${groupKeyOf(groups)}`,
    metadata: {
      ...((cfg.metadata as Record<string, unknown>) ?? {}),
      incident_rule_name:
        (cfg.metadata as Record<string, unknown> | undefined)?.incident_rule_name ?? rule.name,
      incident_group_values: groups,
      stateful_rule_id: rule.id,
      window_count: windowCount,
    },
  };
}

/**
 * Feed one record to every enabled rule of `signal`. Returns alerts opened now. Called by log
 * promotion for logs and for promoted events.
 */
export async function evaluateStatefulRules(
  ctx: AppContext,
  signal: "log" | "event",
  r: SignalRecord,
  /** Enabled rules, when the caller already loaded them for a batch. */
  preloaded?: readonly StatefulRuleRow[],
): Promise<AlertRow[]> {
  const rules = (preloaded ?? (await activeStatefulRules(ctx.db))).filter((x) => x.signal === signal);
  const opened: AlertRow[] = [];
  for (const rule of rules) {
    const recover = rule.alert?.recover_match as Record<string, unknown> | undefined;
    const isRecover = !!recover && matches(recover, r);
    if (!isRecover && !matches(rule.match, r)) continue;
    const groups = groupValues(rule, r);
    if (!groups) continue;
    const groupKey = groupKeyOf(groups);
    const events: { type: "trigger" | "resolve" | "renotify"; alert: AlertRow }[] = [];
    await ctx.db.transaction(async (tx) => {
      const now = ctx.now();
      const nowSec = Math.floor(now.getTime() / 1000);
      const s = await lockState(tx, rule.id, groupKey, now);
      const open = await openAlertOf(tx, s);
      if (isRecover) {
        if (open) {
          events.push({
            type: "resolve",
            alert: await applyResolve(tx, now, SYSTEM_ACTOR, open.id, {
              resolved_by: "system",
              resolution_note: `recovered: ${r.body ?? "recover event"}`,
            }),
          });
          await history(tx, rule, groupKey, "recover", now, open.id, null);
        }
        await tx.query(sql`
          UPDATE stateful_alert_rule_states SET buckets = '{}'::jsonb, alert_id = NULL, updated_at = ${now}
          WHERE rule_id = ${rule.id} AND group_key = ${groupKey}`);
        return;
      }
      const recSec = Math.floor(r.timestamp.getTime() / 1000);
      const bucket = String(recSec - (recSec % rule.bucket_seconds));
      const buckets = pruneBuckets(
        { ...(s.buckets ?? {}), [bucket]: Number(s.buckets?.[bucket] ?? 0) + 1 },
        nowSec,
        rule,
      );
      const windowCount = sum(buckets);
      let alertId = open?.id ?? null;
      let lastFired = s.last_fired_at;
      let cooldownUntil = s.cooldown_until;
      let lastNotification = s.last_notification_at;
      if (windowCount >= rule.threshold) {
        const gap = s.last_seen_at ? (now.getTime() - new Date(s.last_seen_at).getTime()) / 1000 : 0;
        if (open && gap > rule.cooldown_seconds) {
          // Rollover: the condition went quiet longer than the cooldown and came back.
          events.push({
            type: "resolve",
            alert: await applyResolve(tx, now, SYSTEM_ACTOR, open.id, {
              resolved_by: "system",
              resolution_note: "rolled over to a new alert",
            }),
          });
          const created = await insertAlert(tx, now, alertInput(rule, r, groups, windowCount));
          events.push({ type: "trigger", alert: created });
          await history(tx, rule, groupKey, "rollover", now, created.id, windowCount, {
            previous_alert_id: open.id,
          });
          alertId = created.id;
          lastFired = now;
          lastNotification = now;
          cooldownUntil = new Date(now.getTime() + rule.cooldown_seconds * 1000);
        } else if (open) {
          if (
            rule.renotify_seconds > 0 &&
            lastNotification &&
            now.getTime() - new Date(lastNotification).getTime() >= rule.renotify_seconds * 1000
          ) {
            await history(tx, rule, groupKey, "renotify", now, open.id, windowCount);
            events.push({ type: "renotify", alert: open });
            lastNotification = now;
          }
        } else if (cooldownUntil && now < new Date(cooldownUntil)) {
          await history(tx, rule, groupKey, "cooldown", now, null, windowCount);
        } else {
          const created = await insertAlert(tx, now, alertInput(rule, r, groups, windowCount));
          events.push({ type: "trigger", alert: created });
          await history(tx, rule, groupKey, "fire", now, created.id, windowCount);
          alertId = created.id;
          lastFired = now;
          lastNotification = now;
          cooldownUntil = new Date(now.getTime() + rule.cooldown_seconds * 1000);
        }
      } else if (open && rule.alert?.auto_resolve !== false) {
        events.push({
          type: "resolve",
          alert: await applyResolve(tx, now, SYSTEM_ACTOR, open.id, {
            resolved_by: "system",
            resolution_note: `window count ${windowCount} below threshold ${rule.threshold}`,
          }),
        });
        await history(tx, rule, groupKey, "resolve", now, open.id, windowCount);
        alertId = null;
      }
      await tx.query(sql`
        UPDATE stateful_alert_rule_states SET buckets = ${JSON.stringify(buckets)}::jsonb, alert_id = ${alertId},
          last_seen_at = ${now}, last_fired_at = ${lastFired}, cooldown_until = ${cooldownUntil},
          last_notification_at = ${lastNotification}, updated_at = ${now}
        WHERE rule_id = ${rule.id} AND group_key = ${groupKey}`);
    });
    for (const e of events) {
      await emitAlertLifecycle(ctx, e.type, e.alert);
      if (e.type === "trigger") opened.push(e.alert);
    }
  }
  return opened;
}

/**
 * Periodic recovery: resolve open rule alerts whose window count decayed below the threshold
 * (rules whose `alert.auto_resolve` is not false). Returns the resolved alerts.
 */
export async function sweepStatefulRules(ctx: AppContext): Promise<AlertRow[]> {
  const states = await ctx.db.many<StateRow & { rule: StatefulRuleRow }>(sql`
    SELECT s.*, to_jsonb(r.*) AS rule FROM stateful_alert_rule_states s
    JOIN stateful_alert_rules r ON r.id = s.rule_id
    WHERE s.alert_id IS NOT NULL`);
  const resolved: AlertRow[] = [];
  for (const st of states) {
    const rule = st.rule;
    if (rule.alert?.auto_resolve === false) continue;
    const out = await ctx.db.transaction(async (tx) => {
      const now = ctx.now();
      const s = await lockState(tx, rule.id, st.group_key, now);
      const open = await openAlertOf(tx, s);
      const buckets = pruneBuckets(s.buckets, Math.floor(now.getTime() / 1000), rule);
      const count = sum(buckets);
      if (!open) {
        await tx.query(sql`UPDATE stateful_alert_rule_states SET alert_id = NULL, buckets = ${JSON.stringify(buckets)}::jsonb
          WHERE rule_id = ${rule.id} AND group_key = ${st.group_key}`);
        return null;
      }
      if (count >= rule.threshold) return null;
      const a = await applyResolve(tx, now, SYSTEM_ACTOR, open.id, {
        resolved_by: "system",
        resolution_note: `window count ${count} below threshold ${rule.threshold}`,
      });
      await history(tx, rule, st.group_key, "resolve", now, open.id, count);
      await tx.query(sql`UPDATE stateful_alert_rule_states SET alert_id = NULL, buckets = ${JSON.stringify(buckets)}::jsonb,
        updated_at = ${now} WHERE rule_id = ${rule.id} AND group_key = ${st.group_key}`);
      return a;
    });
    if (out) {
      await emitAlertLifecycle(ctx, "resolve", out);
      resolved.push(out);
    }
  }
  return resolved;
}
