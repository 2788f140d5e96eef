import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";

/**
 * A device's availability follows its checks (issue 13, decision 0600). Among its enabled
 * checks that have a result: at least one `success` or `warning` → available; all `critical`,
 * `error` or `unknown` → unavailable. A device with no checked results keeps what sightings and
 * sweeps say. The row is written only when the answer changes, with the time and the reason,
 * so re-running a green check costs no device write.
 */
export async function deriveDeviceAvailability(
  ctx: AppContext,
  deviceUids: readonly string[],
): Promise<number> {
  const uids = [...new Set(deviceUids.filter((u) => typeof u === "string" && u !== ""))];
  if (uids.length === 0) return 0;
  const now = ctx.now();
  const changed = await ctx.db.many<{ uid: string }>(sql`
    WITH v AS (
      SELECT c.device_uid,
             bool_or(c.last_result IN ('success', 'warning')) AS up,
             count(*) AS checks,
             count(*) FILTER (WHERE c.last_result NOT IN ('success', 'warning')) AS failing,
             string_agg(CASE WHEN c.last_result NOT IN ('success', 'warning')
                             THEN c.name || ': ' || c.last_result
                                  || COALESCE(' (' || left(c.last_error, 120) || ')', '') END, '; '
                        ORDER BY c.name) AS failures
      FROM service_checks c
      WHERE c.enabled AND c.device_uid = ANY(${uids}::text[]) AND c.last_result IS NOT NULL
      GROUP BY c.device_uid)
    UPDATE devices d SET
      is_available = v.up,
      availability_changed_at = ${now},
      availability_reason = CASE WHEN v.up
        THEN CASE WHEN v.failing = 0 THEN 'all ' || v.checks || ' checks pass'
                  ELSE (v.checks - v.failing) || ' of ' || v.checks || ' checks pass' END
        ELSE v.failures END,
      modified_time = ${now}
    FROM v
    WHERE d.uid = v.device_uid AND d.is_available IS DISTINCT FROM v.up
    RETURNING d.uid`);
  return changed.length;
}
