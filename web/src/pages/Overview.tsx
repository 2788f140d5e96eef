import { srql, v2 } from "../api.ts";
import { type Series, TimeChart } from "../components/Chart.tsx";
import { DataTable } from "../components/Table.tsx";
import { Badge, Card, Stat } from "../components/Ui.tsx";
import { ago, bytes, pct } from "../format.ts";
import { usePoll } from "../hooks.ts";

type R = Record<string, unknown>;

function toSeries(rows: R[], label: string, field = "value"): Series {
  return {
    label,
    points: rows
      .map(
        (r) =>
          [Date.parse(String(r.timestamp)) / 1000, r[field] === null ? null : Number(r[field])] as [
            number,
            number | null,
          ],
      )
      .filter(([t]) => Number.isFinite(t))
      .sort((a, b) => a[0] - b[0]),
  };
}

function latestPerKey(rows: R[], key: string): R[] {
  const out = new Map<string, R>();
  for (const r of rows) {
    const k = String(r[key]);
    const prev = out.get(k);
    if (!prev || String(r.timestamp) > String(prev.timestamp)) out.set(k, r);
  }
  return [...out.values()];
}

/**
 * "This host" is one agent's host: the embedded agent's when it reports, else the agent that
 * reported last. Every series is filtered by that agent, so a second agent's samples never mix in.
 */
async function loadHost() {
  const recent = await srql("in:memory_metrics time:last_30m sort:timestamp:desc limit:50");
  const pick =
    recent.results.find((r) => String(r.agent_id ?? "").startsWith("embedded-")) ?? recent.results[0];
  if (!pick) return null;
  const agent = `agent_id:"${String(pick.agent_id).replace(/["\\]/g, "")}"`;
  const [cpu, mem, disks, procs] = await Promise.all([
    srql(`in:cpu_metrics ${agent} time:last_30m bucket:30s agg:avg value_field:usage_percent`),
    srql(`in:memory_metrics ${agent} time:last_30m bucket:30s agg:avg value_field:usage_percent`),
    srql(`in:disk_metrics ${agent} time:last_5m sort:timestamp:desc limit:100`),
    srql(`in:process_metrics ${agent} time:last_5m sort:timestamp:desc limit:20`),
  ]);
  const memNow = { results: [pick] };
  const latestTs = procs.results[0]?.timestamp;
  return {
    agent: String(pick.agent_id),
    hostName: String(pick.host_id ?? ""),
    deviceId: pick.device_id ? String(pick.device_id) : null,
    cpu: toSeries(cpu.results, "CPU %"),
    mem: toSeries(mem.results, "Memory %"),
    memNow: memNow.results[0],
    disks: latestPerKey(disks.results, "mount_point").sort((a, b) =>
      String(a.mount_point).localeCompare(String(b.mount_point)),
    ),
    procs: procs.results
      .filter((p) => p.timestamp === latestTs)
      .sort((a, b) => Number(b.cpu_usage) - Number(a.cpu_usage))
      .slice(0, 10),
  };
}

async function loadEstate() {
  const [devices, alerts, failing, gateways, agents, ingest] = await Promise.all([
    srql("in:devices by:is_available"),
    srql("in:alerts status:active by:severity"),
    v2.list("service-checks/failing"),
    v2.list("gateways", { "page[limit]": "50" }),
    v2.list("agents", { "page[limit]": "50" }),
    Promise.all(
      (
        [
          ["logs", "gateway_id"],
          ["events", "source"],
          ["timeseries_metrics", "gateway_id"],
          ["services", "agent_id"],
        ] as const
      ).map(([e, by]) =>
        srql(`in:${e} time:last_5m by:${by}`).then(
          (r) => [e, r.results.reduce((n, x) => n + Number(x.count ?? 0), 0)] as const,
          () => [e, null] as const,
        ),
      ),
    ),
  ]);
  const count = (rows: R[], key: string, value: unknown) =>
    rows.filter((r) => r[key] === value).reduce((n, r) => n + Number(r.count ?? 0), 0);
  return {
    up: count(devices.results, "is_available", true),
    down: count(devices.results, "is_available", false),
    unknown: count(devices.results, "is_available", null),
    alerts: Object.fromEntries(alerts.results.map((r) => [String(r.severity), Number(r.count)])) as Record<
      string,
      number
    >,
    failing: failing.rows,
    gateways: gateways.rows,
    agents: agents.rows,
    ingest,
  };
}

export function Overview() {
  // Every 2 s until the first sample of a fresh start arrives, then every 10 s.
  const host = usePoll(loadHost, (h) => (h?.memNow ? 10_000 : 2_000), []);
  const estate = usePoll(loadEstate, 15_000, []);
  const e = estate.data;
  const h = host.data;
  const activeAlerts = e ? Object.values(e.alerts).reduce((a, b) => a + b, 0) : undefined;
  return (
    <>
      <h1>Overview</h1>
      <div class="grid">
        <Card title="Devices" href="/devices">
          <div class="stats">
            <Stat label="up" value={e?.up ?? "…"} tone="ok" />
            <Stat label="down" value={e?.down ?? "…"} tone={e && e.down > 0 ? "bad" : ""} />
            <Stat label="not checked" value={e?.unknown ?? "…"} />
          </div>
        </Card>
        <Card title="Active alerts" href="/alerts">
          <div class="stats">
            <Stat
              label="critical"
              value={e?.alerts.critical ?? (e ? 0 : "…")}
              tone={e?.alerts.critical ? "bad" : ""}
            />
            <Stat
              label="warning"
              value={e?.alerts.warning ?? (e ? 0 : "…")}
              tone={e?.alerts.warning ? "warn" : ""}
            />
            <Stat label="info" value={e?.alerts.info ?? (e ? 0 : "…")} />
          </div>
          {activeAlerts === 0 && <p class="muted">No active alerts.</p>}
        </Card>
        <Card title="Failing checks" href="/checks?status=failing">
          {e && e.failing.length === 0 ? (
            <p class="muted">All checks pass.</p>
          ) : (
            <ul class="plain">
              {(e?.failing ?? []).slice(0, 6).map((c) => (
                <li key={c.id}>
                  <a href={`/checks/${c.id}`}>{String(c.name)}</a> <Badge value={c.last_result} />{" "}
                  <span class="muted">{String(c.last_error ?? "")}</span>
                </li>
              ))}
            </ul>
          )}
        </Card>
        <Card title="Ingest (last 5 min)">
          <div class="stats">
            {(e?.ingest ?? []).map(([name, n]) => (
              <Stat key={name} label={name.replace("_", " ")} value={n === null ? "—" : n} />
            ))}
          </div>
        </Card>
      </div>

      <h2>This host</h2>
      {h && (
        <p class="muted">
          {h.hostName} as reported by agent {h.agent}
          {h.deviceId && (
            <>
              {" "}
              · <a href={`/devices/${encodeURIComponent(h.deviceId)}`}>its device</a>
            </>
          )}
        </p>
      )}
      {host.error && <p class="error">{host.error}</p>}
      <div class="grid">
        <Card title="CPU" wide>
          <TimeChart title="CPU usage, average of all cores" series={h ? [h.cpu] : []} unit="%" />
        </Card>
        <Card title="Memory" wide>
          <p>
            {h?.memNow
              ? `${bytes(h.memNow.used_bytes)} of ${bytes(h.memNow.total_bytes)} used (${pct(h.memNow.usage_percent)})`
              : "Waiting for the first sample…"}
          </p>
          <TimeChart title="Memory usage" series={h ? [h.mem] : []} unit="%" />
        </Card>
        <Card title="Disks" wide>
          <DataTable
            caption="Disks of this host"
            rowKey={(r) => String(r.mount_point)}
            rows={h?.disks}
            empty="Waiting for the first sample…"
            columns={[
              { key: "mount_point", label: "Mount" },
              { key: "device_name", label: "Device" },
              { key: "used_bytes", label: "Used", numeric: true, render: (r) => bytes(r.used_bytes) },
              { key: "total_bytes", label: "Size", numeric: true, render: (r) => bytes(r.total_bytes) },
              {
                key: "usage_percent",
                label: "Use",
                numeric: true,
                render: (r) => (
                  <meter
                    min={0}
                    max={100}
                    low={80}
                    high={90}
                    optimum={0}
                    value={Number(r.usage_percent)}
                    title={pct(r.usage_percent)}
                  >
                    {pct(r.usage_percent)}
                  </meter>
                ),
              },
            ]}
          />
        </Card>
        <Card title="Busiest processes" wide>
          <DataTable
            caption="Busiest processes of this host"
            rowKey={(r) => String(r.pid)}
            rows={h?.procs}
            empty="Waiting for the first sample…"
            columns={[
              { key: "pid", label: "PID", numeric: true },
              { key: "name", label: "Name" },
              { key: "cpu_usage", label: "CPU", numeric: true, render: (r) => pct(r.cpu_usage) },
              { key: "memory_usage", label: "Memory", numeric: true, render: (r) => bytes(r.memory_usage) },
            ]}
          />
        </Card>
      </div>

      <h2>Gateways and agents</h2>
      <div class="grid">
        <Card title="Gateways" href="/fleet">
          <ul class="plain">
            {(e?.gateways ?? []).map((g) => (
              <li key={g.id}>
                {g.id} <Badge value={g.status} /> <span class="muted">seen {ago(g.last_seen)}</span>
              </li>
            ))}
          </ul>
        </Card>
        <Card title="Agents" href="/fleet">
          <ul class="plain">
            {(e?.agents ?? []).map((a) => (
              <li key={a.id}>
                {String(a.name ?? a.id)} <Badge value={a.status} />{" "}
                <span class="muted">seen {ago(a.last_seen_time)}</span>
              </li>
            ))}
          </ul>
        </Card>
      </div>
      {estate.error && <p class="error">{estate.error}</p>}
      <p class="muted small">Updates every 10–15 s while this tab is visible.</p>
    </>
  );
}
