import { clearAlertsFor } from "../alerting/raise.ts";
import type { AppContext } from "../kernel/context.ts";
import { ValidationError } from "../kernel/errors.ts";
import { sql } from "../storage/sql.ts";
import { CHECK_TYPES } from "./checks/types.ts";
import { validateCheckConfig } from "./checks/validate-config.ts";

/**
 * Monitoring profiles (issue 13, decision 0600): a device group, optionally narrowed by device
 * type, carries default checks. The leader reconciles every profile against the devices it
 * matches (every 10 s, and at once after a profile changes):
 *
 * - a matching device without one of the profile's checks gets it, targeting the device's IP
 *   (or the entry's `target` template with `{ip}` / `{hostname}`), pinned to the profile's
 *   agent if it names one;
 * - managed checks follow edits of the profile and changes of the device's address;
 * - a managed check whose device left the group (or was deleted), whose profile entry was
 *   removed, or whose profile was disabled or deleted, is deleted, resolving its open alerts.
 *
 * A device that already has a check of the same name keeps it: the profile's check is not
 * created for it, and the profile lists the clash in `conflicts` so it is never silent.
 */

export interface ProfileCheck {
  name: string;
  check_type: (typeof CHECK_TYPES)[number];
  target?: string;
  port?: number;
  interval_seconds?: number;
  timeout_seconds?: number;
  config?: Record<string, unknown>;
}

export const MAX_PROFILE_CHECKS = 20;
const ENTRY_KEYS = new Set([
  "name",
  "check_type",
  "target",
  "port",
  "interval_seconds",
  "timeout_seconds",
  "config",
]);

/** Validate a profile's `checks` list; the messages point at the member that is wrong. */
export function validateProfileChecks(raw: unknown): ProfileCheck[] {
  const at = (i: number, member?: string) =>
    `/data/attributes/checks/${i}${member === undefined ? "" : `/${member}`}`;
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_PROFILE_CHECKS) {
    throw new ValidationError(`checks must be a list of 1 to ${MAX_PROFILE_CHECKS} check templates`, {
      source: { pointer: "/data/attributes/checks" },
    });
  }
  const names = new Set<string>();
  return raw.map((e, i) => {
    if (e === null || typeof e !== "object" || Array.isArray(e)) {
      throw new ValidationError("each check template must be an object", { source: { pointer: at(i) } });
    }
    const o = e as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      if (!ENTRY_KEYS.has(k)) {
        throw new ValidationError(
          `unknown member '${k}' in a check template (allowed: ${[...ENTRY_KEYS].join(", ")})`,
          { source: { pointer: at(i, k) } },
        );
      }
    }
    if (typeof o.name !== "string" || o.name.trim() === "" || o.name.length > 200) {
      throw new ValidationError("name must be a non-empty string of at most 200 characters", {
        source: { pointer: at(i, "name") },
      });
    }
    if (names.has(o.name.toLowerCase())) {
      throw new ValidationError(`two check templates are named '${o.name}'`, {
        source: { pointer: at(i, "name") },
      });
    }
    names.add(o.name.toLowerCase());
    if (!(CHECK_TYPES as readonly string[]).includes(String(o.check_type))) {
      throw new ValidationError(`check_type must be one of ${CHECK_TYPES.join(", ")}`, {
        source: { pointer: at(i, "check_type") },
      });
    }
    if (o.target !== undefined && (typeof o.target !== "string" || !/\{(ip|hostname)\}/.test(o.target))) {
      throw new ValidationError("target must be a template containing {ip} or {hostname}", {
        source: { pointer: at(i, "target") },
      });
    }
    const int = (member: string, min: number, max: number) => {
      const v = o[member];
      if (v === undefined) return;
      if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
        throw new ValidationError(`${member} must be an integer from ${min} to ${max}`, {
          source: { pointer: at(i, member) },
        });
      }
    };
    int("port", 1, 65535);
    int("interval_seconds", 1, 86_400);
    int("timeout_seconds", 1, 300);
    if ((o.check_type === "tcp" || o.check_type === "grpc") && o.port === undefined) {
      throw new ValidationError(`a ${o.check_type} check needs a port`, {
        source: { pointer: at(i, "port") },
      });
    }
    if (o.config !== undefined) {
      if (o.config === null || typeof o.config !== "object" || Array.isArray(o.config)) {
        throw new ValidationError("config must be an object", { source: { pointer: at(i, "config") } });
      }
      validateCheckConfig(String(o.check_type), o.config);
    }
    return o as unknown as ProfileCheck;
  });
}

/** One reconcile pass over every profile; returns what it changed. */
export async function reconcileProfiles(
  ctx: AppContext,
): Promise<{ created: number; updated: number; deleted: number }> {
  const now = ctx.now();
  // The checks every enabled profile wants: one per (profile, template, matching device).
  const want = sql`
    SELECT p.id AS profile_id, lower(t.spec->>'name') AS profile_check, t.spec, d.uid AS device_uid,
           replace(replace(coalesce(t.spec->>'target', '{ip}'), '{ip}', d.ip),
                   '{hostname}', coalesce(nullif(d.hostname, ''), d.ip)) AS target,
           p.agent_uid, p.agent_labels
    FROM monitoring_profiles p
      CROSS JOIN LATERAL jsonb_array_elements(p.checks) AS t(spec)
      JOIN devices d ON d.deleted_at IS NULL AND d.ip IS NOT NULL AND d.ip <> ''
        AND (p.group_id IS NULL OR d.group_id = p.group_id)
        AND (p.device_type IS NULL OR d.type = p.device_type)
    WHERE p.enabled`;
  const gone = await ctx.db.many<{ id: string }>(sql`
    DELETE FROM service_checks c
    WHERE c.profile_id IS NOT NULL AND NOT EXISTS (
      SELECT 1 FROM (${want}) w
      WHERE w.profile_id = c.profile_id AND w.device_uid = c.device_uid AND w.profile_check = c.profile_check)
    RETURNING c.id`);
  const updated = await ctx.db.many<{ id: string }>(sql`
    UPDATE service_checks c SET
      target = w.target,
      port = (w.spec->>'port')::int,
      interval_seconds = coalesce((w.spec->>'interval_seconds')::int, 60),
      timeout_seconds = coalesce((w.spec->>'timeout_seconds')::int, 10),
      config = coalesce(w.spec->'config', '{}'::jsonb),
      agent_uid = w.agent_uid,
      agent_labels = w.agent_labels,
      updated_at = ${now}
    FROM (${want}) w
    WHERE c.profile_id = w.profile_id AND c.device_uid = w.device_uid AND c.profile_check = w.profile_check
      AND (c.target IS DISTINCT FROM w.target
        OR c.port IS DISTINCT FROM (w.spec->>'port')::int
        OR c.interval_seconds IS DISTINCT FROM coalesce((w.spec->>'interval_seconds')::int, 60)
        OR c.timeout_seconds IS DISTINCT FROM coalesce((w.spec->>'timeout_seconds')::int, 10)
        OR c.config IS DISTINCT FROM coalesce(w.spec->'config', '{}'::jsonb)
        OR c.agent_uid IS DISTINCT FROM w.agent_uid
        OR c.agent_labels IS DISTINCT FROM w.agent_labels)
    RETURNING c.id`);
  // ON CONFLICT DO NOTHING: a device's own check of the same name wins (reported below).
  const created = await ctx.db.many<{ id: string }>(sql`
    INSERT INTO service_checks (name, check_type, target, port, interval_seconds, timeout_seconds, config,
                                device_uid, agent_uid, agent_labels, profile_id, profile_check, next_run_at, created_at, updated_at)
    SELECT w.spec->>'name', w.spec->>'check_type', w.target, (w.spec->>'port')::int,
           coalesce((w.spec->>'interval_seconds')::int, 60), coalesce((w.spec->>'timeout_seconds')::int, 10),
           coalesce(w.spec->'config', '{}'::jsonb), w.device_uid, w.agent_uid, w.agent_labels, w.profile_id, w.profile_check,
           ${now}::timestamptz + floor(random() * coalesce((w.spec->>'interval_seconds')::int, 60) * 1000) * interval '1 millisecond',
           ${now}, ${now}
    FROM (${want}) w
    WHERE NOT EXISTS (SELECT 1 FROM service_checks c
                      WHERE c.profile_id = w.profile_id AND c.device_uid = w.device_uid
                        AND c.profile_check = w.profile_check)
    ON CONFLICT DO NOTHING
    RETURNING id`);
  // What each profile now covers, and which devices it could not give a check (name clash).
  await ctx.db.query(sql`
    UPDATE monitoring_profiles p SET
      devices_matched = coalesce(s.devices, 0),
      checks_managed = coalesce(s.managed, 0),
      conflicts = coalesce(s.conflicts, '[]'::jsonb),
      last_applied_at = ${now}
    FROM (
      SELECT p2.id,
        (SELECT count(DISTINCT w.device_uid) FROM (${want}) w WHERE w.profile_id = p2.id) AS devices,
        (SELECT count(*) FROM service_checks c WHERE c.profile_id = p2.id) AS managed,
        (SELECT jsonb_agg(jsonb_build_object('device_uid', w.device_uid, 'check', w.spec->>'name'))
           FROM (${want}) w
          WHERE w.profile_id = p2.id AND NOT EXISTS (
            SELECT 1 FROM service_checks c WHERE c.profile_id = w.profile_id
              AND c.device_uid = w.device_uid AND c.profile_check = w.profile_check)) AS conflicts
      FROM monitoring_profiles p2) s
    WHERE s.id = p.id`);
  for (const g of gone) {
    await clearAlertsFor(ctx, {
      serviceCheckId: g.id,
      resolutionNote: "service check removed by its monitoring profile",
    });
  }
  return { created: created.length, updated: updated.length, deleted: gone.length };
}
