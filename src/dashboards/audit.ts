import type { Actor } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";

export type AuditAction =
  | "dashboard_publish"
  | "dashboard_enable"
  | "dashboard_disable"
  | "dashboard_verify"
  | "dashboard_reject";

export interface AuditEntry {
  action: AuditAction;
  packageId?: string | null;
  dashboardId?: string | null;
  version?: string | null;
  routeSlug?: string | null;
  contentHash?: string | null;
  /** written | idempotent_noop | enabled | disabled | verified | failed | rejected */
  result: string;
  /** The error code when refused. */
  reason?: string | null;
}

/**
 * One audit record per publish, enable and disable (spec 4.6 invariant 3). A failure to write
 * it is logged and swallowed: the audit trail never fails the request it describes.
 */
export async function recordAudit(ctx: AppContext, actor: Actor, e: AuditEntry): Promise<void> {
  try {
    await ctx.db.query(sql`
      INSERT INTO dashboard_package_audit (actor_user_id, jti, action, package_id, dashboard_id, version,
        route_slug, content_hash, result, reason, at)
      VALUES (${actor.kind === "user" ? actor.id : null}, ${actor.tokenJti ?? null}, ${e.action},
        ${e.packageId ?? null}, ${e.dashboardId ?? null}, ${e.version ?? null}, ${e.routeSlug ?? null},
        ${e.contentHash ?? null}, ${e.result}, ${e.reason ?? null}, ${ctx.now()})`);
  } catch (err) {
    ctx.log.error({ err, audit: e }, "dashboard package audit record could not be written");
  }
}

export interface AuditRow {
  [k: string]: unknown;
  actor_user_id: string | null;
  jti: string | null;
  action: string;
  package_id: string | null;
  dashboard_id: string | null;
  version: string | null;
  route_slug: string | null;
  content_hash: string | null;
  result: string;
  reason: string | null;
  at: Date;
}

export async function listAudit(ctx: AppContext, limit = 200): Promise<AuditRow[]> {
  return ctx.db.many<AuditRow>(sql`SELECT * FROM dashboard_package_audit ORDER BY id DESC LIMIT ${limit}`);
}
