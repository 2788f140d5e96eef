/**
 * Silences and maintenance windows (issue 13): a match expression over `alert.*`/`device.*`,
 * a start and an end, who and why. While one is active, matching alerts still open, escalate
 * and resolve, but their notifications are recorded as `suppressed` (reason `silenced:<id>`)
 * instead of sent — as Alertmanager does. A window that starts later is a maintenance window.
 */
import { defineResource } from "../../jsonapi/define.ts";
import { registerResource } from "../../jsonapi/registry.ts";
import { ValidationError } from "../../kernel/errors.ts";
import { validateMatchExpression } from "../notifications/match-expression.ts";

const VIEW = { permission: "observability.alerts.view" } as const;
const MANAGE = { permission: "observability.alerts.manage" } as const;
const MAX_SPAN_MS = 366 * 86_400_000;

function checkMatchers(m: unknown): void {
  validateMatchExpression(m, "/data/attributes/matchers");
  if (m && typeof m === "object" && Object.keys(m).length === 0) {
    throw new ValidationError(
      "a silence needs at least one matcher (an empty one would silence everything)",
      {
        source: { pointer: "/data/attributes/matchers" },
      },
    );
  }
}

function checkSpan(starts: unknown, ends: unknown): void {
  const s = starts instanceof Date ? starts.getTime() : Date.parse(String(starts));
  const e = ends instanceof Date ? ends.getTime() : Date.parse(String(ends));
  if (!(e > s)) {
    throw new ValidationError("ends_at must be after starts_at", {
      source: { pointer: "/data/attributes/ends_at" },
    });
  }
  if (e - s > MAX_SPAN_MS) {
    throw new ValidationError("a silence lasts at most a year", {
      source: { pointer: "/data/attributes/ends_at" },
    });
  }
}

export function silenceState(row: { starts_at?: unknown; ends_at?: unknown }, now = Date.now()): string {
  const s = Date.parse(String(row.starts_at instanceof Date ? row.starts_at.toISOString() : row.starts_at));
  const e = Date.parse(String(row.ends_at instanceof Date ? row.ends_at.toISOString() : row.ends_at));
  if (now < s) return "pending";
  return now < e ? "active" : "expired";
}

export const alertSilenceResource = registerResource(
  defineResource({
    type: "alert-silence",
    base: "/alert-silences",
    table: "alert_silences",
    tag: "alert-silence",
    description:
      "Silences and maintenance windows: notifications of matching alerts are recorded as suppressed between starts_at and ends_at",
    id: { column: "id", type: "uuid", generate: "db" },
    attributes: {
      matchers: { type: "object", required: true, update: true, nullable: false, filterable: false },
      starts_at: { type: "datetime", create: true, update: true, nullable: false },
      ends_at: { type: "datetime", required: true, update: true, nullable: false },
      comment: { type: "string", required: true, update: true, nullable: false, maxLength: 2000 },
      created_by: { type: "string" },
      state: {
        type: "string",
        values: ["pending", "active", "expired"],
        computed: (row) => silenceState(row),
      },
      inserted_at: { type: "datetime", nullable: false },
      updated_at: { type: "datetime", nullable: false },
    },
    defaultSort: "-ends_at",
    policies: { read: { access: VIEW } },
    touchColumn: "updated_at",
    actions: {
      create: {
        access: MANAGE,
        summary: "Create a silence or maintenance window",
        set: (input, c, actor) => {
          checkMatchers(input.matchers);
          checkSpan(input.starts_at ?? c.now, input.ends_at);
          return { created_by: actor.email ?? actor.id, ...(input.starts_at ? {} : { starts_at: c.now }) };
        },
      },
      update: {
        access: MANAGE,
        summary: "Change a silence (matchers, times, comment)",
      },
      delete: { access: MANAGE, summary: "Delete a silence (its suppressed deliveries stay in the log)" },
    },
    operations: [
      {
        name: "expire",
        path: "/expire",
        access: MANAGE,
        summary: "End a silence now",
        set: (_input, c, _actor, record) => {
          const ends = Date.parse(String(record?.ends_at));
          return Number.isFinite(ends) && ends <= c.now.getTime() ? {} : { ends_at: c.now };
        },
      },
    ],
    hooks: {
      beforeUpdate: (_c, _actor, before, input) => {
        if (input.matchers !== undefined) checkMatchers(input.matchers);
        checkSpan(input.starts_at ?? before.starts_at, input.ends_at ?? before.ends_at);
      },
    },
  }),
);
