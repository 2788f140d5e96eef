/**
 * JSON:API declaration of composite checks (type `composite-check`): one verdict over service
 * checks and metric thresholds (docs/decisions/0610-composite-checks.md). Results are SRQL
 * `composite_results`; `evaluate` records one now.
 */
import { defineResource, type OperationContext } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { ConflictError, ValidationError } from "../../kernel/errors.ts";
import type { Queryable } from "../../storage/db.ts";
import { sql } from "../../storage/sql.ts";
import { COMPOSITE_COLUMNS, type CompositeRow, evaluateComposite } from "../composite.ts";
import { parseCompositeInputs, resolveCheckInputs } from "../composite-inputs.ts";
import { COMPOSITE_RULES, VERDICTS } from "../composite-verdict.ts";

const SLUG = "^[a-z0-9][a-z0-9_-]{0,62}$";

async function validate(
  c: OperationContext,
  input: Record<string, unknown>,
  before: Record<string, unknown> | null,
): Promise<void> {
  if (input.inputs !== undefined) {
    const inputs = parseCompositeInputs(input.inputs);
    await resolveCheckInputs(c.tx, inputs);
    input.inputs = inputs;
  }
  if (typeof input.slug === "string") await assertSlugFree(c.tx, input.slug, (before?.id as string) ?? null);
  if (typeof input.device_uid === "string" && input.device_uid !== "") {
    const found = await c.tx.one(
      sql`SELECT 1 FROM devices WHERE uid = ${input.device_uid} AND deleted_at IS NULL`,
    );
    if (!found) {
      throw new ValidationError(`device_uid '${input.device_uid}' does not reference an existing device`, {
        source: { pointer: "/data/attributes/device_uid" },
      });
    }
  }
}

// A new or changed definition is evaluated at once by the leader's next pass.
const dueNow = (_input: Record<string, unknown>, c: OperationContext) => ({ next_run_at: c.now });

async function assertSlugFree(tx: Queryable, slug: string, selfId: string | null): Promise<void> {
  const clash = await tx.one(
    sql`SELECT 1 FROM composite_checks WHERE slug = ${slug} AND (${selfId}::uuid IS NULL OR id <> ${selfId}::uuid)`,
  );
  if (clash) {
    throw new ConflictError(`a composite check with slug '${slug}' already exists`, {
      code: "slug_taken",
      source: { pointer: "/data/attributes/slug" },
    });
  }
}

export const compositeCheckResource = registerResource(
  defineResource({
    type: "composite-check",
    base: "/composite-checks",
    table: "composite_checks",
    tag: "composite-check",
    description:
      "A verdict (healthy, degraded, down, unknown) over service checks and metric thresholds, evaluated on an interval; stale inputs count as unknown",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      slug: {
        type: "string",
        required: true,
        nullable: false,
        maxLength: 63,
        pattern: SLUG,
        description: "Stable name used by the SRQL device filter `composite.<slug>`",
      },
      name: { type: "string", required: true, update: true, nullable: false, maxLength: 255 },
      description: { type: "string", create: true, update: true, maxLength: 4000, filterable: false },
      device_uid: {
        type: "string",
        create: true,
        update: true,
        maxLength: 255,
        description: "The device whose `composite.<slug>` filter fields carry this verdict",
      },
      inputs: {
        type: "array",
        items: "object",
        required: true,
        update: true,
        nullable: false,
        filterable: false,
        description:
          "Check inputs {key, kind: 'check', check_id | check_name, critical?, max_age_seconds?} and metric inputs {key, kind: 'metric', metric, device_uid?, agg? (avg|min|max|last), op, threshold, window_seconds? (300), critical?, max_age_seconds?}; a metric input is down while `agg(metric) op threshold` holds",
      },
      rule: { type: "enum", values: COMPOSITE_RULES, create: true, update: true, nullable: false },
      interval_seconds: {
        type: "integer",
        create: true,
        update: true,
        nullable: false,
        minimum: 5,
        maximum: 86_400,
      },
      enabled: { type: "boolean", create: true, update: true, nullable: false, default: true },
      last_evaluated_at: { type: "datetime" },
      last_verdict: { type: "enum", values: VERDICTS },
      created_at: { type: "datetime", filterable: false },
      updated_at: { type: "datetime", filterable: false },
    },
    defaultSort: "slug",
    pagination: { styles: ["offset", "keyset"], defaultLimit: 100, maxLimit: 1000 },
    policies: { read: { access: { permission: "services.view" } } },
    touchColumn: "updated_at",
    actions: {
      create: { access: { permission: "services.create" }, summary: "Create a composite check", set: dueNow },
      update: { access: { permission: "services.update" }, summary: "Update a composite check", set: dueNow },
      delete: {
        access: { permission: "services.delete" },
        summary: "Delete a composite check and its results",
      },
    },
    operations: [
      {
        name: "evaluate",
        method: "POST",
        path: "/evaluate",
        access: { permission: "services.run" },
        summary: "Evaluate the composite now and record a result (last_verdict answers it)",
        handler: async (c, _actor, record) => {
          const row = await c.tx.one<CompositeRow>(
            sql`SELECT ${COMPOSITE_COLUMNS} FROM composite_checks WHERE id = ${record?.id ?? null}::uuid`,
          );
          if (row) await evaluateComposite(c.tx, row, c.now);
        },
      },
    ],
    hooks: {
      beforeCreate: (c, _actor, input) => validate(c, input, null),
      beforeUpdate: (c, _actor, before, input) => validate(c, input, before),
    },
  }),
);
