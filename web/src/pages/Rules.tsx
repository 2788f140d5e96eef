import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { request, v2 } from "../api.ts";
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
      {manage && kind.key === "routes" && <QuickRoute onCreated={list.reload} />}
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
  const can = useCan();
  const manage = can("notifications.channels.manage");
  const list = usePoll(() => v2.list("notification-channels"), 30_000, []);
  const act = useAction();
  const [provider, setProvider] = useState("webhook");
  const [tested, setTested] = useState<Record<string, string>>({});
  const [open, setOpen] = useState(false);
  return (
    <>
      <ErrorNote error={list.error ?? act.error} />
      <DataTable
        caption="Notification channels"
        rows={list.data?.rows as R[] | undefined}
        empty="No channels yet. Create one, then a route that sends alerts to it."
        columns={[
          { key: "name", label: "Name" },
          { key: "provider", label: "Provider" },
          {
            key: "target",
            label: "Sends to",
            render: (r) => {
              const c = (r.config ?? {}) as Record<string, unknown>;
              return text(r.provider === "webhook" ? c.url : c.to);
            },
          },
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
          ...(manage
            ? [
                {
                  key: "actions",
                  label: "Actions",
                  render: (r: R) => (
                    <span class="row-actions">
                      <button
                        type="button"
                        class="small"
                        onClick={() =>
                          act.run(async () => {
                            const res = await request<{
                              data: { ok: boolean; status: number | null; error: string | null };
                            }>("POST", `/api/v2/notification-channels/${r.id}/test`, undefined, {
                              jsonapi: true,
                            });
                            setTested({
                              ...tested,
                              [r.id]: res.data.ok
                                ? `delivered (${res.data.status ?? "ok"})`
                                : `failed: ${res.data.error}`,
                            });
                            list.reload();
                          })
                        }
                      >
                        Send test
                      </button>
                      <button
                        type="button"
                        class="small"
                        onClick={() =>
                          act.run(async () => {
                            await v2.update(`notification-channels/${r.id}`, "notification-channel", r.id, {
                              enabled: r.enabled === false,
                            });
                            list.reload();
                          })
                        }
                      >
                        {r.enabled === false ? "Enable" : "Disable"}
                      </button>
                      <button
                        type="button"
                        class="small danger"
                        onClick={() => {
                          if (confirm(`Delete channel ${String(r.name)}? Routes stop sending to it.`))
                            void act.run(async () => {
                              await v2.remove(`notification-channels/${r.id}`);
                              list.reload();
                            });
                        }}
                      >
                        Delete
                      </button>
                      {tested[r.id] && (
                        <span class="muted" role="status">
                          {tested[r.id]}
                        </span>
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
          <summary>New channel</summary>
          <form
            class="form"
            onSubmit={async (e) => {
              e.preventDefault();
              const form = e.currentTarget;
              const f = new FormData(form);
              const get = (k: string) => String(f.get(k) ?? "").trim();
              const attrs: Record<string, unknown> = { name: get("name"), provider };
              if (provider === "webhook") {
                const config: Record<string, unknown> = { url: get("url") };
                if (get("authorization")) config.headers = { Authorization: get("authorization") };
                attrs.config = config;
                if (get("webhook_secret")) attrs.secret_refs = { webhook_secret: get("webhook_secret") };
              } else {
                const smtp: Record<string, unknown> = { host: get("smtp_host") };
                if (get("smtp_port")) smtp.port = Number(get("smtp_port"));
                attrs.config = {
                  to: get("to")
                    .split(/[\s,]+/)
                    .filter(Boolean),
                  from: get("from") || undefined,
                  smtp,
                };
                if (get("smtp_user"))
                  attrs.secret_refs = { smtp_user: get("smtp_user"), smtp_password: get("smtp_password") };
              }
              const saved = await act.run(() =>
                v2.create("notification-channels", "notification-channel", attrs),
              );
              if (saved) {
                form.reset();
                setOpen(false);
                list.reload();
              }
            }}
          >
            <Field label="Name" name="name" error={act.error}>
              <input id="f-name" name="name" required />
            </Field>
            <Field label="Provider" name="provider" error={act.error}>
              <select id="f-provider" value={provider} onChange={(e) => setProvider(e.currentTarget.value)}>
                <option value="webhook">Webhook</option>
                <option value="email">Email</option>
              </select>
            </Field>
            {provider === "webhook" ? (
              <>
                <Field label="URL" name="config" error={act.error}>
                  <input
                    id="f-config"
                    name="url"
                    type="url"
                    required
                    placeholder="https://hooks.example.net/netmon"
                  />
                </Field>
                <Field
                  label="Authorization header"
                  name="authorization"
                  error={act.error}
                  hint="Optional; write-only"
                >
                  <input id="f-authorization" name="authorization" autoComplete="off" />
                </Field>
                <Field
                  label="Signing secret"
                  name="secret_refs"
                  error={act.error}
                  hint="Optional: signs each body (x-netmon-signature)"
                >
                  <input
                    id="f-secret_refs"
                    name="webhook_secret"
                    type="password"
                    autoComplete="new-password"
                  />
                </Field>
              </>
            ) : (
              <>
                <Field label="To" name="config" error={act.error} hint="One or more addresses">
                  <input id="f-config" name="to" required />
                </Field>
                <Field label="From" name="from" error={act.error}>
                  <input id="f-from" name="from" placeholder="netmon@example.net" />
                </Field>
                <Field label="SMTP host" name="smtp_host" error={act.error}>
                  <input id="f-smtp_host" name="smtp_host" required />
                </Field>
                <Field label="SMTP port" name="smtp_port" error={act.error}>
                  <input id="f-smtp_port" name="smtp_port" inputMode="numeric" placeholder="25" />
                </Field>
                <Field label="SMTP user" name="smtp_user" error={act.error}>
                  <input id="f-smtp_user" name="smtp_user" autoComplete="off" />
                </Field>
                <Field label="SMTP password" name="smtp_password" error={act.error}>
                  <input
                    id="f-smtp_password"
                    name="smtp_password"
                    type="password"
                    autoComplete="new-password"
                  />
                </Field>
              </>
            )}
            <button type="submit" class="primary" disabled={act.busy}>
              Create channel
            </button>
          </form>
        </details>
      )}
    </>
  );
}

/** "Alerts of severity ≥ X → channels", one call (POST /api/v2/notification-routes/quick). */
function QuickRoute(props: { onCreated: () => void }) {
  const channels = usePoll(() => v2.list("notification-channels"), 0, []);
  const act = useAction();
  const [open, setOpen] = useState(false);
  return (
    <details class="inline-form" open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>Send alerts to a channel</summary>
      <form
        class="form"
        onSubmit={async (e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const f = new FormData(form);
          const attrs: Record<string, unknown> = {
            name: String(f.get("name") ?? "").trim(),
            channel_ids: f.getAll("channel_ids").map(String),
            min_severity: String(f.get("min_severity") ?? "warning"),
          };
          const repeat = String(f.get("repeat") ?? "");
          if (repeat) attrs.repeat_interval_seconds = Number(repeat);
          const saved = await act.run(() =>
            request(
              "POST",
              "/api/v2/notification-routes/quick",
              { data: { type: "notification-route", attributes: attrs } },
              { jsonapi: true },
            ),
          );
          if (saved) {
            form.reset();
            setOpen(false);
            props.onCreated();
          }
        }}
      >
        <ErrorNote error={act.error} />
        <Field label="Name" name="name" error={act.error}>
          <input id="f-qname" name="name" required placeholder="critical to on-call" />
        </Field>
        <Field label="Alerts of severity at least" name="min_severity" error={act.error}>
          <select id="f-min_severity" name="min_severity" defaultValue="warning">
            <option value="info">info</option>
            <option value="warning">warning</option>
            <option value="critical">critical</option>
          </select>
        </Field>
        <fieldset>
          <legend>Send to</legend>
          {(channels.data?.rows ?? []).length === 0 && (
            <p class="muted">Create a channel first (Channels tab).</p>
          )}
          {(channels.data?.rows ?? []).map((c) => (
            <label key={c.id} class="check">
              <input type="checkbox" name="channel_ids" value={c.id} /> {String(c.name)}
            </label>
          ))}
        </fieldset>
        <Field
          label="Repeat"
          name="repeat_interval_seconds"
          error={act.error}
          hint="Until acknowledged or resolved"
        >
          <select id="f-repeat_interval_seconds" name="repeat">
            <option value="">never</option>
            <option value="300">every 5 minutes</option>
            <option value="1800">every 30 minutes</option>
            <option value="3600">every hour</option>
          </select>
        </Field>
        <button type="submit" class="primary" disabled={act.busy}>
          Create route
        </button>
      </form>
    </details>
  );
}
