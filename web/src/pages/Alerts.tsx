import { useState } from "preact/hooks";
import { v2 } from "../api.ts";
import { DataTable, Pager } from "../components/Table.tsx";
import { Badge, Card, ErrorNote } from "../components/Ui.tsx";
import { ago, text, when } from "../format.ts";
import { useAction, usePoll, useUrlState } from "../hooks.ts";
import { useCan } from "../session.ts";

type R = Record<string, unknown>;

const VIEWS: Array<[string, string]> = [
  ["active", "Active"],
  ["pending", "Pending"],
  ["acknowledged", "Acknowledged"],
  ["resolved", "History"],
];

export function Alerts() {
  const [q, setQ] = useUrlState();
  const view = q.view ?? "active";
  const list = usePoll(
    () =>
      view === "active" || view === "pending"
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
        <DataTable
          caption={`${view} alerts`}
          rows={list.data?.rows}
          empty={view === "active" ? "No active alerts. All quiet." : "None."}
          columns={[
            { key: "title", label: "Alert", render: (r) => <a href={`/alerts/${r.id}`}>{text(r.title)}</a> },
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
      </div>
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
