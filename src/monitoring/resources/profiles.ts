/**
 * JSON:API declaration of monitoring profiles (type `monitoring-profile`, issue 13): default
 * checks carried by a device group. The reconcile in ../profiles.ts turns them into checks.
 */
import { defineResource } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { ConflictError, ValidationError } from "../../kernel/errors.ts";
import type { Queryable } from "../../storage/db.ts";
import { sql } from "../../storage/sql.ts";
import { parseLabels } from "../labels.ts";
import { reconcileProfiles, validateProfileChecks } from "../profiles.ts";

async function validateRefs(
  tx: Queryable,
  input: Record<string, unknown>,
  before: Record<string, unknown> | null,
) {
  if (input.checks !== undefined) input.checks = validateProfileChecks(input.checks);
  const group = input.group_id !== undefined ? input.group_id : (before?.group_id ?? null);
  const type = input.device_type !== undefined ? input.device_type : (before?.device_type ?? null);
  if (group == null && (type == null || type === "")) {
    throw new ValidationError(
      "a profile needs a group_id, a device_type or both: which devices does it cover?",
      {
        source: { pointer: "/data/attributes/group_id" },
      },
    );
  }
  if (typeof input.group_id === "string") {
    const found = await tx.one(sql`SELECT 1 FROM device_groups WHERE id = ${input.group_id}::uuid`);
    if (!found) {
      throw new ValidationError(`group_id '${input.group_id}' does not reference an existing device group`, {
        source: { pointer: "/data/attributes/group_id" },
      });
    }
  }
  if (input.agent_labels !== undefined && input.agent_labels !== null) {
    input.agent_labels = parseLabels(input.agent_labels, "/data/attributes/agent_labels", { selector: true });
  }
  if (typeof input.agent_uid === "string" && input.agent_uid !== "") {
    const found = await tx.one(sql`SELECT 1 FROM agents WHERE uid = ${input.agent_uid}`);
    if (!found) {
      throw new ValidationError(`agent_uid '${input.agent_uid}' does not reference a registered agent`, {
        source: { pointer: "/data/attributes/agent_uid" },
      });
    }
  }
  const name = input.name;
  if (typeof name === "string") {
    const clash = await tx.one(
      sql`SELECT id FROM monitoring_profiles WHERE lower(name) = lower(${name})
            AND (${(before?.id as string | undefined) ?? null}::uuid IS NULL OR id <> ${(before?.id as string | undefined) ?? null}::uuid)`,
    );
    if (clash) {
      throw new ConflictError(`a monitoring profile named '${name}' already exists`, {
        code: "name_taken",
        source: { pointer: "/data/attributes/name" },
      });
    }
  }
}

const STATS = { filterable: false } as const;

export const monitoringProfileResource = registerResource(
  defineResource({
    type: "monitoring-profile",
    base: "/monitoring-profiles",
    table: "monitoring_profiles",
    tag: "monitoring-profile",
    description:
      "Default checks for the devices of a group (optionally narrowed by device type): devices that join are monitored within 10 s, devices that leave lose the checks",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      name: { type: "string", required: true, update: true, nullable: false, maxLength: 200 },
      description: { type: "string", create: true, update: true, maxLength: 4000, filterable: false },
      enabled: { type: "boolean", create: true, update: true, nullable: false, default: true },
      group_id: {
        type: "uuid",
        create: true,
        update: true,
        description: "Devices of this group are covered (with device_type, both must match)",
      },
      device_type: { type: "string", create: true, update: true, maxLength: 100 },
      agent_uid: {
        type: "string",
        create: true,
        update: true,
        maxLength: 255,
        description: "Pin the profile's checks to this agent (null: unassigned placement)",
      },
      agent_labels: {
        type: "object",
        create: true,
        update: true,
        filterable: false,
        description:
          'Place the profile\'s checks on the pool of agents carrying these labels, e.g. {"site": "dc1"} (agent_uid wins)',
      },
      checks: {
        type: "array",
        items: "object",
        required: true,
        update: true,
        nullable: false,
        filterable: false,
        description:
          "Check templates: {name, check_type, target? ('{ip}' default; '{hostname}' also), port?, interval_seconds?, timeout_seconds?, config?}",
      },
      devices_matched: { type: "integer", ...STATS },
      checks_managed: { type: "integer", ...STATS },
      conflicts: {
        type: "array",
        items: "object",
        ...STATS,
        description: "Devices that already have a check of a template's name (they keep their own)",
      },
      last_applied_at: { type: "datetime", ...STATS },
      created_at: { type: "datetime", filterable: false },
      updated_at: { type: "datetime", filterable: false },
    },
    defaultSort: "name",
    pagination: { styles: ["offset", "keyset"], defaultLimit: 100, maxLimit: 1000 },
    policies: { read: { access: { permission: "services.view" } } },
    touchColumn: "updated_at",
    actions: {
      create: { access: { permission: "services.create" }, summary: "Create a monitoring profile" },
      update: { access: { permission: "services.update" }, summary: "Update a monitoring profile" },
      delete: {
        access: { permission: "services.delete" },
        summary: "Delete a monitoring profile; its checks are deleted and their alerts resolved",
      },
    },
    hooks: {
      beforeCreate: (c, _actor, input) => validateRefs(c.tx, input, null),
      beforeUpdate: (c, _actor, before, input) => validateRefs(c.tx, input, before),
      // Apply at once rather than on the leader's next pass (which would also do it).
      afterCommit: async (app) => {
        await reconcileProfiles(app);
      },
    },
  }),
);
