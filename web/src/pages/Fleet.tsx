import { useState } from "preact/hooks";
import { v2 } from "../api.ts";
import { DataTable } from "../components/Table.tsx";
import { Badge, Confirm, ErrorNote, Field } from "../components/Ui.tsx";
import { ago, labelsText, parseLabelsText, text } from "../format.ts";
import { useAction, usePoll } from "../hooks.ts";
import { useCan } from "../session.ts";

type R = Record<string, unknown> & { id: string };

/** Gateway operations the console offers, by the states they apply from (the server checks again). */
const GATEWAY_OPS: Array<{
  op: string;
  label: string;
  from: string[];
  danger?: boolean;
  permission: string;
}> = [
  { op: "activate", label: "Activate", from: ["inactive"], permission: "infrastructure.manage" },
  {
    op: "deactivate",
    label: "Deactivate",
    from: ["healthy", "degraded", "offline", "recovering", "maintenance", "draining"],
    danger: true,
    permission: "infrastructure.manage",
  },
  {
    op: "maintenance/start",
    label: "Start maintenance",
    from: ["healthy", "degraded"],
    permission: "infrastructure.manage",
  },
  {
    op: "maintenance/end",
    label: "End maintenance",
    from: ["maintenance"],
    permission: "infrastructure.manage",
  },
  {
    op: "drain/start",
    label: "Drain",
    from: ["healthy", "degraded"],
    danger: true,
    permission: "infrastructure.manage",
  },
];

export function Fleet() {
  const gateways = usePoll(() => v2.list("gateways", { "page[limit]": "200" }), 10_000, []);
  const agents = usePoll(() => v2.list("agents", { "page[limit]": "500" }), 10_000, []);
  const can = useCan();
  const act = useAction();
  const [pending, setPending] = useState<{ id: string; op: string; label: string } | null>(null);
  return (
    <>
      <h1>Gateways and agents</h1>
      <ErrorNote error={act.error ?? gateways.error ?? agents.error} />
      <Confirm
        open={pending !== null}
        title={pending ? `${pending.label} gateway ${pending.id}?` : ""}
        confirmLabel={pending?.label ?? "OK"}
        danger
        onCancel={() => setPending(null)}
        onConfirm={() => {
          const p = pending;
          setPending(null);
          if (p)
            void act.run(async () => {
              await v2.update(`gateways/${encodeURIComponent(p.id)}/${p.op}`, "gateway", p.id);
              gateways.reload();
            });
        }}
      >
        <p>Its agents' checks move to other gateways' agents only if they are not pinned.</p>
      </Confirm>
      <h2>Gateways</h2>
      <DataTable
        caption="Gateways"
        rows={gateways.data?.rows as R[] | undefined}
        empty="No gateways registered."
        columns={[
          { key: "id", label: "Gateway" },
          { key: "status", label: "State", render: (r) => <Badge value={r.status} /> },
          { key: "last_seen", label: "Last heartbeat", render: (r) => ago(r.last_seen) },
          { key: "agent_count", label: "Agents", numeric: true },
          {
            key: "created_by",
            label: "Registered by",
            render: (r) => text(r.created_by ?? r.registration_source),
          },
          {
            key: "ops",
            label: "Actions",
            render: (r) => (
              <span class="row-actions">
                {GATEWAY_OPS.filter((o) => o.from.includes(String(r.status)) && can(o.permission)).map(
                  (o) => (
                    <button
                      key={o.op}
                      type="button"
                      class={o.danger ? "danger small" : "small"}
                      onClick={() => setPending({ id: r.id, op: o.op, label: o.label })}
                    >
                      {o.label}
                    </button>
                  ),
                )}
              </span>
            ),
          },
        ]}
      />
      <h2>Agents</h2>
      <DataTable
        caption="Agents"
        rows={agents.data?.rows as R[] | undefined}
        empty="No agents connected."
        columns={[
          { key: "name", label: "Agent", render: (r) => text(r.name ?? r.id) },
          { key: "status", label: "State", render: (r) => <Badge value={r.status} /> },
          { key: "gateway_id", label: "Gateway" },
          { key: "host", label: "Host" },
          { key: "version", label: "Version" },
          { key: "last_seen_time", label: "Last heartbeat", render: (r) => ago(r.last_seen_time) },
          { key: "capabilities", label: "Capabilities", render: (r) => text(r.capabilities) },
          { key: "labels", label: "Labels (pools)", render: (r) => labelsText(r.labels) || "—" },
          {
            key: "checks",
            label: "Checks",
            render: (r) => <a href={`/checks?agent=${encodeURIComponent(r.id)}`}>checks</a>,
          },
        ]}
      />
      {can("infrastructure.manage") && (agents.data?.rows.length ?? 0) > 0 && (
        <details class="inline-form">
          <summary>Label an agent</summary>
          <form
            class="form"
            onSubmit={async (e) => {
              e.preventDefault();
              const f = new FormData(e.currentTarget);
              const id = String(f.get("agent") ?? "");
              const labels = parseLabelsText(String(f.get("labels") ?? "")) ?? {};
              const saved = await act.run(() =>
                v2.update(`agents/${encodeURIComponent(id)}`, "agent", id, { labels }),
              );
              if (saved) agents.reload();
            }}
          >
            <p class="muted small">
              Checks and monitoring profiles with an agent pool (e.g. <code>site=dc1</code>) run on agents
              whose labels contain every pair.
            </p>
            <Field label="Agent" name="agent" error={act.error}>
              <select id="f-agent" name="agent">
                {(agents.data?.rows ?? []).map((a) => (
                  <option key={a.id} value={a.id}>
                    {text(a.name ?? a.id)}
                  </option>
                ))}
              </select>
            </Field>
            <Field
              label="Labels"
              name="labels"
              error={act.error}
              hint="site=dc1, role=edge — empty clears them"
            >
              <input id="f-labels" name="labels" />
            </Field>
            <button type="submit" class="primary" disabled={act.busy}>
              Save labels
            </button>
          </form>
        </details>
      )}
    </>
  );
}
