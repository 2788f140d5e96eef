import { useState } from "preact/hooks";
import { type Row, v2 } from "../api.ts";
import { DataTable } from "../components/Table.tsx";
import { Badge, Card, ErrorNote } from "../components/Ui.tsx";
import { Waterfall } from "../components/Waterfall.tsx";
import { ms, text, when } from "../format.ts";
import { usePoll, useUrlState } from "../hooks.ts";
import { isErrorSpan } from "../span-tree.ts";
import { RangeSelect, rangeKey, ServiceInput, sinceIso } from "../telemetry.tsx";

const LIMIT = 100;
/** OTLP SpanKind numbers. */
const KINDS = ["unspecified", "internal", "server", "client", "producer", "consumer"];

export function Traces() {
  const [q, setQ] = useUrlState();
  const minMs = Number(q.min_ms);
  const list = usePoll(
    () =>
      v2.list("otel_trace_summaries", {
        "filter[root_service_name][eq]": q.service || undefined,
        "filter[duration_ms][greater_than_or_equal]":
          Number.isFinite(minMs) && minMs > 0 ? String(minMs) : undefined,
        "filter[error_count][greater_than]": q.errors === "1" ? "0" : undefined,
        "filter[timestamp][greater_than_or_equal]": sinceIso(q.range),
        sort: q.sort ?? "-timestamp",
        "page[limit]": String(LIMIT),
      }),
    15_000,
    [q.service, q.min_ms, q.errors, q.range, q.sort],
  );
  return (
    <>
      <div class="page-head">
        <h1>Traces</h1>
      </div>
      <search>
        <form
          class="filters"
          onSubmit={(e) => {
            e.preventDefault();
            const f = new FormData(e.currentTarget);
            setQ({
              service: String(f.get("service") ?? "").trim(),
              min_ms: String(f.get("min_ms") ?? "").trim(),
            });
          }}
        >
          <ServiceInput
            label="Root service"
            entity="otel_trace_summaries"
            field="root_service_name"
            value={q.service ?? ""}
          />
          <label>
            Slower than (ms){" "}
            <input name="min_ms" type="number" min="0" step="any" defaultValue={q.min_ms ?? ""} size={6} />
          </label>
          <button type="submit">Filter</button>
          <label class="check">
            <input
              type="checkbox"
              checked={q.errors === "1"}
              onChange={(e) => setQ({ errors: e.currentTarget.checked ? "1" : undefined })}
            />{" "}
            With errors only
          </label>
          <RangeSelect value={rangeKey(q.range)} onChange={(range) => setQ({ range })} />
        </form>
      </search>
      <ErrorNote error={list.error} />
      <DataTable
        caption="Traces"
        rows={list.data?.rows}
        sort={q.sort ?? "-timestamp"}
        onSort={(sort) => setQ({ sort })}
        empty="No traces match."
        columns={[
          { key: "timestamp", label: "Started", sortable: true, render: (r) => when(r.timestamp) },
          {
            key: "root_span_name",
            label: "Root span",
            render: (r) => (
              <a href={`/traces/${encodeURIComponent(String(r.trace_id))}`}>{text(r.root_span_name)}</a>
            ),
          },
          { key: "root_service_name", label: "Service", sortable: true },
          {
            key: "duration_ms",
            label: "Duration",
            sortable: true,
            numeric: true,
            render: (r) => ms(r.duration_ms),
          },
          { key: "span_count", label: "Spans", sortable: true, numeric: true },
          {
            key: "error_count",
            label: "Errors",
            sortable: true,
            render: (r) =>
              Number(r.error_count) > 0 ? <Badge value="error" label={String(r.error_count)} /> : "0",
          },
          { key: "service_set", label: "Services", render: (r) => text(r.service_set) },
        ]}
      />
      {list.data && list.data.rows.length === LIMIT && (
        <p class="muted small">The newest {LIMIT} traces; narrow the filters to see others.</p>
      )}
    </>
  );
}

export function TraceDetail(props: { params?: { id?: string } }) {
  const id = props.params?.id ?? "";
  const [selected, setSelected] = useState<Row>();
  const spans = usePoll(
    () =>
      v2.list("otel_traces", {
        "filter[trace_id][eq]": id,
        sort: "start_time_unix_nano",
        "page[limit]": "1000",
      }),
    0,
    [id],
  );
  const rows = spans.data?.rows;
  const errors = rows?.filter(isErrorSpan).length ?? 0;
  const services = [...new Set((rows ?? []).map((s) => text(s.service_name)))];
  return (
    <>
      <p>
        <a href="/traces">← Traces</a>
      </p>
      <div class="page-head">
        <h1 class="long-id">Trace {id}</h1>
        <a href={`/logs?trace=${encodeURIComponent(id)}&range=7d`}>Logs of this trace</a>
      </div>
      <ErrorNote error={spans.error} />
      {rows === undefined ? (
        <p class="muted">Loading…</p>
      ) : rows.length === 0 ? (
        <p class="muted">No spans stored for this trace (it may have aged out, or not arrived yet).</p>
      ) : (
        <>
          <p class="muted" role="status">
            {rows.length} span{rows.length === 1 ? "" : "s"} · {services.join(", ")}
            {errors > 0 && (
              <>
                {" "}
                · <Badge value="error" label={`${errors} error${errors === 1 ? "" : "s"}`} />
              </>
            )}
            {rows.length === 1000 && " · only the first 1000 spans are shown"}
          </p>
          <Waterfall
            spans={rows}
            selected={selected ? String(selected.span_id) : undefined}
            onSelect={(s) => setSelected(selected?.span_id === s.span_id ? undefined : s)}
          />
          {selected && <SpanDetail span={selected} onClose={() => setSelected(undefined)} />}
        </>
      )}
    </>
  );
}

function SpanDetail(props: { span: Row; onClose: () => void }) {
  const s = props.span;
  const kind = KINDS[Number(s.kind)] ?? text(s.kind);
  return (
    <Card title={`Span ${text(s.name)}`} wide>
      <dl class="kv">
        <dt>Service</dt>
        <dd>{text(s.service_name)}</dd>
        <dt>Kind</dt>
        <dd>{kind}</dd>
        <dt>Duration</dt>
        <dd>{ms(s.duration_ms)}</dd>
        <dt>Status</dt>
        <dd>
          {isErrorSpan(s) ? (
            <Badge value="error" label="error" />
          ) : Number(s.status_code) === 1 ? (
            "ok"
          ) : (
            "unset"
          )}
          {s.status_message ? ` — ${text(s.status_message)}` : ""}
        </dd>
        <dt>Span id</dt>
        <dd>
          <code>{text(s.span_id)}</code>
        </dd>
        <dt>Parent</dt>
        <dd>
          <code>{text(s.parent_span_id)}</code>
        </dd>
      </dl>
      <h3>Attributes</h3>
      <pre class="code">{JSON.stringify(s.attributes ?? {}, null, 2)}</pre>
      <h3>Resource</h3>
      <pre class="code">{JSON.stringify(s.resource_attributes ?? {}, null, 2)}</pre>
      {Array.isArray(s.events) && s.events.length > 0 && (
        <>
          <h3>Events</h3>
          <pre class="code">{JSON.stringify(s.events, null, 2)}</pre>
        </>
      )}
      <button type="button" onClick={props.onClose}>
        Close
      </button>
    </Card>
  );
}
