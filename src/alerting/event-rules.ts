/**
 * Event rules and log promotion (reference 7.2, spec 4.1 rule behaviours 1–3).
 *
 * Enabled `log` rules, sorted by priority then inserted_at, are tried in order against each
 * log; the FIRST matching rule wins and produces one OCSF event in `events` (log_id links
 * back). Depending on the rule's `event.alert` the event opens an alert, and promoted events
 * feed stateful alert rules with `signal: event`.
 *
 * Rule cache: per database, in process. Every create/update/delete drops it synchronously
 * and bumps `alerting_rule_versions` in the same transaction; each promotion compares that
 * version (one primary-key read), so other replicas see the change on their next log too.
 */
import { type Actor, hasPermission } from "../access/actor.ts";
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
import { emitAlertLifecycle, insertAlert, type TriggerAlertInput } from "./lifecycle.ts";
import {
  alertSeverityFromOcsf,
  eventTypeOf,
  matches,
  OCSF_SEVERITY,
  ocsfFromSeverityText,
  ocsfSeverityName,
  ocsfSeverityOf,
  validateMatch,
} from "./match.ts";
import { activeStatefulRules, evaluateStatefulRules } from "./stateful-rules.ts";
import type { AlertRow, SignalRecord } from "./types.ts";

export interface EventRuleRow {
  id: string;
  name: string;
  description: string | null;
  enabled: boolean;
  priority: number;
  source_type: "log" | "metric";
  source: Record<string, unknown>;
  match: Record<string, unknown>;
  event: Record<string, unknown>;
  managed: boolean;
  inserted_at: Date;
  updated_at: Date;
  [key: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Cache.

interface RuleCache {
  version: number;
  rules: EventRuleRow[];
}

const caches = new WeakMap<Db | Queryable, RuleCache>();

/** Drop the in-process cache (called synchronously by every rule change). */
export function invalidateEventRuleCache(db: Db | Queryable): void {
  caches.delete(db);
}

/** Bump the shared version inside the writing transaction (other replicas drop their caches). */
export async function bumpEventRuleVersion(q: Queryable): Promise<void> {
  await q.query(sql`UPDATE alerting_rule_versions SET version = version + 1 WHERE kind = 'event_rules'`);
}

async function currentVersion(q: Queryable): Promise<number> {
  const row = await q.one<{ version: number }>(
    sql`SELECT version FROM alerting_rule_versions WHERE kind = 'event_rules'`,
  );
  return Number(row?.version ?? 0);
}

/** Enabled log-promotion rules in evaluation order (cached). */
export async function activeEventRules(db: Db): Promise<EventRuleRow[]> {
  const version = await currentVersion(db);
  const cached = caches.get(db);
  if (cached && cached.version === version) return cached.rules;
  const rules = await db.many<EventRuleRow>(sql`
    SELECT * FROM event_rules WHERE enabled AND source_type = 'log' ORDER BY priority ASC, inserted_at ASC, id ASC`);
  caches.set(db, { version, rules });
  return rules;
}

// ---------------------------------------------------------------------------------------------
// Validation and permissions.

export const EVENT_RULE_PERMISSIONS = {
  view: "observability.rules.view",
  create: "observability.rules.create",
  update: "observability.rules.update",
  delete: "observability.rules.delete",
} as const;

/** May this caller see event rules? (No: lists are empty and detail reads 404.) */
export function canViewEventRules(actor: Actor | null): boolean {
  return !!actor && hasPermission(actor, EVENT_RULE_PERMISSIONS.view);
}

function assertCanWrite(actor: Actor | null, action: "create" | "update" | "delete"): Actor {
  if (!actor) throw new AuthenticationRequiredError();
  if (!hasPermission(actor, EVENT_RULE_PERMISSIONS[action])) throw new ForbiddenError();
  return actor;
}

export interface EventRuleInput {
  name?: string;
  description?: string | null;
  enabled?: boolean;
  priority?: number;
  source_type?: "log" | "metric";
  source?: Record<string, unknown> | null;
  match?: Record<string, unknown> | null;
  event?: Record<string, unknown> | null;
}

export function validateEventRuleInput(input: EventRuleInput, creating: boolean): void {
  if (creating && (typeof input.name !== "string" || input.name.trim() === "")) {
    throw new ValidationError("name is required", { source: { pointer: "/data/attributes/name" } });
  }
  if (input.source_type !== undefined && !["log", "metric"].includes(input.source_type)) {
    throw new ValidationError("source_type must be one of log, metric", {
      source: { pointer: "/data/attributes/source_type" },
    });
  }
  validateMatch(input.match, "/data/attributes/match");
  const ev = input.event;
  if (ev !== undefined && ev !== null) {
    if (typeof ev !== "object" || Array.isArray(ev)) {
      throw new ValidationError("event must be an object", { source: { pointer: "/data/attributes/event" } });
    }
    const alert = (ev as Record<string, unknown>).alert;
    if (alert !== undefined && typeof alert !== "boolean" && (typeof alert !== "object" || alert === null)) {
      throw new ValidationError("event.alert must be a boolean or an object", {
        source: { pointer: "/data/attributes/event/alert" },
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// CRUD (domain functions; the JSON:API resource declares the same semantics).

export async function listEventRules(
  q: Queryable,
  actor: Actor | null,
  opts: { activeOnly?: boolean } = {},
): Promise<EventRuleRow[]> {
  if (!canViewEventRules(actor)) return [];
  return opts.activeOnly
    ? q.many<EventRuleRow>(sql`SELECT * FROM event_rules WHERE enabled ORDER BY priority, inserted_at, id`)
    : q.many<EventRuleRow>(sql`SELECT * FROM event_rules ORDER BY priority, inserted_at, id`);
}

export async function getEventRule(q: Queryable, actor: Actor | null, id: string): Promise<EventRuleRow> {
  if (!canViewEventRules(actor)) throw new NotFoundError("event rule not found");
  const row = await q.one<EventRuleRow>(sql`SELECT * FROM event_rules WHERE id = ${id}`);
  if (!row) throw new NotFoundError("event rule not found");
  return row;
}

export async function createEventRule(
  ctx: AppContext,
  actor: Actor | null,
  input: EventRuleInput,
): Promise<EventRuleRow> {
  assertCanWrite(actor, "create");
  validateEventRuleInput(input, true);
  const now = ctx.now();
  try {
    const row = await ctx.db.transaction(async (tx) => {
      const r = await tx.one<EventRuleRow>(sql`
        INSERT INTO event_rules (name, description, enabled, priority, source_type, source, match, event, inserted_at, updated_at)
        VALUES (${input.name}, ${input.description ?? null}, ${input.enabled ?? true}, ${input.priority ?? 100},
          ${input.source_type ?? "log"}, ${JSON.stringify(input.source ?? {})}::jsonb,
          ${JSON.stringify(input.match ?? {})}::jsonb, ${JSON.stringify(input.event ?? {})}::jsonb, ${now}, ${now})
        RETURNING *`);
      await bumpEventRuleVersion(tx);
      return r as EventRuleRow;
    });
    return row;
  } catch (err) {
    throw asDomainError(err, { message: "an event rule with this name already exists" });
  } finally {
    invalidateEventRuleCache(ctx.db);
  }
}

export async function updateEventRule(
  ctx: AppContext,
  actor: Actor | null,
  id: string,
  input: EventRuleInput,
): Promise<EventRuleRow> {
  const a = assertCanWrite(actor, "update");
  validateEventRuleInput(input, false);
  // A write permission alone does not reveal whether a rule exists to a caller who cannot view.
  const now = ctx.now();
  try {
    return await ctx.db.transaction(async (tx) => {
      const cur = await tx.one<EventRuleRow>(sql`SELECT * FROM event_rules WHERE id = ${id} FOR UPDATE`);
      if (!cur) throw new NotFoundError("event rule not found");
      const row = await tx.one<EventRuleRow>(sql`
        UPDATE event_rules SET
          name = ${input.name ?? cur.name},
          description = ${input.description === undefined ? cur.description : input.description},
          enabled = ${input.enabled ?? cur.enabled},
          priority = ${input.priority ?? cur.priority},
          source_type = ${input.source_type ?? cur.source_type},
          source = ${JSON.stringify(input.source ?? cur.source)}::jsonb,
          match = ${JSON.stringify(input.match ?? cur.match)}::jsonb,
          event = ${JSON.stringify(input.event ?? cur.event)}::jsonb,
          updated_at = ${now}
        WHERE id = ${id} RETURNING *`);
      await bumpEventRuleVersion(tx);
      void a;
      return row as EventRuleRow;
    });
  } catch (err) {
    throw asDomainError(err, { message: "an event rule with this name already exists" });
  } finally {
    invalidateEventRuleCache(ctx.db);
  }
}

export async function deleteEventRule(ctx: AppContext, actor: Actor | null, id: string): Promise<void> {
  assertCanWrite(actor, "delete");
  try {
    await ctx.db.transaction(async (tx) => {
      const res = await tx.query(sql`DELETE FROM event_rules WHERE id = ${id}`);
      if (res.rowCount === 0) throw new NotFoundError("event rule not found");
      await bumpEventRuleVersion(tx);
    });
  } finally {
    invalidateEventRuleCache(ctx.db);
  }
}

// ---------------------------------------------------------------------------------------------
// Promotion.

/** A stored log row (columns of `logs`, migration 0300). */
export interface LogRow {
  id: string;
  timestamp: Date;
  severity_text: string | null;
  severity_number: number | null;
  body: string | null;
  service_name: string | null;
  attributes: Record<string, unknown>;
  resource_attributes: Record<string, unknown>;
  device_id: string | null;
  host: string | null;
  source: string | null;
  partition?: string;
  [key: string]: unknown;
}

export function logToRecord(log: LogRow): SignalRecord {
  return {
    kind: "log",
    id: log.id,
    timestamp: log.timestamp instanceof Date ? log.timestamp : new Date(log.timestamp),
    subject: null,
    service_name: log.service_name,
    severity_number: log.severity_number,
    severity_text: log.severity_text,
    body: log.body,
    attributes: log.attributes ?? {},
    resource_attributes: log.resource_attributes ?? {},
    device_uid: log.device_id,
    host: log.host,
  };
}

export interface EventRow {
  id: string;
  time: Date;
  severity_id: number;
  severity: string | null;
  message: string | null;
  log_name: string | null;
  log_provider: string | null;
  device_uid: string | null;
  host: string | null;
  log_id: string | null;
  metadata: Record<string, unknown>;
  unmapped: Record<string, unknown>;
  [key: string]: unknown;
}

export function eventToRecord(ev: EventRow): SignalRecord {
  const unmapped = ev.unmapped ?? {};
  return {
    kind: "event",
    id: ev.id,
    timestamp: ev.time instanceof Date ? ev.time : new Date(ev.time),
    subject: ev.log_name,
    service_name: ev.log_provider,
    severity_number: null,
    severity_text: ev.severity,
    body: ev.message,
    attributes: (unmapped.attributes as Record<string, unknown>) ?? {},
    resource_attributes: (unmapped.resource_attributes as Record<string, unknown>) ?? {},
    device_uid: ev.device_uid,
    host: ev.host,
  };
}

function numberOr(v: unknown, d: number): number {
  return typeof v === "number" && Number.isFinite(v) ? v : d;
}

/** Build and store the OCSF event for a log promoted by a rule. */
async function insertPromotedEvent(
  q: Queryable,
  rule: EventRuleRow,
  log: LogRow,
  rec: SignalRecord,
): Promise<EventRow> {
  const ov = rule.event ?? {};
  let severityId = ocsfSeverityOf(rec);
  if (typeof ov.severity_id === "number") severityId = ov.severity_id;
  else if (typeof ov.severity === "string") severityId = ocsfFromSeverityText(ov.severity) ?? severityId;
  const classUid = numberOr(ov.class_uid, 1008);
  const activityId = numberOr(ov.activity_id, 1);
  const message = (typeof ov.message === "string" && ov.message) || log.body || "Log promotion event";
  const eventType = eventTypeOf(rec);
  const row = await q.one<EventRow>(sql`
    INSERT INTO events ("time", event_id, class_uid, category_uid, type_uid, activity_id, activity_name, severity_id,
      severity, message, status, status_id, log_name, log_provider, source, source_type, device_uid, host, log_id,
      metadata, unmapped, "partition")
    VALUES (${rec.timestamp}, ${eventType}, ${classUid}, ${numberOr(ov.category_uid, 1)},
      ${numberOr(ov.type_uid, classUid * 100 + activityId)}, ${activityId},
      ${typeof ov.activity_name === "string" ? ov.activity_name : "Log promotion"}, ${severityId},
      ${ocsfSeverityName(severityId)}, ${message}, ${typeof ov.status === "string" ? ov.status : "Success"},
      ${numberOr(ov.status_id, 1)}, ${log.source ?? log.service_name ?? null}, ${log.service_name ?? null},
      ${log.source ?? null}, 'log', ${log.device_id ?? null}, ${log.host ?? null}, ${log.id},
      ${JSON.stringify({ event_rule_id: rule.id, event_rule_name: rule.name })}::jsonb,
      ${JSON.stringify({ attributes: rec.attributes, resource_attributes: rec.resource_attributes })}::jsonb,
      ${log.partition ?? "default"})
    RETURNING *`);
  if (!row) throw new Error("event insert returned no row");
  return row;
}

/** Alert the event opens, per `event.alert` (false: none; true/map: yes; unset: severity ≥ high). */
function alertForEvent(rule: EventRuleRow, ev: EventRow): TriggerAlertInput | null {
  const cfg = rule.event?.alert;
  if (cfg === false) return null;
  if (cfg === undefined && ev.severity_id < OCSF_SEVERITY.high) return null;
  const c = cfg && typeof cfg === "object" ? (cfg as Record<string, unknown>) : {};
  const severity = typeof c.severity === "string" ? c.severity : alertSeverityFromOcsf(ev.severity_id);
  return {
    title: typeof c.title === "string" && c.title ? c.title : (ev.message ?? rule.name),
    description: typeof c.description === "string" ? c.description : null,
    severity: severity as TriggerAlertInput["severity"],
    source_type: "event",
    source_id: rule.id,
    event_id: ev.id,
    event_time: ev.time,
    device_uid: ev.device_uid,
    metadata: {
      ...((c.metadata as Record<string, unknown>) ?? {}),
      event_rule_id: rule.id,
      event_rule_name: rule.name,
      log_id: ev.log_id,
    },
  };
}

export interface PromotionResult {
  log_id: string;
  rule_id: string | null;
  event: EventRow | null;
  alert: AlertRow | null;
  stateful_alerts: AlertRow[];
}

/**
 * Run log promotion and stateful `log` rules over stored logs. Call after logs are written
 * (telemetry ingest, internal logs). Errors per log are logged, never raised to the writer.
 */
export async function promoteLogs(ctx: AppContext, logs: readonly LogRow[]): Promise<PromotionResult[]> {
  if (logs.length === 0) return [];
  const rules = await activeEventRules(ctx.db);
  const stateful = await activeStatefulRules(ctx.db);
  const out: PromotionResult[] = [];
  for (const log of logs) {
    const rec = logToRecord(log);
    const result: PromotionResult = {
      log_id: log.id,
      rule_id: null,
      event: null,
      alert: null,
      stateful_alerts: [],
    };
    try {
      result.stateful_alerts.push(...(await evaluateStatefulRules(ctx, "log", rec, stateful)));
      const rule = rules.find((r) => matches(r.match, rec));
      if (rule) {
        result.rule_id = rule.id;
        const { event, alert } = await ctx.db.transaction(async (tx) => {
          const event = await insertPromotedEvent(tx, rule, log, rec);
          const input = alertForEvent(rule, event);
          const alert = input ? await insertAlert(tx, ctx.now(), input) : null;
          return { event, alert };
        });
        result.event = event;
        result.alert = alert;
        if (alert) await emitAlertLifecycle(ctx, "trigger", alert);
        result.stateful_alerts.push(
          ...(await evaluateStatefulRules(ctx, "event", eventToRecord(event), stateful)),
        );
      }
    } catch (err) {
      ctx.log.error({ err, log_id: log.id }, "log promotion failed");
    }
    out.push(result);
  }
  return out;
}

/**
 * For ingest paths (syslog, OTLP, gateway log streams): promote logs already stored with
 * `insertLogs` (src/telemetry/write.ts), by id. Call after the insert committed.
 */
/**
 * Promotion right after a write, given the rows as written and their ids. Only logs some
 * enabled rule can act on are read back and promoted: promoteLogs does nothing for a log that
 * no event rule and no log-signal stateful rule (match or recover match) matches, and reading
 * back every row of each 500-record OTLP export cost ~40 % of ingest throughput (BENCHMARKS.md,
 * "Telemetry ingest"). The in-memory values pass a JSON round trip first, so they match exactly
 * as the stored jsonb will; a log that matches here is promoted from its stored row as before.
 */
export async function promoteWrittenLogs(
  ctx: AppContext,
  written: readonly { id: string; row: Readonly<Record<string, unknown>> }[],
): Promise<PromotionResult[]> {
  if (written.length === 0) return [];
  const rules = await activeEventRules(ctx.db);
  const stateful = (await activeStatefulRules(ctx.db)).filter((r) => r.signal === "log");
  if (rules.length === 0 && stateful.length === 0) return [];
  const acts = (rec: SignalRecord) =>
    rules.some((r) => matches(r.match, rec)) ||
    stateful.some((r) => {
      const recover = r.alert?.recover_match as Record<string, unknown> | undefined;
      return matches(r.match, rec) || (!!recover && matches(recover, rec));
    });
  const candidates = written
    .filter(({ id, row }) => acts(logToRecord(asStoredLog(id, row))))
    .map((w) => w.id);
  return promoteStoredLogs(ctx, candidates);
}

/** A written row as it will read back: the fields logToRecord uses, JSON as jsonb returns it. */
function asStoredLog(id: string, row: Readonly<Record<string, unknown>>): LogRow {
  const json = (v: unknown) => (v === undefined || v === null ? {} : JSON.parse(JSON.stringify(v)));
  const text = (v: unknown) => (v === undefined || v === null ? null : String(v));
  return {
    id,
    timestamp: row.timestamp instanceof Date ? row.timestamp : new Date(String(row.timestamp)),
    severity_text: text(row.severity_text),
    severity_number:
      row.severity_number === undefined || row.severity_number === null ? null : Number(row.severity_number),
    body: text(row.body),
    service_name: text(row.service_name),
    attributes: json(row.attributes),
    resource_attributes: json(row.resource_attributes),
    device_id: text(row.device_id),
    host: text(row.host),
    source: text(row.source),
  };
}

export async function promoteStoredLogs(ctx: AppContext, ids: readonly string[]): Promise<PromotionResult[]> {
  if (ids.length === 0) return [];
  const rows = await ctx.db.many<LogRow>(sql`SELECT * FROM logs WHERE id = ANY(${[...ids]}::uuid[])`);
  // In the caller's order (the order the logs were written).
  const pos = new Map(ids.map((id, i) => [id, i]));
  rows.sort((a, b) => (pos.get(a.id) ?? 0) - (pos.get(b.id) ?? 0));
  return promoteLogs(ctx, rows);
}
