/**
 * Notification configuration: channels, escalation policies, steps, step channels, routes
 * (reference 7.3). Validators take a Queryable so the JSON:API resource hooks can run them in
 * the engine's transaction; the create/update functions below are the domain API (channels
 * have no v2 create route, so they are created through `createChannel`).
 */
import { type Actor, hasPermission } from "../../access/actor.ts";
import type { AppContext } from "../../kernel/context.ts";
import {
  AuthenticationRequiredError,
  ConflictError,
  ForbiddenError,
  NotFoundError,
  ValidationError,
} from "../../kernel/errors.ts";
import { isUuid } from "../../kernel/ids.ts";
import type { Queryable, Row } from "../../storage/db.ts";
import { asDomainError } from "../../storage/db-error.ts";
import { sql } from "../../storage/sql.ts";
import { validateMatchExpression } from "./match-expression.ts";
import { validateWebhookTemplate } from "./webhook-templates.ts";

export const NOTIFY_PERMS = {
  channelsView: "notifications.channels.view",
  channelsManage: "notifications.channels.manage",
  routesView: "notifications.routes.view",
  routesManage: "notifications.routes.manage",
} as const;

function need(actor: Actor | null, perm: string): void {
  if (!actor) throw new AuthenticationRequiredError();
  if (!hasPermission(actor, perm)) throw new ForbiddenError();
}

const attr = (f: string) => ({ source: { pointer: `/data/attributes/${f}` } });

async function mustExist(
  q: Queryable,
  table: "notification_escalation_policies" | "notification_escalation_steps" | "notification_channels",
  id: unknown,
  field: string,
  what: string,
): Promise<Row> {
  if (typeof id !== "string" || !isUuid(id))
    throw new ValidationError(`${field} must be a uuid`, attr(field));
  const row =
    table === "notification_escalation_policies"
      ? await q.one(sql`SELECT * FROM notification_escalation_policies WHERE id = ${id}`)
      : table === "notification_escalation_steps"
        ? await q.one(sql`SELECT * FROM notification_escalation_steps WHERE id = ${id}`)
        : await q.one(sql`SELECT * FROM notification_channels WHERE id = ${id}`);
  if (!row) throw new ValidationError(`${field} does not reference an existing ${what}`, attr(field));
  return row;
}

// ---------------------------------------------------------------------------------------------
// Channels.

export interface ChannelInput {
  name: string;
  description?: string | null;
  provider: "webhook" | "email";
  enabled?: boolean;
  config?: Record<string, unknown>;
  secret_refs?: Record<string, unknown>;
  fallback_channel_id?: string | null;
  fail_closed?: boolean;
  rate_limit_per_minute?: number | null;
  max_attempts?: number;
  metadata?: Record<string, unknown>;
  execution_route?: "control_plane" | "edge_agent";
  agent_uid?: string | null;
}

export function validateChannelConfig(provider: string, config: Record<string, unknown>): void {
  if (provider === "webhook") {
    const url = config.url;
    let ok = false;
    try {
      const u = new URL(String(url));
      ok = u.protocol === "http:" || u.protocol === "https:";
    } catch {
      ok = false;
    }
    if (!ok) throw new ValidationError("webhook channels need config.url (http or https)", attr("config"));
    if (config.headers !== undefined && (typeof config.headers !== "object" || config.headers === null)) {
      throw new ValidationError("config.headers must be an object", attr("config"));
    }
    validateWebhookTemplate(config, "/data/attributes/config");
  } else if (provider === "email") {
    const to = Array.isArray(config.to) ? config.to : [config.to];
    if (to.length === 0 || to.some((t) => typeof t !== "string" || !/^[^@\s]+@[^@\s]+$/.test(t))) {
      throw new ValidationError("email channels need config.to (one or more addresses)", attr("config"));
    }
    const smtp = (config.smtp ?? {}) as Record<string, unknown>;
    if (typeof smtp.host !== "string" || !smtp.host) {
      throw new ValidationError("email channels need config.smtp.host", attr("config"));
    }
    if (
      smtp.port !== undefined &&
      (!Number.isInteger(smtp.port) || Number(smtp.port) < 1 || Number(smtp.port) > 65535)
    ) {
      throw new ValidationError("config.smtp.port must be a port number", attr("config"));
    }
  } else {
    throw new ValidationError("provider must be one of webhook, email", attr("provider"));
  }
}

export async function createChannel(ctx: AppContext, actor: Actor | null, input: ChannelInput): Promise<Row> {
  need(actor, NOTIFY_PERMS.channelsManage);
  if (!input.name?.trim()) throw new ValidationError("name is required", attr("name"));
  validateChannelConfig(input.provider, input.config ?? {});
  if (input.execution_route === "edge_agent" && !input.agent_uid) {
    throw new ValidationError("is required when execution_route is edge_agent", attr("agent_uid"));
  }
  if (input.fallback_channel_id) {
    await mustExist(
      ctx.db,
      "notification_channels",
      input.fallback_channel_id,
      "fallback_channel_id",
      "channel",
    );
  }
  try {
    return (await ctx.db.one(sql`
      INSERT INTO notification_channels (name, description, provider, enabled, config, secret_refs, fallback_channel_id,
        fail_closed, rate_limit_per_minute, max_attempts, metadata, execution_route, agent_uid)
      VALUES (${input.name}, ${input.description ?? null}, ${input.provider}, ${input.enabled ?? true},
        ${JSON.stringify(input.config ?? {})}::jsonb, ${JSON.stringify(input.secret_refs ?? {})}::jsonb,
        ${input.fallback_channel_id ?? null}, ${input.fail_closed ?? false}, ${input.rate_limit_per_minute ?? null},
        ${input.max_attempts ?? 3}, ${JSON.stringify(input.metadata ?? {})}::jsonb,
        ${input.execution_route ?? "control_plane"}, ${input.agent_uid ?? null})
      RETURNING *`)) as Row;
  } catch (err) {
    throw asDomainError(err, { message: "a notification channel with this name already exists" });
  }
}

// ---------------------------------------------------------------------------------------------
// Escalation policies.

export interface PolicyInput {
  name?: string;
  description?: string | null;
  enabled?: boolean;
  repeat_count?: number;
  repeat_interval_seconds?: number | null;
  resolve_notifies?: boolean;
}

/** RepeatIntervalFloor: repeat_interval_seconds ≥ max renotify_seconds of enabled stateful rules. */
export async function validatePolicy(q: Queryable, p: PolicyInput): Promise<void> {
  if (p.name !== undefined && (typeof p.name !== "string" || !p.name.trim())) {
    throw new ValidationError("name is required", attr("name"));
  }
  const repeat = p.repeat_count ?? 0;
  if (!Number.isInteger(repeat) || repeat < 0)
    throw new ValidationError("repeat_count must be zero or more", attr("repeat_count"));
  const interval = p.repeat_interval_seconds;
  if (interval !== undefined && interval !== null && (!Number.isInteger(interval) || interval < 1)) {
    throw new ValidationError("repeat_interval_seconds must be at least 1", attr("repeat_interval_seconds"));
  }
  if (repeat > 0 && (interval === undefined || interval === null)) {
    throw new ValidationError(
      "is required when repeat_count is greater than zero",
      attr("repeat_interval_seconds"),
    );
  }
  if (repeat > 0 && typeof interval === "number") {
    const row = await q.one<{ floor: number | null }>(
      sql`SELECT max(renotify_seconds) AS floor FROM stateful_alert_rules WHERE enabled`,
    );
    const floor = row?.floor === null || row?.floor === undefined ? 0 : Number(row.floor);
    if (interval < floor) {
      throw new ValidationError(
        `must be at least ${floor} (the largest renotify_seconds of an enabled stateful alert rule)`,
        attr("repeat_interval_seconds"),
      );
    }
  }
}

export async function createPolicy(ctx: AppContext, actor: Actor | null, input: PolicyInput): Promise<Row> {
  need(actor, NOTIFY_PERMS.routesManage);
  if (!input.name?.trim()) throw new ValidationError("name is required", attr("name"));
  await validatePolicy(ctx.db, input);
  try {
    return (await ctx.db.one(sql`
      INSERT INTO notification_escalation_policies (name, description, enabled, repeat_count, repeat_interval_seconds, resolve_notifies)
      VALUES (${input.name}, ${input.description ?? null}, ${input.enabled ?? true}, ${input.repeat_count ?? 0},
        ${input.repeat_interval_seconds ?? null}, ${input.resolve_notifies ?? true})
      RETURNING *`)) as Row;
  } catch (err) {
    throw asDomainError(err, { message: "an escalation policy with this name already exists" });
  }
}

// ---------------------------------------------------------------------------------------------
// Steps and step channels.

export interface StepInput {
  policy_id: string;
  step_number: number;
  delay_seconds?: number;
  condition?: "always" | "if_unacknowledged";
}

export async function validateStep(q: Queryable, s: StepInput): Promise<void> {
  await mustExist(q, "notification_escalation_policies", s.policy_id, "policy_id", "escalation policy");
  if (!Number.isInteger(s.step_number) || s.step_number < 1) {
    throw new ValidationError("step_number must be at least 1", attr("step_number"));
  }
  if (s.delay_seconds !== undefined && (!Number.isInteger(s.delay_seconds) || s.delay_seconds < 0)) {
    throw new ValidationError("delay_seconds must be zero or more", attr("delay_seconds"));
  }
  if (s.condition !== undefined && s.condition !== "always" && s.condition !== "if_unacknowledged") {
    throw new ValidationError("condition must be one of always, if_unacknowledged", attr("condition"));
  }
  const dup = await q.one(sql`
    SELECT 1 FROM notification_escalation_steps WHERE policy_id = ${s.policy_id} AND step_number = ${s.step_number}`);
  if (dup) throw new ConflictError(`the policy already has a step ${s.step_number}`);
}

export async function createStep(ctx: AppContext, actor: Actor | null, input: StepInput): Promise<Row> {
  need(actor, NOTIFY_PERMS.routesManage);
  await validateStep(ctx.db, input);
  return (await ctx.db.one(sql`
    INSERT INTO notification_escalation_steps (policy_id, step_number, delay_seconds, condition)
    VALUES (${input.policy_id}, ${input.step_number}, ${input.delay_seconds ?? 0}, ${input.condition ?? "if_unacknowledged"})
    RETURNING *`)) as Row;
}

export async function validateStepChannel(
  q: Queryable,
  sc: { step_id: unknown; channel_id: unknown },
): Promise<void> {
  await mustExist(q, "notification_escalation_steps", sc.step_id, "step_id", "escalation step");
  await mustExist(q, "notification_channels", sc.channel_id, "channel_id", "notification channel");
  const dup = await q.one(sql`
    SELECT 1 FROM notification_escalation_step_channels WHERE step_id = ${sc.step_id} AND channel_id = ${sc.channel_id}`);
  if (dup) throw new ConflictError("the channel is already part of this step");
}

export async function addStepChannel(
  ctx: AppContext,
  actor: Actor | null,
  input: { step_id: string; channel_id: string },
): Promise<Row> {
  need(actor, NOTIFY_PERMS.routesManage);
  await validateStepChannel(ctx.db, input);
  return (await ctx.db.one(sql`
    INSERT INTO notification_escalation_step_channels (step_id, channel_id) VALUES (${input.step_id}, ${input.channel_id})
    RETURNING *`)) as Row;
}

// ---------------------------------------------------------------------------------------------
// Routes.

export interface RouteInput {
  name?: string;
  description?: string | null;
  priority?: number;
  match_expression?: Record<string, unknown>;
  escalation_policy_id?: string;
  schedule_id?: string | null;
  dedupe_key_template?: string | null;
  throttle_seconds?: number | null;
  group_wait_seconds?: number;
  group_interval_seconds?: number | null;
  continue?: boolean;
  enabled?: boolean;
}

export async function validateRoute(q: Queryable, r: RouteInput, creating: boolean): Promise<void> {
  if (creating && (typeof r.name !== "string" || !r.name.trim()))
    throw new ValidationError("name is required", attr("name"));
  if (creating || r.escalation_policy_id !== undefined) {
    await mustExist(
      q,
      "notification_escalation_policies",
      r.escalation_policy_id,
      "escalation_policy_id",
      "escalation policy",
    );
  }
  if (r.match_expression !== undefined) validateMatchExpression(r.match_expression);
  for (const f of ["throttle_seconds", "group_wait_seconds", "group_interval_seconds"] as const) {
    const v = r[f];
    if (v !== undefined && v !== null && (!Number.isInteger(v) || v < 0)) {
      throw new ValidationError(`${f} must be zero or more`, attr(f));
    }
  }
}

export async function createRoute(ctx: AppContext, actor: Actor | null, input: RouteInput): Promise<Row> {
  need(actor, NOTIFY_PERMS.routesManage);
  await validateRoute(ctx.db, input, true);
  try {
    return (await ctx.db.one(sql`
      INSERT INTO notification_routes (name, description, enabled, priority, match_expression, escalation_policy_id,
        schedule_id, dedupe_key_template, throttle_seconds, group_wait_seconds, group_interval_seconds, "continue")
      VALUES (${input.name}, ${input.description ?? null}, ${input.enabled ?? true}, ${input.priority ?? 100},
        ${JSON.stringify(input.match_expression ?? {})}::jsonb, ${input.escalation_policy_id}, ${input.schedule_id ?? null},
        ${input.dedupe_key_template ?? null}, ${input.throttle_seconds ?? null}, ${input.group_wait_seconds ?? 0},
        ${input.group_interval_seconds ?? null}, ${input.continue ?? false})
      RETURNING *`)) as Row;
  } catch (err) {
    throw asDomainError(err, { message: "a notification route with this name already exists" });
  }
}

/** `PATCH /notification-routes/:id/enable`. */
export async function enableRoute(ctx: AppContext, actor: Actor | null, id: string): Promise<Row> {
  need(actor, NOTIFY_PERMS.routesManage);
  const row = await ctx.db.one(
    sql`UPDATE notification_routes SET enabled = true, updated_at = ${ctx.now()} WHERE id = ${id} RETURNING *`,
  );
  if (!row) throw new NotFoundError("notification route not found");
  return row;
}

/** Not part of the v2 surface (routes are disabled by an admin through the domain/CLI). */
export async function disableRoute(ctx: AppContext, actor: Actor | null, id: string): Promise<Row> {
  need(actor, NOTIFY_PERMS.routesManage);
  const row = await ctx.db.one(
    sql`UPDATE notification_routes SET enabled = false, updated_at = ${ctx.now()} WHERE id = ${id} RETURNING *`,
  );
  if (!row) throw new NotFoundError("notification route not found");
  return row;
}
