import { srql } from "../api.ts";
import { TimeChart } from "../components/Chart.tsx";
import { DataTable } from "../components/Table.tsx";
import { ErrorNote } from "../components/Ui.tsx";
import { text } from "../format.ts";
import { usePoll, useUrlState } from "../hooks.ts";
import { MAX_POINTS, metricPointsQuery, parseAttr, seriesOf } from "../metric-series.ts";
import { RangeSelect, rangeKey, rangeSeconds, ServiceInput } from "../telemetry.tsx";

const MAX_SERIES = 12;

export function Metrics() {
  const [q, setQ] = useUrlState();
  const range = rangeKey(q.range);
  const names = usePoll(
    () => srql("in:otel_metric_points time:last_7d by:metric_name limit:1000"),
    60_000,
    [],
  );
  const attr = parseAttr(q.attr);
  const query = metricPointsQuery({ metric: q.metric, service: q.service, attr: q.attr, range });
  const points = usePoll(() => (query ? srql(query) : Promise.resolve(undefined)), 30_000, [query]);
  const rows = points.data?.results ?? [];
  const all = seriesOf(rows);
  const series = all.slice(0, MAX_SERIES);
  const first = rows[0];
  const unit = first && typeof first.unit === "string" && first.unit !== "1" ? first.unit : "";
  const metricNames = (names.data?.results ?? [])
    .map((r) => r.metric_name)
    .filter((n): n is string => typeof n === "string")
    .sort();

  return (
    <>
      <div class="page-head">
        <h1>Metrics</h1>
      </div>
      <search>
        <form
          class="filters"
          onSubmit={(e) => {
            e.preventDefault();
            const f = new FormData(e.currentTarget);
            setQ({
              service: String(f.get("service") ?? "").trim(),
              attr: String(f.get("attr") ?? "").trim(),
            });
          }}
        >
          <label>
            Metric{" "}
            <select value={q.metric ?? ""} onChange={(e) => setQ({ metric: e.currentTarget.value })}>
              <option value="">Pick a metric…</option>
              {q.metric && !metricNames.includes(q.metric) && <option value={q.metric}>{q.metric}</option>}
              {metricNames.map((n) => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
            </select>
          </label>
          <ServiceInput
            label="Service"
            entity="otel_metric_points"
            field="service_name"
            value={q.service ?? ""}
          />
          <label>
            Attribute{" "}
            <input
              name="attr"
              placeholder="key=value"
              defaultValue={q.attr ?? ""}
              size={16}
              aria-invalid={attr === "invalid" ? true : undefined}
            />
          </label>
          <button type="submit">Apply</button>
          <RangeSelect value={range} onChange={(r) => setQ({ range: r })} />
        </form>
      </search>
      <ErrorNote error={names.error ?? points.error} />
      {attr === "invalid" && (
        <ErrorNote error="The attribute filter is key=value; the key is letters, digits, '.', '_' or '-'." />
      )}
      {!q.metric ? (
        <p class="muted">
          {names.data && metricNames.length === 0
            ? "No OTLP metrics received in the last 7 days. Send some to /v1/metrics (or the gRPC receiver)."
            : "Pick a metric to chart its points."}
        </p>
      ) : (
        <>
          <TimeChart
            title={`${q.metric}${unit ? ` (${unit})` : ""}`}
            series={series}
            unit={unit ? ` ${unit}` : ""}
            height={260}
            spanGaps
            xRange={[Date.now() / 1000 - rangeSeconds(range), Date.now() / 1000]}
          />
          {rows.length === MAX_POINTS && (
            <p class="muted small">Only the newest {MAX_POINTS} points are drawn; pick a shorter range.</p>
          )}
          {all.length > MAX_SERIES && (
            <p class="muted small">
              {all.length} series; the first {MAX_SERIES} are drawn. Narrow by service or attribute.
            </p>
          )}
          <DataTable
            caption="Series"
            rows={points.loading && !points.data ? undefined : series.map((s) => ({ id: s.label, s }))}
            empty="No points in this range."
            columns={[
              { key: "id", label: "Series" },
              { key: "n", label: "Points", numeric: true, render: (r) => String(r.s.points.length) },
              {
                key: "last",
                label: "Latest",
                numeric: true,
                render: (r) => text(r.s.points[r.s.points.length - 1]?.[1]),
              },
            ]}
          />
        </>
      )}
    </>
  );
}
