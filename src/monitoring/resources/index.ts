/**
 * JSON:API declarations: service checks (type `service-check`, reference §8.1) and poll jobs
 * (type `poll-job`, spec §2.2, read-only: state changes only through poll-job-state.ts).
 */

import { clearAlertsFor } from "../../alerting/raise.ts";
import type { AttributeDecl } from "../../jsonapi/define.ts";
import { defineResource } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { ConflictError, ValidationError } from "../../kernel/errors.ts";
import { mergeCheckSecrets, redactCheckConfig } from "../../kernel/secrets.ts";
import { compileUserPattern } from "../../kernel/user-pattern.ts";
import type { Queryable } from "../../storage/db.ts";
import { sql } from "../../storage/sql.ts";
import { CHECK_CONFIG_SCHEMAS } from "../checks/config-schemas.ts";
import { CHECK_STATUSES, CHECK_TYPES } from "../checks/types.ts";
import { validateCheckConfig } from "../checks/validate-config.ts";
import { parseLabels } from "../labels.ts";
import { isStale } from "../overdue.ts";
import { POLL_JOB_STATUSES, pollJobMachine } from "../poll-job-state.ts";
import { initialRunAt } from "../scheduler.ts";
import { TargetPolicy } from "../target-policy.ts";
// Declared beside the checks it manages (registered on import, like this file).
import "./profiles.ts";
import "./composite-checks.ts";

const ro = (type: AttributeDecl["type"], extra: Partial<AttributeDecl> = {}): AttributeDecl => ({
  type,
  ...extra,
});
const CHECK_TYPE_LABELS: Record<string, string> = {
  ping: "Ping",
  http: "HTTP",
  tcp: "TCP",
  snmp: "SNMP",
  grpc: "gRPC",
  dns: "DNS",
  custom: "Custom",
};

/** User regular expressions in a check's config must compile on RE2 (kernel/user-pattern.ts). */
function checkPatterns(input: Record<string, unknown>): void {
  const cfg = input.config;
  if (cfg && typeof cfg === "object" && Object.hasOwn(cfg, "body_match")) {
    const pattern = (cfg as Record<string, unknown>).body_match;
    if (pattern !== null && pattern !== undefined)
      compileUserPattern(pattern, "/data/attributes/config/body_match");
  }
}

function validateCheck(
  input: Record<string, unknown>,
  existing: Record<string, unknown> | null,
  allowLinkLocal: boolean,
) {
  const checkType = String(input.check_type ?? existing?.check_type ?? "");
  const target = input.target ?? existing?.target;
  if (input.target !== undefined || !existing) {
    new TargetPolicy({ allowLinkLocal }).validateTarget(checkType, String(target ?? ""));
  }
  checkPatterns(input);
  const port = input.port ?? existing?.port;
  if ((checkType === "tcp" || checkType === "grpc") && (port === null || port === undefined)) {
    throw new ValidationError(`a ${checkType} check needs a port`, {
      source: { pointer: "/data/attributes/port" },
    });
  }
  const warn = (input.warning_threshold_ms ?? existing?.warning_threshold_ms) as number | null | undefined;
  const crit = (input.critical_threshold_ms ?? existing?.critical_threshold_ms) as number | null | undefined;
  if (warn != null && crit != null && warn > crit) {
    throw new ValidationError("warning_threshold_ms must not exceed critical_threshold_ms", {
      source: { pointer: "/data/attributes/warning_threshold_ms" },
    });
  }
  if (
    input.config !== undefined &&
    (input.config === null || typeof input.config !== "object" || Array.isArray(input.config))
  ) {
    throw new ValidationError("config must be an object", { source: { pointer: "/data/attributes/config" } });
  }
  if (input.config !== undefined) validateCheckConfig(checkType, input.config);
}

/**
 * Names are unique per device (checks without a device share one scope), ignoring case; the
 * unique index of migration 0603 is the backstop for concurrent creates.
 */
async function assertNameFree(tx: Queryable, name: string, deviceUid: string | null, selfId: string | null) {
  const clash = await tx.one(
    sql`SELECT id FROM service_checks
         WHERE coalesce(device_uid, '') = ${deviceUid ?? ""} AND lower(name) = lower(${name})
           AND (${selfId}::uuid IS NULL OR id <> ${selfId}::uuid)`,
  );
  if (clash) {
    throw new ConflictError(
      deviceUid
        ? `device '${deviceUid}' already has a check named '${name}'`
        : `a check named '${name}' already exists (names are unique per device; checks without a device share one scope)`,
      { code: "name_taken", source: { pointer: "/data/attributes/name" } },
    );
  }
}

/** A check placed on a gateway or agent that does not exist would never run (issue 13). */
async function assertPlacementExists(tx: Queryable, input: Record<string, unknown>): Promise<void> {
  if (input.agent_labels !== undefined && input.agent_labels !== null) {
    input.agent_labels = parseLabels(input.agent_labels, "/data/attributes/agent_labels", { selector: true });
  }
  if (typeof input.gateway_id === "string" && input.gateway_id !== "") {
    const found = await tx.one(sql`SELECT 1 FROM gateways WHERE gateway_id = ${input.gateway_id}`);
    if (!found) {
      throw new ValidationError(`gateway_id '${input.gateway_id}' does not reference a registered gateway`, {
        source: { pointer: "/data/attributes/gateway_id" },
      });
    }
  }
}

/** What a profile-managed check keeps when edited by hand (the rest follows its profile). */
const LOCAL_EDITS = new Set([
  "enabled",
  "description",
  "warning_threshold_ms",
  "critical_threshold_ms",
  "metadata",
]);

function assertEditable(before: Record<string, unknown>, input: Record<string, unknown>): void {
  if (!before.profile_id) return;
  const managed = Object.keys(input).filter((k) => !LOCAL_EDITS.has(k));
  if (managed.length > 0) {
    throw new ConflictError(
      `this check is managed by a monitoring profile: ${managed.join(", ")} follow the profile (edit the profile instead); only ${[...LOCAL_EDITS].join(", ")} may be changed here`,
      { code: "managed_by_profile", extra: { profile_id: before.profile_id, members: managed } },
    );
  }
}

export const serviceCheckResource = registerResource(
  defineResource({
    type: "service-check",
    base: "/service-checks",
    table: "service_checks",
    tag: "service-check",
    description: "Service checks run by agents on their interval (reference §8.1)",
    schemas: Object.fromEntries(
      CHECK_TYPES.map((t) => [`service-check-config-${t}`, CHECK_CONFIG_SCHEMAS[t]]),
    ),
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      name: { type: "string", required: true, update: true, nullable: false, maxLength: 255 },
      description: { type: "string", create: true, update: true, maxLength: 4000 },
      check_type: { type: "enum", values: CHECK_TYPES, required: true, nullable: false },
      target: {
        type: "string",
        required: true,
        update: true,
        nullable: false,
        maxLength: 2048,
        filterable: false,
      },
      port: { type: "integer", create: true, update: true, minimum: 0, maximum: 65535 },
      interval_seconds: {
        type: "integer",
        create: true,
        update: true,
        nullable: false,
        default: 60,
        minimum: 1,
        maximum: 86400,
        filterable: false,
      },
      timeout_seconds: {
        type: "integer",
        create: true,
        update: true,
        nullable: false,
        default: 10,
        minimum: 1,
        maximum: 300,
        filterable: false,
      },
      retries: {
        type: "integer",
        create: true,
        update: true,
        nullable: false,
        default: 3,
        minimum: 0,
        maximum: 10,
        filterable: false,
      },
      config: {
        type: "object",
        create: true,
        update: true,
        nullable: false,
        default: {},
        filterable: false,
        redact: redactCheckConfig,
        description:
          "Options of the check type, validated against components.schemas.service-check-config-<check_type>; unknown members are refused",
      },
      warning_threshold_ms: { type: "integer", create: true, update: true, minimum: 0, filterable: false },
      critical_threshold_ms: { type: "integer", create: true, update: true, minimum: 0 },
      agent_uid: {
        type: "string",
        create: true,
        update: true,
        maxLength: 255,
        description: "Run only on this agent (wins over gateway_id and agent_labels)",
      },
      agent_labels: {
        type: "object",
        create: true,
        update: true,
        filterable: false,
        description:
          'A pool: run on any connected agent whose labels contain every pair, e.g. {"site": "dc1"} (within gateway_id when both are set); null: no pool',
      },
      gateway_id: {
        type: "string",
        create: true,
        update: true,
        maxLength: 255,
        description:
          "Run behind this gateway (a site), on whichever of its agents is free; null with no agent_uid: the default placement (NETMON_UNASSIGNED_CHECKS)",
      },
      device_uid: { type: "string", create: true, maxLength: 255 },
      enabled: { type: "boolean", create: true, update: true, nullable: false, default: true },
      metadata: { type: "object", create: true, update: true, nullable: false, default: {} },
      schedule_id: { type: "uuid", create: true, update: true, filterable: false },
      last_check_at: ro("datetime"),
      last_result: ro("enum", { values: CHECK_STATUSES, filterable: false }),
      last_response_time_ms: ro("integer"),
      last_error: ro("string", { filterable: false }),
      consecutive_failures: ro("integer", { nullable: false, filterable: false }),
      created_at: ro("datetime", { filterable: false }),
      updated_at: ro("datetime", { filterable: false }),
      check_type_label: {
        type: "string",
        computed: (row) => CHECK_TYPE_LABELS[String(row.check_type)] ?? "Unknown",
      },
      next_check_at: {
        type: "datetime",
        computed: (row) => (row.enabled ? (row.next_run_at ?? row.created_at) : null),
      },
      next_run_at: ro("datetime", { public: false, filterable: false }),
      // No result for three intervals (at least interval + 2 min): the last result is stale.
      is_stale: { type: "boolean", computed: (row) => isStale(row) },
      profile_id: ro("uuid", {
        description: "The monitoring profile that manages this check (null: created by hand)",
      }),
      profile_check: ro("string", { public: false, filterable: false }),
    },
    defaultSort: "created_at",
    pagination: { styles: ["keyset", "offset"], defaultLimit: 100, maxLimit: 1000 },
    collections: [
      {
        name: "enabled",
        path: "/enabled",
        summary: "Enabled service checks",
        where: ({ col }) => sql`${col("enabled")}`,
      },
      {
        name: "failing",
        path: "/failing",
        summary:
          "Checks whose most recent result(s) were critical, unknown or error (consecutive_failures > 0) (no page)",
        paginate: false,
        maxRows: 5000,
        defaultSort: "-consecutive_failures",
        where: ({ col }) => sql`${col("consecutive_failures")} > 0`,
      },
    ],
    policies: { read: { access: { permission: "services.view" } } },
    touchColumn: "updated_at",
    actions: {
      // Deleting a check keeps its history (service_status, time series) for retention to
      // age out; its open alerts are resolved with the reason (decision 0600).
      delete: { access: { permission: "services.delete" }, summary: "Delete a service check" },
      create: {
        access: { permission: "services.create" },
        summary: "Create a service check; it first runs within one interval",
        set: (input, c) => ({
          next_run_at:
            input.enabled === false ? null : initialRunAt(c.now, Number(input.interval_seconds ?? 60)),
        }),
      },
      update: {
        access: { permission: "services.update" },
        summary: "Update a service check (check_type and device_uid are immutable)",
        set: (input, c) => {
          checkPatterns(input);
          if (input.target !== undefined) {
            const t = String(input.target ?? "");
            new TargetPolicy({
              allowLinkLocal: c.app.config.monitoring?.allowLinkLocal ?? false,
            }).validateTarget(/^[a-z]+:\/\//i.test(t) ? "http" : "tcp", t);
          }
          return input.interval_seconds !== undefined || input.enabled === true
            ? { next_run_at: initialRunAt(c.now, Number(input.interval_seconds ?? 60)) }
            : {};
        },
      },
    },
    operations: [
      {
        // "Run now": the scheduler's next tick picks the check up; its result arrives like any other.
        name: "run",
        path: "/run",
        access: { permission: "services.run" },
        summary: "Run the check now (due at once; the result arrives within a scheduler tick)",
        set: (_input, c, _actor, record) => {
          if (record?.enabled !== true) {
            throw new ConflictError("the check is disabled: enable it before running it", {
              code: "check_disabled",
            });
          }
          return { next_run_at: c.now };
        },
      },
    ],
    hooks: {
      beforeCreate: async (c, _actor, input) => {
        validateCheck(input, null, c.app.config.monitoring?.allowLinkLocal ?? false);
        await assertNameFree(
          c.tx,
          String(input.name ?? ""),
          (input.device_uid as string | undefined) ?? null,
          null,
        );
        await assertPlacementExists(c.tx, input);
        // A link to a device that does not exist would never show on any device (issue 13).
        if (typeof input.device_uid === "string" && input.device_uid !== "") {
          const found = await c.tx.one(
            sql`SELECT 1 FROM devices WHERE uid = ${input.device_uid} AND deleted_at IS NULL`,
          );
          if (!found) {
            throw new ValidationError(
              `device_uid '${input.device_uid}' does not reference an existing device`,
              {
                source: { pointer: "/data/attributes/device_uid" },
              },
            );
          }
        }
      },
      beforeUpdate: async (c, _actor, before, input) => {
        assertEditable(before, input);
        await assertPlacementExists(c.tx, input);
        if (typeof input.name === "string" && input.name !== before.name) {
          await assertNameFree(
            c.tx,
            input.name,
            (before.device_uid as string | null) ?? null,
            String(before.id),
          );
        }
        if (input.config !== undefined) {
          input.config = mergeCheckSecrets(input.config, before.config);
          validateCheckConfig(String(before.check_type), input.config);
        }
      },
      afterWrite: (_c, _actor, event) => {
        // It would be back within one reconcile pass: the profile or the device's group decides.
        if (event.action === "delete" && event.before?.profile_id) {
          throw new ConflictError(
            "this check is managed by a monitoring profile: remove the device from the profile's group, edit the profile, or disable the check",
            { code: "managed_by_profile", extra: { profile_id: event.before.profile_id } },
          );
        }
      },
      // A check that no longer runs cannot recover: its open alerts would stay pending forever.
      afterCommit: async (app, _actor, event) => {
        const id = (event.before ?? event.record)?.id;
        if (!id) return;
        if (event.action === "delete") {
          await clearAlertsFor(app, { serviceCheckId: id, resolutionNote: "service check deleted" });
        } else if (event.before?.enabled === true && event.record?.enabled === false) {
          await clearAlertsFor(app, { serviceCheckId: id, resolutionNote: "service check disabled" });
        }
      },
    },
  }),
);

export const pollJobResource = registerResource(
  defineResource({
    type: "poll-job",
    base: "/poll-jobs",
    table: "poll_jobs",
    tag: "poll-job",
    description: "Poll jobs (read-only; managed by the scheduler and the poll-job state machine)",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      schedule_id: ro("uuid", { nullable: false }),
      schedule_name: ro("string"),
      status: ro("enum", { values: POLL_JOB_STATUSES, nullable: false }),
      agent_id: ro("string"),
      gateway_id: ro("string"),
      check_count: ro("integer"),
      check_ids: ro("array", { items: "uuid" }),
      success_count: ro("integer"),
      failure_count: ro("integer"),
      priority: ro("integer"),
      retry_count: ro("integer"),
      max_retries: ro("integer"),
      timeout_seconds: ro("integer"),
      duration_ms: ro("integer"),
      dispatched_at: ro("datetime"),
      started_at: ro("datetime"),
      completed_at: ro("datetime"),
      error_code: ro("string"),
      error_message: ro("string"),
      results: ro("array", { items: "object" }),
      metadata: ro("object"),
      inserted_at: ro("datetime", { public: false }),
    },
    defaultSort: "-inserted_at",
    pagination: { styles: ["keyset", "offset"], defaultLimit: 100, maxLimit: 1000 },
    collections: [
      {
        name: "by_schedule",
        path: "/by-schedule/:schedule_id",
        summary: "Jobs of a polling schedule, newest first (no page, at most 100)",
        paginate: false,
        maxRows: 100,
        params: { schedule_id: "uuid" },
        defaultSort: "-inserted_at",
        where: ({ col, params }) => sql`${col("schedule_id")} = ${params.schedule_id}`,
      },
      {
        name: "pending",
        path: "/pending",
        summary: "Pending jobs, oldest first (no page)",
        paginate: false,
        maxRows: 1000,
        defaultSort: "inserted_at",
        where: ({ col }) => sql`${col("status")} = 'pending'`,
      },
      {
        name: "running",
        path: "/running",
        summary: "Running jobs (no page)",
        paginate: false,
        maxRows: 1000,
        where: ({ col }) => sql`${col("status")} = 'running'`,
      },
    ],
    policies: { read: { access: { permission: "services.view" } } },
    // Written only by poll-job-state.ts through the state writer; no operation here.
    stateMachine: pollJobMachine,
    actions: {},
  }),
);
