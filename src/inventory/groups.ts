import { NotFoundError } from "../kernel/errors.ts";
import { isUuid } from "../kernel/ids.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";

/** A device group by id or (case-insensitive, unique) name; 404 naming it when there is none. */
export async function findGroup(q: Queryable, idOrName: string): Promise<{ id: string; name: string }> {
  const rows = isUuid(idOrName)
    ? await q.many<{ id: string; name: string }>(
        sql`SELECT id, name FROM device_groups WHERE id = ${idOrName}::uuid`,
      )
    : await q.many<{ id: string; name: string }>(
        sql`SELECT id, name FROM device_groups WHERE lower(name) = lower(${idOrName}) LIMIT 2`,
      );
  if (rows.length === 0) throw new NotFoundError(`device group '${idOrName}' not found`);
  if (rows.length > 1)
    throw new NotFoundError(`several device groups are named '${idOrName}': give the group's id`);
  return rows[0] as { id: string; name: string };
}

/** Put devices into a group (null: out of any group) and keep the groups' device counts true. */
export async function assignGroup(
  q: Queryable,
  uids: readonly string[],
  groupId: string | null,
  opts: { onlyUngrouped?: boolean } = {},
): Promise<number> {
  if (uids.length === 0) return 0;
  const only = opts.onlyUngrouped === true;
  const moved = await q.many<{ old: string | null }>(sql`
    UPDATE devices d SET group_id = ${groupId}::uuid
    FROM (SELECT uid, group_id AS old FROM devices WHERE uid = ANY(${[...uids]}::text[]) FOR UPDATE) o
    WHERE d.uid = o.uid AND d.group_id IS DISTINCT FROM ${groupId}::uuid
      AND (NOT ${only}::boolean OR o.old IS NULL)
    RETURNING o.old`);
  const touched = [...new Set([groupId, ...moved.map((m) => m.old)].filter((g): g is string => g !== null))];
  await refreshGroupCounts(q, touched);
  return moved.length;
}

/** device_count is stored (the list sorts and reads it cheaply); recount the groups given. */
export async function refreshGroupCounts(q: Queryable, groupIds: readonly string[]): Promise<void> {
  if (groupIds.length === 0) return;
  await q.query(sql`
    UPDATE device_groups g SET device_count =
      (SELECT count(*) FROM devices d WHERE d.group_id = g.id AND d.deleted_at IS NULL)
    WHERE g.id = ANY(${[...groupIds]}::uuid[])`);
}
