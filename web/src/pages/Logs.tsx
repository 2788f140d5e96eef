import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, type Row, v2 } from "../api.ts";
import { DataTable } from "../components/Table.tsx";
import { Badge, Card, ErrorNote } from "../components/Ui.tsx";
import { text, when } from "../format.ts";
import { useUrlState } from "../hooks.ts";
import { RangeSelect, rangeKey, SEVERITIES, ServiceInput, severityTone, sinceIso } from "../telemetry.tsx";

const PAGE = 100;
/** Rows kept on screen while tailing; older ones drop off the bottom. */
const KEEP = 1000;
const TAIL_MS = 2000;
/**
 * The tail asks for rows created since the newest one seen minus this overlap: a transaction
 * that began earlier can commit after a later one we already showed. Seen ids drop repeats.
 */
const OVERLAP_MS = 5000;

type Filters = Record<string, string | undefined>;

function filtersOf(q: Record<string, string>): Filters {
  const min = SEVERITIES.find(([name]) => name === q.severity)?.[1];
  return {
    "filter[severity_number][greater_than_or_equal]": min === undefined ? undefined : String(min),
    "filter[service_name][eq]": q.service || undefined,
    "filter[body][contains]": q.text || undefined,
    "filter[trace_id][eq]": q.trace || undefined,
    "filter[timestamp][greater_than_or_equal]": sinceIso(q.range),
  };
}

function newestCreated(rows: Row[], current: string | undefined): string | undefined {
  let best = current;
  for (const r of rows) {
    const c = typeof r.created_at === "string" ? r.created_at : undefined;
    if (c && (!best || Date.parse(c) > Date.parse(best))) best = c;
  }
  return best;
}

/** True while the table's top has scrolled out of view: the reader is looking at older rows. */
function useScrolledAway(el: { current: HTMLElement | null }): boolean {
  const [away, setAway] = useState(false);
  useEffect(() => {
    const check = () => setAway((el.current?.getBoundingClientRect().top ?? 0) < 0);
    // Capture: scroll events do not bubble, and either the window or a container may scroll.
    document.addEventListener("scroll", check, { capture: true, passive: true });
    return () => document.removeEventListener("scroll", check, { capture: true });
  }, [el]);
  return away;
}

export function Logs() {
  const [q, setQ] = useUrlState();
  const live = q.live === "1";
  const filters = filtersOf(q);
  // The lower time bound moves with the clock; the key must not, or every render reloads.
  const key = JSON.stringify([q.severity, q.service, q.text, q.trace, q.range]);
  const [rows, setRows] = useState<Row[]>();
  const [error, setError] = useState<string>();
  const [selected, setSelected] = useState<Row>();
  const seen = useRef(new Set<string>());
  const newest = useRef<string | undefined>(undefined);
  const top = useRef<HTMLDivElement>(null);
  const away = useScrolledAway(top);

  useEffect(() => {
    let alive = true;
    setRows(undefined);
    v2.list("logs", { ...filters, sort: "-timestamp", "page[limit]": String(PAGE) })
      .then((page) => {
        if (!alive) return;
        seen.current = new Set(page.rows.map((r) => r.id));
        newest.current = newestCreated(page.rows, undefined);
        setRows(page.rows);
        setError(undefined);
      })
      .catch((e) => alive && setError(e instanceof ApiError ? e.problem.message : String(e)));
    return () => {
      alive = false;
    };
  }, [key]);

  const tailing = live && !away && rows !== undefined;
  useEffect(() => {
    if (!tailing) return;
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      if (!document.hidden) {
        const since = newest.current
          ? new Date(Date.parse(newest.current) - OVERLAP_MS).toISOString()
          : undefined;
        try {
          const page = await v2.list("logs", {
            ...filtersOf(q),
            "filter[created_at][greater_than_or_equal]": since,
            sort: "-timestamp",
            "page[limit]": String(PAGE),
          });
          if (!alive) return;
          const fresh = page.rows.filter((r) => !seen.current.has(r.id));
          // The next window starts no earlier than this one, so only this page's ids can repeat:
          // the set stays one page big however long the tail runs.
          seen.current = new Set(page.rows.map((r) => r.id));
          newest.current = newestCreated(page.rows, newest.current);
          if (fresh.length > 0) setRows((old) => [...fresh, ...(old ?? [])].slice(0, KEEP));
          setError(undefined);
        } catch (e) {
          if (alive) setError(e instanceof ApiError ? e.problem.message : String(e));
        }
      }
      if (alive) timer = setTimeout(poll, TAIL_MS);
    };
    timer = setTimeout(poll, TAIL_MS);
    return () => {
      alive = false;
      if (timer) clearTimeout(timer);
    };
  }, [tailing, key]);

  return (
    <>
      <div class="page-head">
        <h1>Logs</h1>
      </div>
      <search>
        <form
          class="filters"
          onSubmit={(e) => {
            e.preventDefault();
            const f = new FormData(e.currentTarget);
            setQ({
              text: String(f.get("text") ?? "").trim(),
              service: String(f.get("service") ?? "").trim(),
            });
          }}
        >
          <label for="log-text" class="sr-only">
            Search log bodies
          </label>
          <input
            id="log-text"
            name="text"
            type="search"
            placeholder="Text in the message"
            defaultValue={q.text ?? ""}
          />
          <ServiceInput label="Service" entity="logs" field="service_name" value={q.service ?? ""} />
          <button type="submit">Search</button>
          <label>
            Severity{" "}
            <select value={q.severity ?? ""} onChange={(e) => setQ({ severity: e.currentTarget.value })}>
              <option value="">Any</option>
              {SEVERITIES.map(([name]) => (
                <option key={name} value={name}>
                  {name} and above
                </option>
              ))}
            </select>
          </label>
          <RangeSelect value={rangeKey(q.range)} onChange={(range) => setQ({ range })} />
          <label class="check">
            <input
              type="checkbox"
              checked={live}
              onChange={(e) => setQ({ live: e.currentTarget.checked ? "1" : undefined })}
            />{" "}
            Live tail
          </label>
        </form>
      </search>
      <p class="muted small" role="status">
        {!live
          ? "Live tail is off."
          : away
            ? "Live tail paused while you read older rows; scroll back to the top to resume."
            : "Live tail: new records appear at the top every 2 s."}
      </p>
      {q.trace && (
        <p>
          Only trace <code>{q.trace}</code>{" "}
          <button type="button" class="link" onClick={() => setQ({ trace: undefined })}>
            Show all traces
          </button>
        </p>
      )}
      <ErrorNote error={error} />
      {selected && <LogDetail row={selected} onClose={() => setSelected(undefined)} />}
      <div ref={top}>
        <DataTable
          caption="Log records"
          rows={rows}
          selected={selected?.id}
          onRowClick={(r) => {
            // Selecting a message's text to copy it is not a request for its detail.
            if (getSelection()?.toString()) return;
            setSelected(r.id === selected?.id ? undefined : r);
          }}
          empty="No log records match."
          columns={[
            {
              key: "timestamp",
              label: "Time",
              render: (r) => (
                <button
                  type="button"
                  class="link"
                  onClick={(e) => {
                    // The row's own click handler would toggle it closed again.
                    e.stopPropagation();
                    setSelected(r);
                  }}
                >
                  {when(r.timestamp)}
                </button>
              ),
            },
            {
              key: "severity_text",
              label: "Severity",
              render: (r) => (
                <Badge
                  value={severityTone(r.severity_number)}
                  label={text(r.severity_text ?? r.severity_number)}
                />
              ),
            },
            { key: "service_name", label: "Service" },
            { key: "host", label: "Host / source", render: (r) => text(r.host ?? r.source_ip ?? r.source) },
            { key: "body", label: "Message", render: (r) => <span class="log-body">{text(r.body)}</span> },
          ]}
        />
      </div>
    </>
  );
}

function LogDetail(props: { row: Row; onClose: () => void }) {
  const r = props.row;
  const box = useRef<HTMLDivElement>(null);
  // The detail sits above the table; a row clicked far down would open it out of sight.
  useEffect(() => box.current?.scrollIntoView({ block: "nearest" }), [r.id]);
  return (
    <div ref={box}>
      <Card title="Log record" wide>
        <dl class="kv">
          <dt>Time</dt>
          <dd>{when(r.timestamp)}</dd>
          <dt>Severity</dt>
          <dd>{text(r.severity_text ?? r.severity_number)}</dd>
          <dt>Service</dt>
          <dd>{text(r.service_name)}</dd>
          <dt>Host / source</dt>
          <dd>
            {text(r.host)} · {text(r.source)} {r.source_ip ? `(${text(r.source_ip)})` : ""}
          </dd>
          <dt>Trace</dt>
          <dd>
            {typeof r.trace_id === "string" && r.trace_id ? (
              <a href={`/traces/${encodeURIComponent(r.trace_id)}`}>View trace {r.trace_id}</a>
            ) : (
              "—"
            )}
          </dd>
        </dl>
        <p>{text(r.body)}</p>
        <h3>Attributes</h3>
        <pre class="code">{JSON.stringify(r.attributes ?? {}, null, 2)}</pre>
        <h3>Resource</h3>
        <pre class="code">{JSON.stringify(r.resource_attributes ?? {}, null, 2)}</pre>
        <button type="button" onClick={props.onClose}>
          Close
        </button>
      </Card>
    </div>
  );
}
