import { api, srql, v2 } from "../api.ts";
import { type Series, TimeChart } from "../components/Chart.tsx";
import { DataTable } from "../components/Table.tsx";
import { Badge, Card, ErrorNote } from "../components/Ui.tsx";
import { ago, text, when } from "../format.ts";
import { useAction, usePoll, useUrlState } from "../hooks.ts";
import { useCan } from "../session.ts";

type R = Record<string, unknown>;
const PAGE_SIZES = [50, 100, 500];

function availability(r: R) {
  return r.is_available === true ? (
    <Badge value="up" />
  ) : r.is_available === false ? (
    <Badge value="down" />
  ) : (
    <Badge value="unknown" label="not checked" />
  );
}

export function Devices() {
  const [q, setQ] = useUrlState();
  const offset = Number(q.offset ?? 0) || 0;
  const size = PAGE_SIZES.includes(Number(q.limit)) ? Number(q.limit) : 50;
  const params = new URLSearchParams({ limit: String(size), offset: String(offset) });
  for (const k of ["search", "status", "source", "group_id", "sort"]) if (q[k]) params.set(k, q[k] as string);
  const list = usePoll(
    () => api.get<{ data: R[]; pagination: { next_offset: number | null } }>(`/api/devices?${params}`),
    30_000,
    [params.toString()],
  );
  const groups = usePoll(() => v2.list("device-groups", { "page[limit]": "200" }), 0, []);
  const can = useCan();

  return (
    <>
      <div class="page-head">
        <h1>Devices</h1>
        {can("devices.ingest") && <AddDevice onAdded={list.reload} />}
      </div>
      <search>
        <form
          class="filters"
          onSubmit={(e) => {
            e.preventDefault();
            const f = new FormData(e.currentTarget);
            setQ({ search: String(f.get("search") ?? "").trim(), offset: undefined });
          }}
        >
          <label for="device-search" class="sr-only">
            Search devices
          </label>
          <input
            id="device-search"
            name="search"
            type="search"
            placeholder="Hostname, IP, MAC or uid"
            defaultValue={q.search ?? ""}
          />
          <button type="submit">Search</button>
          <label>
            Availability{" "}
            <select
              value={q.status ?? ""}
              onChange={(e) => setQ({ status: e.currentTarget.value, offset: undefined })}
            >
              <option value="">Any</option>
              <option value="online">Up</option>
              <option value="offline">Down or unknown</option>
            </select>
          </label>
          <label>
            Source{" "}
            <select
              value={q.source ?? ""}
              onChange={(e) => setQ({ source: e.currentTarget.value, offset: undefined })}
            >
              <option value="">Any</option>
              {["manual", "sweep", "snmp", "agent", "netbox", "armis", "import", "mapper"].map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </label>
          <label>
            Per page{" "}
            <select
              value={String(size)}
              onChange={(e) => setQ({ limit: e.currentTarget.value, offset: undefined })}
            >
              {PAGE_SIZES.map((n) => (
                <option key={n} value={String(n)}>
                  {n}
                </option>
              ))}
            </select>
          </label>
          <label>
            Group{" "}
            <select
              value={q.group_id ?? ""}
              onChange={(e) => setQ({ group_id: e.currentTarget.value, offset: undefined })}
            >
              <option value="">Any</option>
              {(groups.data?.rows ?? []).map((g) => (
                <option key={g.id} value={g.id}>
                  {String(g.name)}
                </option>
              ))}
            </select>
          </label>
        </form>
      </search>
      <ErrorNote error={list.error} />
      <DataTable
        caption="Devices"
        rows={list.data?.data}
        rowKey={(r) => String(r.uid)}
        sort={q.sort}
        onSort={(sort) => setQ({ sort, offset: undefined })}
        empty={q.search ? `No device matches “${q.search}”.` : "No devices yet. Add one, or run a sweep."}
        columns={[
          {
            key: "hostname",
            label: "Hostname",
            sortable: true,
            render: (r) => (
              <a href={`/devices/${encodeURIComponent(String(r.uid))}`}>
                {text(r.hostname ?? r.name ?? r.uid)}
              </a>
            ),
          },
          { key: "ip", label: "IP", sortable: true },
          { key: "mac", label: "MAC", sortable: true },
          { key: "type", label: "Type", sortable: true },
          { key: "vendor_name", label: "Vendor", sortable: true },
          { key: "is_available", label: "Status", sortable: true, render: availability },
          { key: "discovery_sources", label: "Sources", render: (r) => text(r.discovery_sources) },
          { key: "last_seen_time", label: "Last seen", sortable: true, render: (r) => ago(r.last_seen_time) },
        ]}
      />
      <nav class="pager" aria-label="Pages">
        <button
          type="button"
          disabled={offset === 0}
          onClick={() => setQ({ offset: String(Math.max(0, offset - size)) })}
        >
          ← Previous
        </button>
        <span class="muted">{list.data ? `${offset + 1}–${offset + list.data.data.length}` : ""}</span>
        <button
          type="button"
          disabled={!list.data?.pagination.next_offset}
          onClick={() => setQ({ offset: String(list.data?.pagination.next_offset ?? offset) })}
        >
          Next →
        </button>
      </nav>
    </>
  );
}

function AddDevice(props: { onAdded: () => void }) {
  const act = useAction();
  return (
    <details class="inline-form">
      <summary>Add device</summary>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const f = new FormData(form);
          const update: R = { ip: String(f.get("ip") ?? "").trim(), source: "manual" };
          for (const k of ["hostname", "mac"]) {
            const v = String(f.get(k) ?? "").trim();
            if (v) update[k] = v;
          }
          const res = await act.run(() =>
            api.post<{ data: { results: Array<{ error?: string; message?: string }> } }>(
              "/api/v1/device-updates",
              {
                updates: [update],
              },
            ),
          );
          const bad = res?.data.results.find((r) => r.error);
          if (bad) {
            act.run(() => Promise.reject(new Error(bad.message ?? bad.error)));
            return;
          }
          if (res) {
            form.reset();
            props.onAdded();
          }
        }}
      >
        <label>
          IP address <input name="ip" required placeholder="192.0.2.10" />
        </label>
        <label>
          Hostname <input name="hostname" placeholder="core-sw-1" />
        </label>
        <label>
          MAC <input name="mac" placeholder="aa:bb:cc:dd:ee:ff" />
        </label>
        <button type="submit" class="primary" disabled={act.busy}>
          Add
        </button>
        <ErrorNote error={act.error} />
      </form>
    </details>
  );
}

/** The device's group; moving it applies (or removes) the group's monitoring profiles. */
function GroupPicker(props: { uid: string; groupId: string | null; editable: boolean; onMoved: () => void }) {
  const groups = usePoll(() => v2.list("device-groups", { "page[limit]": "1000" }), 0, []);
  const act = useAction();
  const rows = groups.data?.rows ?? [];
  const current = rows.find((g) => g.id === props.groupId);
  if (!props.editable) return <>{text(current?.name ?? (props.groupId ? props.groupId : "none"))}</>;
  return (
    <>
      <select
        aria-label="Device group"
        value={props.groupId ?? ""}
        disabled={act.busy}
        onChange={(e) => {
          const value = e.currentTarget.value;
          void act.run(async () => {
            await v2.update(`devices/${encodeURIComponent(props.uid)}`, "device", props.uid, {
              group_id: value === "" ? null : value,
            });
            props.onMoved();
          });
        }}
      >
        <option value="">(no group)</option>
        {rows.map((g) => (
          <option key={String(g.id)} value={String(g.id)}>
            {text(g.name)}
          </option>
        ))}
      </select>
      <ErrorNote error={act.error} />
    </>
  );
}

export function DeviceDetail(props: { uid?: string; params?: { uid?: string } }) {
  const uid = decodeURIComponent(props.params?.uid ?? props.uid ?? "");
  const can = useCan();
  const device = usePoll(() => api.get<{ data: R }>(`/api/devices/${encodeURIComponent(uid)}`), 30_000, [
    uid,
  ]);
  const ocsf = usePoll(
    () =>
      api.get<R>(`/api/devices/ocsf/export?uid=${encodeURIComponent(uid)}&limit=1`).catch(() => undefined),
    0,
    [uid],
  );
  const checks = usePoll(
    () => v2.list("service-checks", { "filter[device_uid][eq]": uid, "page[limit]": "100" }),
    15_000,
    [uid],
  );
  const alerts = usePoll(
    () => v2.list("alerts", { "filter[device_uid][eq]": uid, sort: "-triggered_at", "page[limit]": "20" }),
    15_000,
    [uid],
  );
  const ifaces = usePoll(
    () => v2.list("interfaces", { "filter[device_id][eq]": uid, "page[limit]": "200" }),
    0,
    [uid],
  );
  const latency = usePoll(
    () =>
      srql(
        `in:services device_uid:"${uid.replace(/"/g, "")}" time:last_6h bucket:5m agg:avg value_field:response_time_ms by:service_name`,
      ).catch(() => undefined),
    30_000,
    [uid],
  );
  const logs = usePoll(
    () =>
      srql(`in:logs device_id:"${uid.replace(/"/g, "")}" time:last_24h sort:timestamp:desc limit:20`).catch(
        () => undefined,
      ),
    30_000,
    [uid],
  );
  const act = useAction();
  const d = device.data?.data;
  const series: Series[] = [];
  for (const r of latency.data?.results ?? []) {
    const name = String(r.series ?? "latency");
    let s = series.find((x) => x.label === name);
    if (!s) {
      s = { label: name, points: [] };
      series.push(s);
    }
    s.points.push([Date.parse(String(r.timestamp)) / 1000, r.value === null ? null : Number(r.value)]);
  }
  if (device.error) return <ErrorNote error={device.error} />;
  if (!d) return <p class="muted">Loading…</p>;
  const target = String(d.ip ?? "");
  return (
    <>
      <div class="page-head">
        <h1>{text(d.hostname ?? d.name ?? d.uid)}</h1>
        {availability(d)}
        {can("services.create") && target && (
          <button
            type="button"
            class="primary"
            disabled={act.busy}
            onClick={() =>
              act.run(async () => {
                await v2.create("service-checks", "service-check", {
                  name: `ping ${d.hostname ?? target}`,
                  check_type: "ping",
                  target,
                  device_uid: uid,
                  interval_seconds: 60,
                });
                checks.reload();
              })
            }
          >
            Monitor this device
          </button>
        )}
      </div>
      <ErrorNote error={act.error} />
      <div class="grid">
        <Card title="Identity">
          <dl class="kv">
            <dt>Availability</dt>
            <dd>
              {availability(d)} {d.availability_changed_at ? `since ${when(d.availability_changed_at)}` : ""}
              {d.availability_reason ? <div class="muted small">{text(d.availability_reason)}</div> : null}
            </dd>
            <dt>uid</dt>
            <dd>{text(d.uid)}</dd>
            <dt>IP</dt>
            <dd>{text(d.ip)}</dd>
            <dt>MAC</dt>
            <dd>{text(d.mac)}</dd>
            <dt>Type</dt>
            <dd>{text(d.type)}</dd>
            <dt>Vendor / model</dt>
            <dd>
              {text(d.vendor_name)} {d.model ? `/ ${text(d.model)}` : ""}
            </dd>
            <dt>Sources</dt>
            <dd>{text(d.discovery_sources)}</dd>
            <dt>Group</dt>
            <dd>
              <GroupPicker
                uid={uid}
                groupId={(d.group_id as string | null) ?? null}
                editable={can("devices.update")}
                onMoved={() => {
                  device.reload();
                  // The group's profiles apply on the server's next pass (within 10 s).
                  for (const ms of [1500, 6000, 12_000]) window.setTimeout(() => checks.reload(), ms);
                }}
              />
            </dd>
            <dt>Partition</dt>
            <dd>{text(d.partition)}</dd>
            <dt>First seen</dt>
            <dd>{when(d.first_seen_time)}</dd>
            <dt>Last seen</dt>
            <dd>
              {when(d.last_seen_time)} ({ago(d.last_seen_time)})
            </dd>
          </dl>
        </Card>
        <Card title="Checks">
          <DataTable
            caption="Checks of this device"
            rows={checks.data?.rows}
            empty="Not monitored yet."
            columns={[
              { key: "name", label: "Name", render: (r) => <a href={`/checks/${r.id}`}>{text(r.name)}</a> },
              { key: "check_type", label: "Type" },
              {
                key: "last_result",
                label: "Result",
                render: (r) => <Badge value={r.last_result ?? "pending"} />,
              },
              { key: "last_check_at", label: "Checked", render: (r) => ago(r.last_check_at) },
            ]}
          />
        </Card>
        <Card title="Response time" wide>
          <TimeChart title="Check response time (ms), last 6 hours" series={series} unit=" ms" />
        </Card>
        <Card title="Recent alerts" wide>
          <DataTable
            caption="Recent alerts of this device"
            rows={alerts.data?.rows}
            empty="No alerts."
            columns={[
              {
                key: "title",
                label: "Alert",
                render: (r) => <a href={`/alerts/${r.id}`}>{text(r.title)}</a>,
              },
              { key: "severity", label: "Severity", render: (r) => <Badge value={r.severity} /> },
              { key: "status", label: "Status", render: (r) => <Badge value={r.status} /> },
              { key: "triggered_at", label: "Triggered", render: (r) => ago(r.triggered_at) },
            ]}
          />
        </Card>
        <Card title="Interfaces" wide>
          <DataTable
            caption="Interfaces"
            rows={ifaces.data?.rows}
            empty="No interfaces discovered (SNMP checks with discover_interfaces find them)."
            columns={[
              { key: "if_index", label: "Index", numeric: true },
              { key: "if_name", label: "Name" },
              { key: "if_descr", label: "Description" },
              {
                key: "if_oper_status",
                label: "Oper",
                render: (r) => <Badge value={Number(r.if_oper_status) === 1 ? "up" : "down"} />,
              },
              { key: "speed_bps", label: "Speed", numeric: true },
            ]}
          />
        </Card>
        <Card title="Recent logs" wide>
          <DataTable
            caption="Recent logs"
            rows={logs.data?.results}
            empty="No logs from this device in the last day."
            columns={[
              { key: "timestamp", label: "Time", render: (r) => when(r.timestamp) },
              { key: "severity_text", label: "Severity" },
              { key: "body", label: "Message" },
            ]}
          />
        </Card>
        <Card title="OCSF view" wide>
          <details>
            <summary>OCSF 1.7.0 device object</summary>
            <pre class="code">{JSON.stringify(ocsf.data ?? {}, null, 2)}</pre>
          </details>
        </Card>
      </div>
    </>
  );
}
