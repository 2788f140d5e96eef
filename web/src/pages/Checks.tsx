import { useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { type Row, srql, v2 } from "../api.ts";
import { type Series, TimeChart } from "../components/Chart.tsx";
import { DataTable, Pager } from "../components/Table.tsx";
import { Badge, Card, Confirm, ErrorNote, Field } from "../components/Ui.tsx";
import { ago, labelsText, ms, parseLabelsText, text, when } from "../format.ts";
import { useAction, usePoll, useUrlState } from "../hooks.ts";
import { useCan } from "../session.ts";

type R = Record<string, unknown>;

const TYPES: Array<[string, string, string]> = [
  ["http", "HTTP(S)", "https://example.net/health"],
  ["ping", "Ping (ICMP)", "192.0.2.10"],
  ["tcp", "TCP port", "192.0.2.10"],
  ["dns", "DNS lookup", "example.net"],
  ["snmp", "SNMP get", "192.0.2.10"],
  ["grpc", "gRPC health", "192.0.2.10"],
  ["mtr", "MTR path", "192.0.2.10"],
  ["custom", "Custom command", "192.0.2.10"],
];

/** Per-type settings shown in the form; they go into the check's `config` object. */
const CONFIG_FIELDS: Record<
  string,
  Array<{ name: string; label: string; hint?: string; kind?: "number" | "bool" }>
> = {
  http: [
    { name: "method", label: "Method", hint: "GET, HEAD, POST…" },
    { name: "expected_status", label: "Expected status", hint: "e.g. 200, 2xx; default 200–399" },
    { name: "body_contains", label: "Body contains" },
    { name: "insecure", label: "Skip TLS verification", kind: "bool" },
  ],
  ping: [{ name: "count", label: "Packets", kind: "number" }],
  tcp: [
    { name: "send", label: "Send after connect" },
    { name: "expect", label: "Expect in reply" },
  ],
  dns: [
    { name: "record_type", label: "Record type", hint: "A, AAAA, MX, TXT…" },
    { name: "server", label: "Server", hint: "ip[:port]; default the system resolver" },
    { name: "expected", label: "Expected answer" },
  ],
  snmp: [
    { name: "version", label: "Version", hint: "2c, 1 or 3" },
    { name: "community", label: "Community" },
    { name: "discover_interfaces", label: "Discover interfaces", kind: "bool" },
  ],
  grpc: [
    { name: "service", label: "Service", hint: "empty: the whole server" },
    { name: "tls", label: "TLS", kind: "bool" },
  ],
  mtr: [{ name: "count", label: "Probes per hop", kind: "number" }],
  custom: [{ name: "command", label: "Command", hint: "absolute path in NETMON_CUSTOM_CHECK_ALLOWLIST" }],
};

function resultBadge(r: R) {
  if (r.enabled === false) return <Badge value="disabled" />;
  // Never show an old success as current: an overdue check says so.
  if (r.is_stale === true)
    return <Badge value="stale" label={`stale (last: ${String(r.last_result ?? "none")})`} />;
  return (
    <Badge value={r.last_result ?? "pending"} label={r.last_result ? String(r.last_result) : "not run yet"} />
  );
}

export function Checks() {
  const [q, setQ] = useUrlState();
  const can = useCan();
  const path = q.status === "failing" ? "service-checks/failing" : "service-checks";
  const list = usePoll(
    () =>
      v2.list(path, {
        sort: q.status === "failing" ? undefined : (q.sort ?? "name"),
        "page[limit]": q.status === "failing" ? undefined : "50",
        "page[after]": q.after,
        "page[before]": q.before,
        "filter[check_type][eq]": q.type,
        "filter[agent_uid][eq]": q.agent,
      }),
    10_000,
    [path, q.sort, q.after, q.before, q.type, q.agent],
  );
  const ids = (list.data?.rows ?? []).map((r) => r.id).join(",");
  const sparks = usePoll(
    async () => {
      if (!ids) return new Map<string, Series>();
      const res = await srql(
        `in:services time:last_1h bucket:2m agg:avg value_field:response_time_ms by:service_name`,
      );
      const out = new Map<string, Series>();
      for (const r of res.results) {
        const name = String(r.series ?? "");
        const s = out.get(name) ?? { label: name, points: [] };
        s.points.push([Date.parse(String(r.timestamp)) / 1000, r.value === null ? null : Number(r.value)]);
        out.set(name, s);
      }
      return out;
    },
    30_000,
    [ids],
  );
  return (
    <>
      <div class="page-head">
        <h1>Checks</h1>
        <div class="spacer" />
        <a class="button" href="/checks/profiles">
          Monitoring profiles
        </a>
        {can("services.create") && (
          <a class="button primary" href="/checks/new">
            New check
          </a>
        )}
      </div>
      <div class="filters">
        <label>
          Show{" "}
          <select
            value={q.status ?? ""}
            onChange={(e) => setQ({ status: e.currentTarget.value, after: undefined, before: undefined })}
          >
            <option value="">All checks</option>
            <option value="failing">Failing only</option>
          </select>
        </label>
        <label>
          Type{" "}
          <select
            value={q.type ?? ""}
            onChange={(e) => setQ({ type: e.currentTarget.value, after: undefined, before: undefined })}
          >
            <option value="">Any</option>
            {TYPES.map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorNote error={list.error} />
      <DataTable
        caption="Service checks"
        rows={list.data?.rows}
        sort={q.sort ?? "name"}
        onSort={
          q.status === "failing" ? undefined : (sort) => setQ({ sort, after: undefined, before: undefined })
        }
        empty="No checks yet. Create one to start monitoring."
        columns={[
          {
            key: "name",
            label: "Name",
            sortable: true,
            render: (r) => <a href={`/checks/${r.id}`}>{text(r.name)}</a>,
          },
          { key: "check_type", label: "Type", sortable: true },
          { key: "target", label: "Target", sortable: true },
          { key: "last_result", label: "Status", render: resultBadge },
          {
            key: "last_response_time_ms",
            label: "Latency",
            numeric: true,
            render: (r) => ms(r.last_response_time_ms),
          },
          {
            key: "trend",
            label: "Last hour",
            render: (r) => {
              const s = sparks.data?.get(String(r.name));
              return s ? (
                <TimeChart title={`${text(r.name)} latency`} series={[s]} height={28} sparkline />
              ) : (
                "—"
              );
            },
          },
          { key: "last_check_at", label: "Checked", sortable: true, render: (r) => ago(r.last_check_at) },
          { key: "last_error", label: "Error", render: (r) => text(r.last_error) },
        ]}
      />
      {q.status !== "failing" && (
        <Pager
          prev={list.data?.prev}
          next={list.data?.next}
          onPage={(c, dir) =>
            setQ(dir === "next" ? { after: c, before: undefined } : { before: c, after: undefined })
          }
        />
      )}
    </>
  );
}

export function CheckDetail(props: { params?: { id?: string } }) {
  const id = props.params?.id ?? "";
  const can = useCan();
  const loc = useLocation();
  const check = usePoll(() => v2.get(`service-checks/${encodeURIComponent(id)}`), 5_000, [id]);
  const history = usePoll(
    async () => {
      return srql(
        `in:services service_check_id:"${id.replace(/"/g, "")}" time:last_6h sort:timestamp:desc limit:200`,
      );
    },
    10_000,
    [id],
  );
  const alerts = usePoll(
    () =>
      v2.list("alerts", { "filter[service_check_id][eq]": id, sort: "-triggered_at", "page[limit]": "10" }),
    10_000,
    [id],
  );
  const act = useAction();
  const [confirm, setConfirm] = useState<"" | "delete" | "disable">("");
  const c = check.data;
  if (check.error) return <ErrorNote error={check.error} />;
  if (!c) return <p class="muted">Loading…</p>;
  const rows = (history.data?.results ?? []) as R[];
  const series: Series[] = [
    {
      label: "Response time",
      points: rows
        .map(
          (r) =>
            [
              Date.parse(String(r.timestamp)) / 1000,
              r.response_time_ms === null ? null : Number(r.response_time_ms),
            ] as [number, number | null],
        )
        .sort((a, b) => a[0] - b[0]),
    },
  ];
  const toggle = () =>
    act.run(async () => {
      await v2.update(`service-checks/${id}`, "service-check", id, { enabled: !c.enabled });
      check.reload();
    });
  return (
    <>
      <div class="page-head">
        <h1>{text(c.name)}</h1>
        {resultBadge(c)}
        <div class="spacer" />
        {can("services.run") && (
          <button
            type="button"
            disabled={act.busy || !c.enabled}
            onClick={() =>
              act.run(async () => {
                await v2.update(`service-checks/${id}/run`, "service-check", id);
                check.reload();
              })
            }
          >
            Run now
          </button>
        )}
        {can("services.update") && (
          <>
            {!c.profile_id && (
              <a class="button" href={`/checks/${id}/edit`}>
                Edit
              </a>
            )}
            <button type="button" onClick={() => (c.enabled ? setConfirm("disable") : void toggle())}>
              {c.enabled ? "Disable" : "Enable"}
            </button>
          </>
        )}
        {can("services.delete") && !c.profile_id && (
          <button type="button" class="danger" onClick={() => setConfirm("delete")}>
            Delete
          </button>
        )}
      </div>
      <ErrorNote error={act.error} />
      {c.profile_id && (
        <p class="muted">
          Managed by a <a href="/checks/profiles">monitoring profile</a>: it follows the profile and the
          device's group. You can disable it here; edit the profile to change it.
        </p>
      )}
      <Confirm
        open={confirm !== ""}
        title={confirm === "delete" ? `Delete “${text(c.name)}”?` : `Disable “${text(c.name)}”?`}
        confirmLabel={confirm === "delete" ? "Delete" : "Disable"}
        danger
        onCancel={() => setConfirm("")}
        onConfirm={() => {
          const what = confirm;
          setConfirm("");
          if (what === "disable") void toggle();
          else
            void act.run(async () => {
              await v2.remove(`service-checks/${id}`);
              loc.route("/checks");
            });
        }}
      >
        <p>Its open alerts are resolved. Its history stays until retention removes it.</p>
      </Confirm>
      <div class="grid">
        <Card title="Check">
          <dl class="kv">
            <dt>Type</dt>
            <dd>{text(c.check_type_label ?? c.check_type)}</dd>
            <dt>Target</dt>
            <dd>
              {text(c.target)}
              {c.port ? `:${c.port}` : ""}
            </dd>
            <dt>Interval</dt>
            <dd>{text(c.interval_seconds)} s</dd>
            <dt>Timeout</dt>
            <dd>{text(c.timeout_seconds)} s</dd>
            <dt>Runs on</dt>
            <dd>
              {c.agent_uid
                ? `agent ${text(c.agent_uid)}`
                : c.agent_labels
                  ? `any agent labelled ${labelsText(c.agent_labels)}${c.gateway_id ? ` behind gateway ${text(c.gateway_id)}` : ""}`
                  : c.gateway_id
                    ? `any agent behind gateway ${text(c.gateway_id)}`
                    : "the default placement"}
            </dd>
            <dt>Device</dt>
            <dd>
              {c.device_uid ? (
                <a href={`/devices/${encodeURIComponent(String(c.device_uid))}`}>{text(c.device_uid)}</a>
              ) : (
                "—"
              )}
            </dd>
            <dt>Last result</dt>
            <dd>
              {text(c.last_result)} {c.last_check_at ? `(${ago(c.last_check_at)})` : ""}
            </dd>
            <dt>Last latency</dt>
            <dd>{ms(c.last_response_time_ms)}</dd>
            <dt>Last error</dt>
            <dd>{text(c.last_error)}</dd>
            <dt>Failures in a row</dt>
            <dd>{text(c.consecutive_failures)}</dd>
            <dt>Next run</dt>
            <dd>{c.enabled ? ago(c.next_check_at) : "disabled"}</dd>
          </dl>
        </Card>
        <Card title="Response time" wide>
          <TimeChart title="Response time (ms), last 6 hours" series={series} unit=" ms" />
        </Card>
        <Card title="Results" wide>
          <DataTable
            caption="Recent results"
            rows={rows.slice(0, 30)}
            rowKey={(r, i) => `${r.timestamp}-${i}`}
            empty="No results yet."
            columns={[
              { key: "timestamp", label: "Time", render: (r) => when(r.timestamp) },
              {
                key: "status",
                label: "Result",
                render: (r) => <Badge value={r.status ?? (r.available ? "ok" : "critical")} />,
              },
              {
                key: "response_time_ms",
                label: "Latency",
                numeric: true,
                render: (r) => ms(r.response_time_ms),
              },
              { key: "message", label: "Message", render: (r) => text(r.message ?? r.error) },
            ]}
          />
        </Card>
        <Card title="Alerts" wide>
          <DataTable
            caption="Alerts raised by this check"
            rows={alerts.data?.rows}
            empty="No alerts."
            columns={[
              {
                key: "title",
                label: "Alert",
                render: (r) => <a href={`/alerts/${r.id}`}>{text(r.title)}</a>,
              },
              { key: "status", label: "Status", render: (r) => <Badge value={r.status} /> },
              { key: "triggered_at", label: "Triggered", render: (r) => ago(r.triggered_at) },
            ]}
          />
        </Card>
      </div>
    </>
  );
}

function configValue(kind: string | undefined, raw: FormDataEntryValue | null): unknown {
  if (kind === "bool") return raw === "on";
  const s = String(raw ?? "").trim();
  if (s === "") return undefined;
  if (kind === "number") return Number(s);
  if (/^\d+$/.test(s)) return Number(s);
  return s;
}

export function CheckEdit(props: { params?: { id?: string } }) {
  const id = props.params?.id;
  const loc = useLocation();
  const existing = usePoll(
    () => (id ? v2.get(`service-checks/${encodeURIComponent(id)}`) : Promise.resolve(undefined)),
    0,
    [id],
  );
  const [type, setType] = useState<string>();
  const act = useAction();
  const c: Row | undefined = existing.data;
  if (id && !c) return existing.error ? <ErrorNote error={existing.error} /> : <p class="muted">Loading…</p>;
  const checkType = type ?? String(c?.check_type ?? "http");
  const cfg = (c?.config ?? {}) as R;
  const placeholder = TYPES.find(([v]) => v === checkType)?.[2] ?? "";
  return (
    <>
      <h1>{id ? `Edit ${text(c?.name)}` : "New check"}</h1>
      <form
        class="form"
        onSubmit={async (e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          const attrs: R = {
            name: String(f.get("name") ?? "").trim(),
            target: String(f.get("target") ?? "").trim(),
            interval_seconds: Number(f.get("interval_seconds")),
            timeout_seconds: Number(f.get("timeout_seconds")),
            enabled: f.get("enabled") === "on",
          };
          const port = String(f.get("port") ?? "").trim();
          attrs.port = port === "" ? null : Number(port);
          const crit = String(f.get("critical_threshold_ms") ?? "").trim();
          attrs.critical_threshold_ms = crit === "" ? null : Number(crit);
          const agent = String(f.get("agent_uid") ?? "").trim();
          attrs.agent_uid = agent === "" ? null : agent;
          const gateway = String(f.get("gateway_id") ?? "").trim();
          attrs.gateway_id = gateway === "" ? null : gateway;
          attrs.agent_labels = parseLabelsText(String(f.get("agent_labels") ?? ""));
          const config: R = { ...cfg };
          for (const fld of CONFIG_FIELDS[checkType] ?? []) {
            const v = configValue(fld.kind, f.get(`config.${fld.name}`));
            if (v === undefined) delete config[fld.name];
            else config[fld.name] = v;
          }
          attrs.config = config;
          const saved = await act.run(() =>
            id
              ? v2.update(`service-checks/${id}`, "service-check", id, attrs)
              : v2.create("service-checks", "service-check", { ...attrs, check_type: checkType }),
          );
          if (saved) loc.route(`/checks/${saved.id}`);
        }}
      >
        <ErrorNote error={act.error} />
        <Field label="Type" name="check_type" error={act.error}>
          <select
            id="f-check_type"
            disabled={Boolean(id)}
            value={checkType}
            onChange={(e) => setType(e.currentTarget.value)}
          >
            {TYPES.map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Name" name="name" error={act.error}>
          <input id="f-name" name="name" required maxLength={255} defaultValue={String(c?.name ?? "")} />
        </Field>
        <Field
          label="Target"
          name="target"
          error={act.error}
          hint={checkType === "http" ? "A full URL" : "Host name or IP address"}
        >
          <input
            id="f-target"
            name="target"
            required
            placeholder={placeholder}
            defaultValue={String(c?.target ?? "")}
          />
        </Field>
        <Field label="Port" name="port" error={act.error} hint="Optional; the type's default otherwise">
          <input
            id="f-port"
            name="port"
            type="number"
            min={0}
            max={65535}
            defaultValue={c?.port == null ? "" : String(c.port)}
          />
        </Field>
        <Field label="Interval (seconds)" name="interval_seconds" error={act.error}>
          <input
            id="f-interval_seconds"
            name="interval_seconds"
            type="number"
            min={1}
            max={86400}
            required
            defaultValue={String(c?.interval_seconds ?? 60)}
          />
        </Field>
        <Field label="Timeout (seconds)" name="timeout_seconds" error={act.error}>
          <input
            id="f-timeout_seconds"
            name="timeout_seconds"
            type="number"
            min={1}
            max={300}
            required
            defaultValue={String(c?.timeout_seconds ?? 10)}
          />
        </Field>
        <Field
          label="Critical above (ms)"
          name="critical_threshold_ms"
          error={act.error}
          hint="Optional latency threshold"
        >
          <input
            id="f-critical_threshold_ms"
            name="critical_threshold_ms"
            type="number"
            min={0}
            defaultValue={c?.critical_threshold_ms == null ? "" : String(c.critical_threshold_ms)}
          />
        </Field>
        <Field
          label="Agent"
          name="agent_uid"
          error={act.error}
          hint="Empty: behind the gateway below, or this server's embedded agent"
        >
          <input id="f-agent_uid" name="agent_uid" defaultValue={String(c?.agent_uid ?? "")} />
        </Field>
        <Field
          label="Gateway (site)"
          name="gateway_id"
          error={act.error}
          hint="Any free agent behind this gateway runs it; an agent above wins"
        >
          <input id="f-gateway_id" name="gateway_id" defaultValue={String(c?.gateway_id ?? "")} />
        </Field>
        <Field
          label="Agent pool"
          name="agent_labels"
          error={act.error}
          hint="site=dc1, role=edge — any connected agent with these labels runs it"
        >
          <input id="f-agent_labels" name="agent_labels" defaultValue={labelsText(c?.agent_labels)} />
        </Field>
        <fieldset>
          <legend>{TYPES.find(([v]) => v === checkType)?.[1]} settings</legend>
          {(CONFIG_FIELDS[checkType] ?? []).map((fld) =>
            fld.kind === "bool" ? (
              <label key={fld.name} class="check">
                <input type="checkbox" name={`config.${fld.name}`} defaultChecked={cfg[fld.name] === true} />{" "}
                {fld.label}
              </label>
            ) : (
              <Field key={fld.name} label={fld.label} name={fld.name} error={act.error} hint={fld.hint}>
                <input
                  id={`f-${fld.name}`}
                  name={`config.${fld.name}`}
                  inputMode={fld.kind === "number" ? "numeric" : undefined}
                  defaultValue={cfg[fld.name] === undefined ? "" : String(cfg[fld.name])}
                />
              </Field>
            ),
          )}
        </fieldset>
        <label class="check">
          <input type="checkbox" name="enabled" defaultChecked={c?.enabled !== false} /> Enabled
        </label>
        <div class="actions">
          <a class="button" href={id ? `/checks/${id}` : "/checks"}>
            Cancel
          </a>
          <button type="submit" class="primary" disabled={act.busy}>
            {id ? "Save" : "Create check"}
          </button>
        </div>
      </form>
    </>
  );
}
