import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, api, type QueryResult, srql } from "../api.ts";
import { type Series, TimeChart } from "../components/Chart.tsx";
import { DataTable } from "../components/Table.tsx";
import { ErrorNote } from "../components/Ui.tsx";
import { text } from "../format.ts";
import { usePoll, useUrlState } from "../hooks.ts";

type R = Record<string, unknown>;
interface Catalog {
  control_tokens: string[];
  operators: string[];
  entities: Record<string, { aliases?: string[]; fields: Record<string, string[]> }>;
}

const EXAMPLES = [
  "in:devices is_available:false sort:last_seen:desc limit:50",
  "in:cpu_metrics time:last_1h bucket:1m agg:avg value_field:usage_percent",
  "in:alerts status:pending by:severity",
  "in:services time:last_24h available:false sort:timestamp:desc",
];

/** Completion candidates for the word under the cursor, from the server's catalog. */
function suggest(catalog: Catalog | undefined, query: string, cursor: number): string[] {
  if (!catalog) return [];
  const before = query.slice(0, cursor);
  const word = before.match(/[^\s]*$/)?.[0] ?? "";
  if (word.startsWith("in:")) {
    return Object.keys(catalog.entities)
      .filter((e) => e.startsWith(word.slice(3)))
      .map((e) => `in:${e}`);
  }
  const entity = query.match(/(?:^|\s)in:([a-z_]+)/)?.[1];
  const fields = entity ? Object.values(catalog.entities[entity]?.fields ?? {}).flat() : [];
  const pool = [
    ...catalog.control_tokens,
    ...fields.map((f) => `${f}:`),
    ...fields.map((f) => `sort:${f}:desc`),
  ];
  return word === "" ? [] : [...new Set(pool.filter((t) => t.startsWith(word) && t !== word))].slice(0, 12);
}

function seriesOf(res: QueryResult): Series[] | null {
  const cols = res.viz?.columns ?? [];
  const time = cols.find((c) => c.semantic === "time")?.name;
  const value = cols.find((c) => c.semantic === "value")?.name;
  const series = cols.find((c) => c.semantic === "series")?.name;
  const ts = res.viz?.suggestions.find((s) => s.kind === "timeseries");
  if (!time || !value || !ts) return null;
  const out = new Map<string, Series>();
  for (const r of res.results) {
    const name = series ? String(r[series] ?? value) : String(ts.y ?? value);
    const s = out.get(name) ?? { label: name, points: [] };
    const v = r[String(ts.y ?? value)];
    s.points.push([Date.parse(String(r[time])) / 1000, v === null || v === undefined ? null : Number(v)]);
    out.set(name, s);
  }
  const list = [...out.values()].slice(0, 12);
  for (const s of list) s.points.sort((a, b) => a[0] - b[0]);
  return list;
}

export function QueryExplorer() {
  const [q, setQ] = useUrlState();
  const query = q.q ?? "";
  const [draft, setDraft] = useState(query);
  const [cursorPos, setCursorPos] = useState(0);
  const [page, setPage] = useState<{ cursor?: string; dir?: "next" | "prev" }>({});
  const [result, setResult] = useState<QueryResult>();
  const [error, setError] = useState<{ message: string; position?: number }>();
  const [busy, setBusy] = useState(false);
  const editor = useRef<HTMLTextAreaElement>(null);
  const catalog = usePoll(() => api.get<Catalog>("/api/srql/catalog"), 0, []);
  const hints = useMemo(() => suggest(catalog.data, draft, cursorPos), [catalog.data, draft, cursorPos]);

  // Follow the URL's query when it changes (back/forward, a link), but not on mount: a mount
  // effect runs after paint and would wipe what was typed meanwhile (seen under load in CI).
  const synced = useRef(query);
  useEffect(() => {
    if (synced.current === query) return;
    synced.current = query;
    setDraft(query);
  }, [query]);
  useEffect(() => {
    if (!query) return;
    let alive = true;
    setBusy(true);
    srql(query, page.cursor, page.dir)
      .then((r) => {
        if (!alive) return;
        setResult(r);
        setError(undefined);
      })
      .catch((e) => {
        if (!alive) return;
        setResult(undefined);
        const msg = e instanceof ApiError ? e.problem.message : String(e);
        const pos = msg.match(/at position (\d+)/)?.[1];
        setError({ message: msg, position: pos ? Number(pos) : undefined });
      })
      .finally(() => alive && setBusy(false));
    return () => {
      alive = false;
    };
  }, [query, page]);

  const run = (text: string) => {
    setPage({});
    setQ({ q: text.trim() });
  };
  const accept = (token: string) => {
    const before = draft.slice(0, cursorPos).replace(/[^\s]*$/, token);
    const next = before + draft.slice(cursorPos);
    setDraft(next);
    setCursorPos(before.length);
    editor.current?.focus();
  };
  const series = result ? seriesOf(result) : null;
  const columns = (result?.viz?.columns ?? []).map((c) => ({
    key: c.name,
    label: c.name,
    numeric: c.type === "int" || c.type === "float",
    render: (r: R) => text(r[c.name]),
  }));

  return (
    <>
      <h1>Query</h1>
      <form
        class="query"
        onSubmit={(e) => {
          e.preventDefault();
          run(draft);
        }}
      >
        <label for="srql">SRQL query</label>
        <textarea
          id="srql"
          ref={editor}
          rows={3}
          spellcheck={false}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? "srql-error" : "srql-help"}
          value={draft}
          onInput={(e) => {
            setDraft(e.currentTarget.value);
            setCursorPos(e.currentTarget.selectionStart);
          }}
          onKeyUp={(e) => setCursorPos(e.currentTarget.selectionStart)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
              e.preventDefault();
              run(draft);
            }
            if (e.key === "Tab" && hints[0]) {
              e.preventDefault();
              accept(hints[0]);
            }
          }}
        />
        <small id="srql-help" class="muted">
          Ctrl+Enter runs the query; Tab completes. Entities, fields and operators come from the server's
          catalog.
        </small>
        {hints.length > 0 && (
          <ul class="hints" aria-label="Completions">
            {hints.map((h) => (
              <li key={h}>
                <button type="button" onClick={() => accept(h)}>
                  {h}
                </button>
              </li>
            ))}
          </ul>
        )}
        {error && (
          <div id="srql-error" class="error" role="alert">
            <p>{error.message}</p>
            {error.position !== undefined && (
              <pre class="code">
                {query.slice(0, error.position)}
                <mark>{query.slice(error.position, error.position + 20) || " "}</mark>
                {query.slice(error.position + 20)}
              </pre>
            )}
          </div>
        )}
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            Run
          </button>
        </div>
      </form>
      {!query && (
        <section>
          <h2>Examples</h2>
          <ul class="plain">
            {EXAMPLES.map((x) => (
              <li key={x}>
                <button type="button" class="link" onClick={() => run(x)}>
                  <code>{x}</code>
                </button>
              </li>
            ))}
          </ul>
        </section>
      )}
      <ErrorNote error={catalog.error} />
      {series && series.length > 0 && <TimeChart title={query} series={series} />}
      {result && (
        <>
          <p class="muted" role="status">
            {result.results.length} row{result.results.length === 1 ? "" : "s"}
          </p>
          <DataTable
            caption="Query results"
            rows={result.results as Array<R & { id?: unknown }>}
            rowKey={(_r, i) => String(i)}
            columns={columns}
            empty="No rows."
          />
          <nav class="pager" aria-label="Result pages">
            <button
              type="button"
              disabled={!result.pagination.prev_cursor}
              onClick={() => setPage({ cursor: result.pagination.prev_cursor ?? undefined, dir: "prev" })}
            >
              ← Previous
            </button>
            <button
              type="button"
              disabled={!result.pagination.next_cursor}
              onClick={() => setPage({ cursor: result.pagination.next_cursor ?? undefined, dir: "next" })}
            >
              Next →
            </button>
          </nav>
        </>
      )}
    </>
  );
}
