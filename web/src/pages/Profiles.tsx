import { useState } from "preact/hooks";
import { type Row, v2 } from "../api.ts";
import { DataTable } from "../components/Table.tsx";
import { Badge, Confirm, ErrorNote, Field } from "../components/Ui.tsx";
import { ago, text } from "../format.ts";
import { useAction, usePoll } from "../hooks.ts";
import { useCan } from "../session.ts";

type R = Record<string, unknown>;
type Template = { name: string; check_type: string; port: string; interval_seconds: string };

const TEMPLATE_TYPES = ["ping", "tcp", "http", "dns", "snmp", "grpc", "mtr"];
const blank = (): Template => ({ name: "", check_type: "ping", port: "", interval_seconds: "60" });

/**
 * Monitoring profiles: default checks for every device of a group (issue 13). The server does
 * the work (a reconcile every 10 s); this page lists what each profile covers and creates them.
 */
export function Profiles() {
  const can = useCan();
  const list = usePoll(() => v2.list("monitoring-profiles", { "page[limit]": "100" }), 10_000, []);
  const groups = usePoll(() => v2.list("device-groups", { "page[limit]": "1000" }), 30_000, []);
  const groupName = (id: unknown) =>
    text((groups.data?.rows ?? []).find((g) => g.id === id)?.name ?? (id ? String(id) : "any group"));
  const [adding, setAdding] = useState(false);
  const [removing, setRemoving] = useState<Row | null>(null);
  const act = useAction();
  return (
    <>
      <div class="page-head">
        <h1>Monitoring profiles</h1>
        <div class="spacer" />
        <a class="button" href="/checks">
          All checks
        </a>
        {can("services.create") && !adding && (
          <button type="button" class="primary" onClick={() => setAdding(true)}>
            New profile
          </button>
        )}
      </div>
      <p class="muted">
        A profile gives every device of a group the same checks. Devices that join the group are monitored
        within seconds; devices that leave lose the profile's checks.
      </p>
      {adding && (
        <ProfileForm
          groups={groups.data?.rows ?? []}
          onDone={() => {
            setAdding(false);
            list.reload();
            groups.reload();
          }}
        />
      )}
      <ErrorNote error={list.error ?? act.error} />
      <Confirm
        open={removing !== null}
        title={`Delete profile “${text(removing?.name)}”?`}
        confirmLabel="Delete"
        danger
        onCancel={() => setRemoving(null)}
        onConfirm={() => {
          const id = String(removing?.id);
          setRemoving(null);
          void act.run(async () => {
            await v2.remove(`monitoring-profiles/${id}`);
            list.reload();
          });
        }}
      >
        <p>Its checks are deleted from every device and their open alerts resolved.</p>
      </Confirm>
      <DataTable
        caption="Monitoring profiles"
        rows={list.data?.rows}
        empty="No profiles yet. Create one to monitor a whole group of devices."
        columns={[
          { key: "name", label: "Name", render: (r) => text(r.name) },
          {
            key: "group_id",
            label: "Covers",
            render: (r) => `${groupName(r.group_id)}${r.device_type ? `, type ${text(r.device_type)}` : ""}`,
          },
          {
            key: "checks",
            label: "Checks",
            render: (r) =>
              ((r.checks as R[]) ?? [])
                .map((c) => `${text(c.name)} (${text(c.check_type)}${c.port ? ` :${c.port}` : ""})`)
                .join(", "),
          },
          { key: "devices_matched", label: "Devices", numeric: true },
          { key: "checks_managed", label: "Managed checks", numeric: true },
          {
            key: "conflicts",
            label: "Conflicts",
            render: (r) => {
              const n = ((r.conflicts as unknown[]) ?? []).length;
              return n === 0 ? (
                "none"
              ) : (
                <Badge value="warning" label={`${n} device(s) keep their own check`} />
              );
            },
          },
          {
            key: "enabled",
            label: "State",
            render: (r) => <Badge value={r.enabled ? "ok" : "disabled"} label={r.enabled ? "on" : "off"} />,
          },
          { key: "last_applied_at", label: "Applied", render: (r) => ago(r.last_applied_at) },
          {
            key: "actions",
            label: "",
            render: (r) =>
              can("services.delete") ? (
                <button type="button" class="danger small" onClick={() => setRemoving(r)}>
                  Delete
                </button>
              ) : null,
          },
        ]}
      />
    </>
  );
}

function ProfileForm(props: { groups: Row[]; onDone: () => void }) {
  const [rows, setRows] = useState<Template[]>([blank()]);
  const act = useAction();
  const set = (i: number, patch: Partial<Template>) =>
    setRows(rows.map((r, k) => (k === i ? { ...r, ...patch } : r)));
  return (
    <form
      class="form"
      onSubmit={async (e) => {
        e.preventDefault();
        const f = new FormData(e.currentTarget);
        await act.run(async () => {
          let groupId = String(f.get("group_id") ?? "");
          const newGroup = String(f.get("new_group") ?? "").trim();
          if (newGroup) {
            groupId = String((await v2.create("device-groups", "device-group", { name: newGroup })).id);
          }
          const checks = rows.map((r) => {
            const t: R = { name: r.name.trim(), check_type: r.check_type };
            if (r.port.trim()) t.port = Number(r.port);
            if (r.interval_seconds.trim()) t.interval_seconds = Number(r.interval_seconds);
            return t;
          });
          const deviceType = String(f.get("device_type") ?? "").trim();
          await v2.create("monitoring-profiles", "monitoring-profile", {
            name: String(f.get("name") ?? "").trim(),
            ...(groupId ? { group_id: groupId } : {}),
            ...(deviceType ? { device_type: deviceType } : {}),
            checks,
          });
          props.onDone();
        });
      }}
    >
      <Field label="Name" name="name" error={act.error}>
        <input id="f-name" name="name" required />
      </Field>
      <Field label="Device group" name="group_id" error={act.error} hint="or create one below">
        <select id="f-group_id" name="group_id">
          <option value="">(none: match by device type)</option>
          {props.groups.map((g) => (
            <option key={String(g.id)} value={String(g.id)}>
              {text(g.name)} ({text(g.device_count)} devices)
            </option>
          ))}
        </select>
      </Field>
      <Field label="New group" name="new_group" hint="creates the group and uses it">
        <input id="f-new_group" name="new_group" />
      </Field>
      <Field label="Device type" name="device_type" error={act.error} hint="optional, e.g. Switch">
        <input id="f-device_type" name="device_type" />
      </Field>
      <fieldset>
        <legend>Checks every device gets (target: the device's IP)</legend>
        {rows.map((r, i) => (
          <div class="template-row" key={i}>
            <label>
              Name{" "}
              <input
                aria-label={`Check ${i + 1} name`}
                value={r.name}
                required
                onInput={(e) => set(i, { name: e.currentTarget.value })}
              />
            </label>
            <label>
              Type{" "}
              <select
                aria-label={`Check ${i + 1} type`}
                value={r.check_type}
                onChange={(e) => set(i, { check_type: e.currentTarget.value })}
              >
                {TEMPLATE_TYPES.map((t) => (
                  <option key={t} value={t}>
                    {t}
                  </option>
                ))}
              </select>
            </label>
            <label>
              Port{" "}
              <input
                aria-label={`Check ${i + 1} port`}
                inputMode="numeric"
                size={6}
                value={r.port}
                onInput={(e) => set(i, { port: e.currentTarget.value })}
              />
            </label>
            <label>
              Every (s){" "}
              <input
                aria-label={`Check ${i + 1} interval`}
                inputMode="numeric"
                size={6}
                value={r.interval_seconds}
                onInput={(e) => set(i, { interval_seconds: e.currentTarget.value })}
              />
            </label>
            {rows.length > 1 && (
              <button type="button" class="small" onClick={() => setRows(rows.filter((_, k) => k !== i))}>
                Remove
              </button>
            )}
          </div>
        ))}
        <button type="button" class="small" onClick={() => setRows([...rows, blank()])}>
          Add check
        </button>
      </fieldset>
      <ErrorNote error={act.error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={act.busy}>
          Create profile
        </button>
        <button type="button" onClick={props.onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}
