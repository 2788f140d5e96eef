import { useState } from "preact/hooks";
import { v2 } from "../api.ts";
import { DataTable, Pager } from "../components/Table.tsx";
import { Badge, Card, ErrorNote, Field } from "../components/Ui.tsx";
import { ago, text, when } from "../format.ts";
import { useAction, usePoll, useUrlState } from "../hooks.ts";
import { useCan } from "../session.ts";

type R = Record<string, unknown>;

const VIEWS: Array<[string, string]> = [
  ["active", "Active"],
  ["pending", "Pending"],
  ["acknowledged", "Acknowledged"],
  ["resolved", "History"],
  ["silences", "Silences"],
];

const DURATIONS: Array<[string, number]> = [
  ["1 hour", 3600],
  ["4 hours", 4 * 3600],
  ["1 day", 86400],
  ["1 week", 7 * 86400],
];

/** The matchers that silence alerts like this one: its check, else its device, else its title. */
function matchersFor(a: R): R {
  if (a.service_check_id) return { "alert.service_check_id": a.service_check_id };
  if (a.device_uid) return { "alert.device_uid": a.device_uid };
  return { "alert.title": a.title };
}

function Silences() {
  const can = useCan();
  const list = usePoll(
    () => v2.list("alert-silences", { sort: "-ends_at", "page[limit]": "100" }),
    15_000,
    [],
  );
  const groups = usePoll(() => v2.list("device-groups", { sort: "name", "page[limit]": "200" }), 60_000, []);
  const act = useAction();
  const [open, setOpen] = useState(false);
  return (
    <>
      <p class="muted">
        While a silence is active, matching alerts still open and resolve, but their notifications are
        recorded as suppressed instead of sent. A silence that starts later is a maintenance window.
      </p>
      <ErrorNote error={list.error ?? act.error} />
      <DataTable
        caption="Silences"
        rows={list.data?.rows}
        empty="No silences."
        columns={[
          { key: "comment", label: "Why" },
          { key: "matchers", label: "Matches", render: (r) => <code>{JSON.stringify(r.matchers)}</code> },
          {
            key: "state",
            label: "State",
            render: (r) => (
              <Badge
                value={r.state === "active" ? "warning" : r.state === "pending" ? "info" : "resolved"}
                label={String(r.state)}
              />
            ),
          },
          { key: "starts_at", label: "From", render: (r) => when(r.starts_at) },
          { key: "ends_at", label: "Until", render: (r) => when(r.ends_at) },
          { key: "created_by", label: "By" },
          {
            key: "actions",
            label: "Actions",
            render: (r) =>
              r.state !== "expired" && can("observability.alerts.manage") ? (
                <button
                  type="button"
                  class="small"
                  onClick={() =>
                    act.run(async () => {
                      await v2.update(`alert-silences/${r.id}/expire`, "alert-silence", r.id);
                      list.reload();
                    })
                  }
                >
                  End now
                </button>
              ) : null,
          },
        ]}
      />
      {can("observability.alerts.manage") && (
        <details class="inline-form" open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
          <summary>New silence or maintenance window</summary>
          <form
            class="form"
            onSubmit={async (e) => {
              e.preventDefault();
              const form = e.currentTarget;
              const f = new FormData(form);
              const get = (k: string) => String(f.get(k) ?? "").trim();
              const preds: R[] = [];
              if (get("title")) preds.push({ field: "alert.title", contains: get("title") });
              if (get("severity")) preds.push({ field: "alert.severity", equals: get("severity") });
              if (get("device_uid")) preds.push({ field: "alert.device_uid", equals: get("device_uid") });
              if (get("check_id")) preds.push({ field: "alert.service_check_id", equals: get("check_id") });
              if (get("group_id")) preds.push({ field: "device.group_id", equals: get("group_id") });
              const starts = get("starts_at") ? new Date(get("starts_at")) : new Date();
              const ends = new Date(starts.getTime() + Number(get("duration")) * 1000);
              const saved = await act.run(() =>
                v2.create("alert-silences", "alert-silence", {
                  matchers: preds.length === 1 ? preds[0] : preds.length > 1 ? { all: preds } : {},
                  starts_at: starts.toISOString(),
                  ends_at: ends.toISOString(),
                  comment: get("comment"),
                }),
              );
              if (saved) {
                form.reset();
                setOpen(false);
                list.reload();
              }
            }}
          >
            <ErrorNote error={act.error} />
            <p class="muted small">Fill in at least one matcher; all of them must match.</p>
            <Field label="Title contains" name="title" error={act.error}>
              <input id="f-title" name="title" />
            </Field>
            <Field label="Severity" name="severity" error={act.error}>
              <select id="f-severity" name="severity">
                <option value="">any</option>
                <option>info</option>
                <option>warning</option>
                <option>critical</option>
              </select>
            </Field>
            <Field label="Device uid" name="device_uid" error={act.error}>
              <input id="f-device_uid" name="device_uid" />
            </Field>
            <Field label="Check id" name="check_id" error={act.error}>
              <input id="f-check_id" name="check_id" />
            </Field>
            <Field label="Device group" name="group_id" error={act.error} hint="Every device in the group">
              <select id="f-group_id" name="group_id">
                <option value="">any</option>
                {(groups.data?.rows ?? []).map((g) => (
                  <option key={g.id} value={g.id}>
                    {text(g.name)}
                  </option>
                ))}
              </select>
            </Field>
            <Field
              label="Starts"
              name="starts_at"
              error={act.error}
              hint="Empty: now. Later: a maintenance window"
            >
              <input id="f-starts_at" name="starts_at" type="datetime-local" />
            </Field>
            <Field label="For" name="ends_at" error={act.error}>
              <select id="f-ends_at" name="duration">
                {DURATIONS.map(([label, s]) => (
                  <option key={s} value={String(s)}>
                    {label}
                  </option>
                ))}
              </select>
            </Field>
            <Field label="Why" name="comment" error={act.error}>
              <input id="f-comment" name="comment" required placeholder="core switch firmware upgrade" />
            </Field>
            <button type="submit" class="primary" disabled={act.busy}>
              Create silence
            </button>
          </form>
        </details>
      )}
    </>
  );
}

export function Alerts() {
  const [q, setQ] = useUrlState();
  const view = q.view ?? "active";
  const list = usePoll(
    () =>
      view === "silences"
        ? Promise.resolve({ rows: [] as R[] } as { rows: R[]; next?: string; prev?: string })
        : view === "active" || view === "pending"
          ? v2.list(`alerts/${view}`, { sort: "-triggered_at" })
          : v2.list("alerts", {
              "filter[status][eq]": view,
              sort: view === "resolved" ? "-resolved_at" : "-triggered_at",
              "page[limit]": "50",
              "page[after]": q.after,
              "page[before]": q.before,
            }),
    10_000,
    [view, q.after, q.before],
  );
  return (
    <>
      <h1>Alerts</h1>
      <div class="tabs" role="tablist" aria-label="Alert views">
        {VIEWS.map(([v, label]) => (
          <button
            key={v}
            type="button"
            role="tab"
            aria-selected={view === v}
            onClick={() =>
              setQ({ view: v === "active" ? undefined : v, after: undefined, before: undefined })
            }
          >
            {label}
          </button>
        ))}
      </div>
      <ErrorNote error={list.error} />
      <div role="tabpanel">
        {view === "silences" ? (
          <Silences />
        ) : (
          <>
            <DataTable
              caption={`${view} alerts`}
              rows={list.data?.rows}
              empty={view === "active" ? "No active alerts. All quiet." : "None."}
              columns={[
                {
                  key: "title",
                  label: "Alert",
                  render: (r) => <a href={`/alerts/${r.id}`}>{text(r.title)}</a>,
                },
                { key: "severity", label: "Severity", render: (r) => <Badge value={r.severity} /> },
                { key: "status", label: "Status", render: (r) => <Badge value={r.status} /> },
                { key: "source_type", label: "Source" },
                { key: "triggered_at", label: "Triggered", render: (r) => ago(r.triggered_at) },
                {
                  key: "who",
                  label: "By",
                  render: (r) => text(r.resolved_by ?? r.acknowledged_by),
                },
              ]}
            />
            {(view === "acknowledged" || view === "resolved") && (
              <Pager
                prev={list.data?.prev}
                next={list.data?.next}
                onPage={(c, dir) =>
                  setQ(dir === "next" ? { after: c, before: undefined } : { before: c, after: undefined })
                }
              />
            )}
          </>
        )}
      </div>
    </>
  );
}

export function AlertDetail(props: { params?: { id?: string } }) {
  const id = props.params?.id ?? "";
  const can = useCan();
  const alert = usePoll(() => v2.get(`alerts/${encodeURIComponent(id)}`), 10_000, [id]);
  const act = useAction();
  const [note, setNote] = useState("");
  const [silenced, setSilenced] = useState(false);
  const canSeeDeliveries = can("notifications.channels.view");
  const deliveries = usePoll(
    () =>
      canSeeDeliveries
        ? v2.list("notification-deliveries", { "filter[alert_id][eq]": id, "page[limit]": "50" })
        : Promise.resolve(undefined),
    10_000,
    [id, canSeeDeliveries],
  );
  const a = alert.data;
  if (alert.error) return <ErrorNote error={alert.error} />;
  if (!a) return <p class="muted">Loading…</p>;
  const status = String(a.status);
  const canAck = can("alerts.acknowledge") && (status === "pending" || status === "escalated");
  const canResolve = can("alerts.acknowledge") && status !== "resolved";
  const apply = (op: "acknowledge" | "resolve") =>
    act.run(async () => {
      const attrs: R =
        op === "acknowledge" ? { note: note || undefined } : { resolution_note: note || undefined };
      await v2.update(`alerts/${id}/${op}`, "alert", id, attrs);
      setNote("");
      alert.reload();
    });
  return (
    <>
      <div class="page-head">
        <h1>{text(a.title)}</h1>
        <Badge value={a.severity} />
        <Badge value={a.status} />
        <div class="spacer" />
        {can("observability.alerts.manage") && status !== "resolved" && (
          <button
            type="button"
            disabled={act.busy}
            onClick={() =>
              act.run(async () => {
                await v2.create("alert-silences", "alert-silence", {
                  matchers: matchersFor(a),
                  ends_at: new Date(Date.now() + 3600_000).toISOString(),
                  comment: note || `silenced from alert “${String(a.title)}”`,
                });
                setSilenced(true);
              })
            }
          >
            Silence for 1 hour
          </button>
        )}
      </div>
      {silenced && (
        <p class="banner ok" role="status">
          Silenced for an hour: notifications of alerts like this one are recorded but not sent.{" "}
          <a href="/alerts?view=silences">Silences</a>
        </p>
      )}
      <ErrorNote error={act.error} />
      <div class="grid">
        <Card title="Details">
          <p>{text(a.description)}</p>
          <dl class="kv">
            <dt>Source</dt>
            <dd>
              {text(a.source_type)} {a.source_id ? `(${text(a.source_id)})` : ""}
            </dd>
            {a.service_check_id ? (
              <>
                <dt>Check</dt>
                <dd>
                  <a href={`/checks/${a.service_check_id}`}>{text(a.service_check_id)}</a>
                </dd>
              </>
            ) : null}
            {a.device_uid ? (
              <>
                <dt>Device</dt>
                <dd>
                  <a href={`/devices/${encodeURIComponent(String(a.device_uid))}`}>{text(a.device_uid)}</a>
                </dd>
              </>
            ) : null}
            <dt>Metric</dt>
            <dd>
              {text(a.metric_name)} {a.metric_value != null ? `= ${text(a.metric_value)}` : ""}
            </dd>
            <dt>Notifications sent</dt>
            <dd>{text(a.notification_count)}</dd>
          </dl>
        </Card>
        <Card title="Timeline">
          <ol class="timeline">
            <li>
              <strong>Triggered</strong> {when(a.triggered_at)}
            </li>
            {a.escalated_at ? (
              <li>
                <strong>Escalated</strong> to level {text(a.escalation_level)} {when(a.escalated_at)} —{" "}
                {text(a.escalation_reason)}
              </li>
            ) : null}
            {a.acknowledged_at ? (
              <li>
                <strong>Acknowledged</strong> by {text(a.acknowledged_by)} {when(a.acknowledged_at)}
              </li>
            ) : null}
            {a.resolved_at ? (
              <li>
                <strong>Resolved</strong> by {text(a.resolved_by)} {when(a.resolved_at)}
                {a.resolution_note ? ` — “${text(a.resolution_note)}”` : ""}
              </li>
            ) : null}
          </ol>
        </Card>
        {canSeeDeliveries && (
          <Card title="Notifications" wide>
            <DataTable
              caption="Delivery log of this alert"
              rows={deliveries.data?.rows}
              empty="No notification was due: no enabled route matches this alert."
              columns={[
                { key: "inserted_at", label: "Queued", render: (r) => when(r.inserted_at) },
                { key: "lifecycle_reason", label: "Why" },
                {
                  key: "status",
                  label: "Status",
                  render: (r) => (
                    <Badge
                      value={
                        r.status === "sent" ? "ok" : r.status === "failed" ? "critical" : String(r.status)
                      }
                      label={String(r.status)}
                    />
                  ),
                },
                { key: "attempts", label: "Attempts", numeric: true },
                { key: "response_status", label: "HTTP", numeric: true },
                {
                  key: "last_error",
                  label: "Error",
                  render: (r) => text(r.last_error ?? r.suppression_reason),
                },
                {
                  key: "next_attempt_at",
                  label: "Next retry",
                  render: (r) => (r.next_attempt_at ? ago(r.next_attempt_at) : "—"),
                },
              ]}
            />
          </Card>
        )}
        {(canAck || canResolve) && (
          <Card title="Respond">
            <label for="alert-note">Note</label>
            <textarea id="alert-note" rows={3} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
            <div class="actions">
              {canAck && (
                <button type="button" disabled={act.busy} onClick={() => void apply("acknowledge")}>
                  Acknowledge
                </button>
              )}
              {canResolve && (
                <button
                  type="button"
                  class="primary"
                  disabled={act.busy}
                  onClick={() => void apply("resolve")}
                >
                  Resolve
                </button>
              )}
            </div>
          </Card>
        )}
      </div>
    </>
  );
}
