/**
 * Inventory plugins (spec 4.4: "snapshot from an approved inventory plugin"; issue 20). A plugin
 * names the source, instance and partition it reports and the user whose credentials submit for
 * it. Its owner registers it (pending); an admin approves, disables or re-enables it. Only the
 * owner of an approved plugin may upload snapshots for that source instance (403 otherwise,
 * saying which step is missing). Decision 0203.
 */
import { defineResource } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { defineStateMachine } from "../../jsonapi/state-machine.ts";
import { ValidationError } from "../../kernel/errors.ts";
import { sql } from "../../storage/sql.ts";

export const PLUGIN_STATUSES = ["pending", "approved", "disabled"] as const;
export type PluginStatus = (typeof PLUGIN_STATUSES)[number];

const SOURCE_RE = /^[a-z0-9][a-z0-9_.-]{0,127}$/;
const INSTANCE_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const ADMIN = { role: "admin" } as const;

const PLUGIN_STATE_MACHINE = defineStateMachine<PluginStatus>({
  name: "inventory-plugin",
  attribute: "status",
  states: PLUGIN_STATUSES,
  initial: ["pending"],
  transitions: {
    approve: { from: ["pending"], to: "approved" },
    disable: { from: ["pending", "approved"], to: "disabled" },
    enable: { from: ["disabled"], to: "approved" },
  },
});

function checkIdentifiers(input: Record<string, unknown>): void {
  if (typeof input.source === "string") input.source = input.source.trim().toLowerCase();
  if (!SOURCE_RE.test(String(input.source ?? ""))) {
    throw new ValidationError("source must match ^[a-z0-9][a-z0-9_.-]{0,127}$", {
      source: { pointer: "/data/attributes/source" },
    });
  }
  for (const k of ["source_instance", "partition"]) {
    if (input[k] !== undefined && !INSTANCE_RE.test(String(input[k]))) {
      throw new ValidationError(`${k} must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, {
        source: { pointer: `/data/attributes/${k}` },
      });
    }
  }
}

export const inventoryPluginResource = registerResource(
  defineResource({
    type: "inventory-plugin",
    base: "/inventory-plugins",
    table: "inventory_plugins",
    tag: "inventory-plugin",
    description:
      "Inventory plugins: the sources allowed to report source-inventory snapshots (registered by their owner, approved by an admin)",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      name: { type: "string", required: true, update: true, nullable: false, maxLength: 200 },
      description: { type: "string", create: true, update: true, maxLength: 2000 },
      source: { type: "string", required: true, nullable: false, maxLength: 128 },
      source_instance: { type: "string", required: true, nullable: false, maxLength: 128 },
      partition: { type: "string", create: true, nullable: false, default: "default", maxLength: 128 },
      owner_user_id: {
        type: "uuid",
        create: true,
        nullable: false,
        description: "The user whose credentials submit snapshots (default: the caller)",
      },
      status: { type: "enum", values: PLUGIN_STATUSES, nullable: false },
      status_reason: { type: "string" },
      approved_by: { type: "string" },
      approved_at: { type: "datetime" },
      last_snapshot_at: { type: "datetime" },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    defaultSort: "name",
    stateMachine: PLUGIN_STATE_MACHINE,
    policies: { read: { access: { permission: "devices.view" } } },
    touchColumn: "updated_at",
    actions: {
      create: {
        access: { permission: "devices.ingest" },
        summary: "Register an inventory plugin (pending until an admin approves it)",
        set: (input, _c, actor) => {
          checkIdentifiers(input);
          // Only an admin may register a plugin on someone else's behalf.
          if (
            input.owner_user_id !== undefined &&
            input.owner_user_id !== actor.id &&
            actor.role !== "admin"
          ) {
            throw new ValidationError("only an admin may register a plugin for another user", {
              source: { pointer: "/data/attributes/owner_user_id" },
            });
          }
          return { owner_user_id: input.owner_user_id ?? actor.id };
        },
      },
      update: { access: ADMIN, summary: "Rename or describe an inventory plugin" },
      delete: { access: ADMIN, summary: "Remove an inventory plugin (its snapshots stay readable)" },
    },
    operations: [
      {
        name: "approve",
        path: "/approve",
        access: ADMIN,
        transition: "approve",
        summary: "Approve: its owner may now submit snapshots",
        set: (_input, c, actor) => ({
          approved_by: actor.email ?? actor.id,
          approved_at: c.now,
          status_reason: null,
        }),
      },
      {
        name: "disable",
        path: "/disable",
        access: ADMIN,
        transition: "disable",
        summary: "Disable: snapshot uploads are refused until re-enabled",
        arguments: { reason: { type: "string", maxLength: 1000 } },
        set: (input) => ({ status_reason: (input.reason as string | undefined) ?? null }),
      },
      {
        name: "enable",
        path: "/enable",
        access: ADMIN,
        transition: "enable",
        summary: "Re-enable a disabled plugin",
        set: () => ({ status_reason: null }),
      },
    ],
    hooks: {
      beforeCreate: async (c, _actor, input) => {
        const owner = input.owner_user_id;
        if (typeof owner === "string") {
          const found = await c.tx.one(sql`SELECT 1 FROM users WHERE id = ${owner}::uuid`);
          if (!found) {
            throw new ValidationError("owner_user_id does not name an existing user", {
              source: { pointer: "/data/attributes/owner_user_id" },
            });
          }
        }
      },
    },
  }),
);
