import type { Actor } from "../access/actor.ts";
import { ForbiddenError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";

export interface PluginRow {
  [k: string]: unknown;
  id: string;
  name: string;
  status: "pending" | "approved" | "disabled";
  owner_user_id: string;
}

/** The plugin registered for a source instance, if any. */
export function findPlugin(
  db: Queryable,
  source: string,
  instance: string,
  partition: string,
): Promise<PluginRow | undefined> {
  return db.one<PluginRow>(
    sql`SELECT id, name, status, owner_user_id FROM inventory_plugins
         WHERE source = ${source} AND source_instance = ${instance} AND partition = ${partition}`,
  );
}

/**
 * Spec 4.4: snapshots come from an approved inventory plugin. The caller must own the approved
 * plugin of this source instance; the 403 says which step is missing.
 */
export function requireApprovedPlugin(
  plugin: PluginRow | undefined,
  actor: Actor,
  where: { source: string; instance: string; partition: string },
): PluginRow {
  const what = `source '${where.source}' instance '${where.instance}' (partition '${where.partition}')`;
  if (!plugin) {
    throw new ForbiddenError(
      `no inventory plugin is registered for ${what}: register one (POST /api/v2/inventory-plugins) and have an admin approve it`,
      { code: "plugin_not_registered" },
    );
  }
  if (plugin.owner_user_id !== actor.id) {
    throw new ForbiddenError(
      `${what} is reported by inventory plugin '${plugin.name}', which belongs to another user`,
      {
        code: "plugin_owner_mismatch",
      },
    );
  }
  if (plugin.status === "pending") {
    throw new ForbiddenError(`inventory plugin '${plugin.name}' awaits an admin's approval`, {
      code: "plugin_not_approved",
    });
  }
  if (plugin.status !== "approved") {
    throw new ForbiddenError(`inventory plugin '${plugin.name}' is disabled`, { code: "plugin_disabled" });
  }
  return plugin;
}
