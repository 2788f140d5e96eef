import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { v2 } from "../api.ts";
import { DataTable } from "../components/Table.tsx";
import { Badge, ErrorNote, Field } from "../components/Ui.tsx";
import { ago, text } from "../format.ts";
import { useAction, usePoll, useUrlState } from "../hooks.ts";
import { useCan } from "../session.ts";

type R = Record<string, unknown> & { id: string };

interface Kind {
  key: string;
  label: string;
  path: string;
  type: string;
  managePermission: string;
  /** Fields of the create form; "json" fields are objects typed as JSON. */
  fields: Array<{
    name: string;
    label: string;
    kind?: "json" | "number" | "select";
    options?: string[];
    hint?: string;
    required?: boolean;
  }>;
  columns: Array<{ key: string; label: string; render?: (r: R) => ComponentChildren }>;
  toggle?: "enabled";
  deletable?: boolean;
}

const KINDS: Kind[] = [
  {
    key: "stateful",
    label: "Stateful alert rules",
    path: "stateful-alert-rules",
    type: "stateful-alert-rule",
    managePermission: "observability.rules.update",
    toggle: "enabled",
    deletable: true,
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "signal", label: "Signal", kind: "select", options: ["log", "event"] },
      { name: "match", label: "Match (JSON)", kind: "json", hint: '{"severity_text": "ERROR"}' },
      { name: "group_by", label: "Group by (JSON list)", kind: "json", hint: '["host"]' },
      { name: "threshold", label: "Threshold (count)", kind: "number" },
      { name: "window_seconds", label: "Window (s)", kind: "number" },
    ],
    columns: [
      { key: "signal", label: "Signal" },
      { key: "threshold", label: "Threshold" },
      { key: "window_seconds", label: "Window (s)" },
    ],
  },
  {
    key: "event",
    label: "Event rules",
    path: "event-rules",
    type: "event-rule",
    managePermission: "observability.rules.update",
    toggle: "enabled",
    deletable: true,
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "source_type", label: "Source", kind: "select", options: ["log", "metric"] },
      { name: "match", label: "Match (JSON)", kind: "json", hint: '{"body_contains": "link down"}' },
    ],
    columns: [
      { key: "source_type", label: "Source" },
      { key: "priority", label: "Priority" },
    ],
  },
  {
    key: "policies",
    label: "Escalation policies",
    path: "notification-escalation-policies",
    type: "notification-escalation-policy",
    managePermission: "notifications.routes.manage",
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "repeat_count", label: "Repeat count", kind: "number" },
      { name: "repeat_interval_seconds", label: "Repeat every (s)", kind: "number" },
    ],
    columns: [
      { key: "repeat_count", label: "Repeats" },
      { key: "repeat_interval_seconds", label: "Every (s)" },
    ],
  },
  {
    key: "routes",
    label: "Routes",
    path: "notification-routes",
    type: "notification-route",
    managePermission: "notifications.routes.manage",
    toggle: "enabled",
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "escalation_policy_id", label: "Escalation policy id", required: true },
      {
        name: "match_expression",
        label: "Match (JSON)",
        kind: "json",
        hint: '{"field": "alert.severity", "op": "eq", "value": "critical"}',
      },
      { name: "priority", label: "Priority", kind: "number" },
    ],
    columns: [
      { key: "priority", label: "Priority" },
      { key: "escalation_policy_id", label: "Policy" },
    ],
  },
];

export function Rules() {
  const [q, setQ] = useUrlState();
  const tab = q.tab ?? "stateful";
  const kind = KINDS.find((k) => k.key === tab);
  return (
    <>
      <h1>Rules and notifications</h1>
      <div class="tabs" role="tablist" aria-label="Rule kinds">
        {[...KINDS.map((k) => [k.key, k.label] as const), ["channels", "Channels"] as const].map(
          ([k, label]) => (
            <button
              key={k}
              type="button"
              role="tab"
              aria-selected={tab === k}
              onClick={() => setQ({ tab: k })}
            >
              {label}
            </button>
          ),
        )}
      </div>
      <div role="tabpanel">{kind ? <KindPanel key={kind.key} kind={kind} /> : <Channels />}</div>
    </>
  );
}

function KindPanel(props: { kind: Kind }) {
  const { kind } = props;
  const can = useCan();
  const list = usePoll(() => v2.list(kind.path, { "page[limit]": "200" }), 30_000, [kind.path]);
  const act = useAction();
  const [open, setOpen] = useState(false);
  const manage = can(kind.managePermission);
  return (
    <>
      <ErrorNote error={list.error ?? act.error} />
      <DataTable
        caption={kind.label}
        rows={list.data?.rows as R[] | undefined}
        empty={`No ${kind.label.toLowerCase()} yet.`}
        columns={[
          { key: "name", label: "Name", render: (r) => text(r.name) },
          ...kind.columns.map((c) => ({ ...c, render: c.render ?? ((r: R) => text(r[c.key])) })),
          {
            key: "enabled",
            label: "State",
            render: (r) => (
              <Badge
                value={r.enabled === false ? "disabled" : "ok"}
                label={r.enabled === false ? "disabled" : "enabled"}
              />
            ),
          },
          ...(manage && kind.toggle
            ? [
                {
                  key: "toggle",
                  label: "Actions",
                  render: (r: R) => (
                    <span class="row-actions">
                      <button
                        type="button"
                        class="small"
                        onClick={() =>
                          act.run(async () => {
                            await v2.update(`${kind.path}/${r.id}`, kind.type, r.id, {
                              enabled: r.enabled === false,
                            });
                            list.reload();
                          })
                        }
                      >
                        {r.enabled === false ? "Enable" : "Disable"}
                      </button>
                      {kind.deletable && (
                        <button
                          type="button"
                          class="small danger"
                          onClick={() => {
                            if (confirm(`Delete ${String(r.name)}?`))
                              void act.run(async () => {
                                await v2.remove(`${kind.path}/${r.id}`);
                                list.reload();
                              });
                          }}
                        >
                          Delete
                        </button>
                      )}
                    </span>
                  ),
                },
              ]
            : []),
        ]}
      />
      {manage && (
        <details class="inline-form" open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
          <summary>New {kind.label.replace(/s$/, "").toLowerCase()}</summary>
          <form
            class="form"
            onSubmit={async (e) => {
              e.preventDefault();
              const form = e.currentTarget;
              const f = new FormData(form);
              const attrs: Record<string, unknown> = {};
              try {
                for (const fld of kind.fields) {
                  const raw = String(f.get(fld.name) ?? "").trim();
                  if (raw === "") continue;
                  attrs[fld.name] =
                    fld.kind === "json" ? JSON.parse(raw) : fld.kind === "number" ? Number(raw) : raw;
                }
              } catch (err) {
                await act.run(() => Promise.reject(new Error(`Not valid JSON: ${String(err)}`)));
                return;
              }
              const saved = await act.run(() => v2.create(kind.path, kind.type, attrs));
              if (saved) {
                form.reset();
                setOpen(false);
                list.reload();
              }
            }}
          >
            {kind.fields.map((fld) => (
              <Field key={fld.name} label={fld.label} name={fld.name} error={act.error} hint={fld.hint}>
                {fld.kind === "select" ? (
                  <select id={`f-${fld.name}`} name={fld.name}>
                    {fld.options?.map((o) => (
                      <option key={o}>{o}</option>
                    ))}
                  </select>
                ) : fld.kind === "json" ? (
                  <textarea id={`f-${fld.name}`} name={fld.name} rows={2} placeholder={fld.hint} />
                ) : (
                  <input
                    id={`f-${fld.name}`}
                    name={fld.name}
                    inputMode={fld.kind === "number" ? "numeric" : undefined}
                    required={fld.required}
                  />
                )}
              </Field>
            ))}
            <button type="submit" class="primary" disabled={act.busy}>
              Create
            </button>
          </form>
        </details>
      )}
    </>
  );
}

function Channels() {
  const list = usePoll(() => v2.list("notification-channels"), 30_000, []);
  return (
    <>
      <ErrorNote error={list.error} />
      <DataTable
        caption="Notification channels"
        rows={list.data?.rows as R[] | undefined}
        empty="No channels yet."
        columns={[
          { key: "name", label: "Name" },
          { key: "provider", label: "Provider" },
          { key: "enabled", label: "Enabled", render: (r) => (r.enabled ? "yes" : "no") },
          {
            key: "health",
            label: "Delivery",
            render: (r) => (
              <Badge
                value={r.health === "failing" ? "critical" : r.health === "healthy" ? "ok" : String(r.health)}
                label={String(r.health)}
              />
            ),
          },
          { key: "last_success_at", label: "Last delivered", render: (r) => ago(r.last_success_at) },
          { key: "last_error", label: "Last error", render: (r) => text(r.last_error) },
        ]}
      />
      <p class="muted">
        Channels hold credentials and are created with the CLI:{" "}
        <code>netmon notifications channel create --name NAME --provider webhook --url URL</code>.
      </p>
    </>
  );
}
