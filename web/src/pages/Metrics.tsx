import { srql } from "../api.ts";
import { type Series, TimeChart } from "../components/Chart.tsx";
import { DataTable } from "../components/Table.tsx";
import { ErrorNote } from "../components/Ui.tsx";
import { text } from "../format.ts";
import { usePoll, useUrlState } from "../hooks.ts";
import { RangeSelect, rangeSeconds, ServiceInput, srqlQuote } from "../telemetry.tsx";

type R = Record<string, unknown>;
/** SRQL's own row cap; a longer range shows its newest points up to this many. */
const MAX_POINTS = 5000;
const MAX_SERIES = 12;
/** Attribute names SRQL accepts after `attributes.`; anything else is refused before sending. */
const ATTR_KEY = /^[A-Za-z0-9_.-]{1,100}$/;

function parseAttr(s: string | undefined): { key: string; value: string } | "invalid" | undefined {
  if (!s) return undefined;
  const eq = s.indexOf("=");
  const key = (eq < 0 ? "" : s.slice(0, eq)).trim();
  if (!ATTR_KEY.test(key)) return "invalid";
  return { key, value: s.slice(eq + 1).trim() };
}

function pointValue(r: R): number | null {
  if (typeof r.value === "number") return r.value;
  // Histograms and summaries carry no single value: plot their mean.
  const count = Number(r.count);
  const sum = Number(r.sum);
  return Number.isFinite(count) && count > 0 && Number.isFinite(sum) ? sum / count : null;
}

/** One series per service and attribute set, named by what differs from the metric itself. */
function seriesOf(rows: R[]): Series[] {
  const out = new Map<string, Series>();
  for (const r of rows) {
    const attrs = r.attributes && typeof r.attributes === "object" ? (r.attributes as R) : {};
    const labels = Object.keys(attrs)
      .sort()
      .map((k) => `${k}=${text(attrs[k])}`)
      .join(", ");
    const name = `${text(r.service_name)}${labels ? ` {${labels}}` : ""}`;
    const s = out.get(name) ?? { label: name, points: [] };
    s.points.push([Date.parse(String(r.timestamp)) / 1000, pointValue(r)]);
    out.set(name, s);
  }
  return [...out.values()];
}

export function Metrics() {
  const [q, setQ] = useUrlState();
  const range = q.range ?? "1h";
  const names = usePoll(
    () => srql("in:otel_metric_points time:last_7d by:metric_name limit:1000"),
    60_000,
    [],
  );
  const attr = parseAttr(q.attr);
  const query = q.metric
    ? [
        "in:otel_metric_points",
        `metric_name:${srqlQuote(q.metric)}`,
        q.service ? `service_name:${srqlQuote(q.service)}` : "",
        attr && attr !== "invalid" ? `attributes.${attr.key}:${srqlQuote(attr.value)}` : "",
        `time:last_${range}`,
        "sort:timestamp:desc",
        `limit:${MAX_POINTS}`,
      ]
        .filter(Boolean)
        .join(" ")
    : "";
  const points = usePoll(
    () => (query && attr !== "invalid" ? srql(query) : Promise.resolve(undefined)),
    30_000,
    [query],
  );
  const rows = points.data?.results ?? [];
  const all = seriesOf(rows);
  for (const s of all) s.points.sort((a, b) => a[0] - b[0]);
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
