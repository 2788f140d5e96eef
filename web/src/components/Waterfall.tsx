import type { Row } from "../api.ts";

export interface PlacedSpan {
  span: Row;
  depth: number;
  /** Milliseconds from the trace's first start. */
  offsetMs: number;
  durationMs: number;
  error: boolean;
}

/** OTLP Status.code 2 is ERROR. */
export const isErrorSpan = (s: Row): boolean => Number(s.status_code) === 2;

const nanos = (v: unknown): number => (typeof v === "number" ? v : Number(v ?? Number.NaN));

/**
 * Spans in display order: each parent followed by its children (by start time), depth from the
 * nesting. A span whose parent is not in the trace (not yet arrived, or sampled away) is shown
 * as a root rather than hidden; the seen set keeps a malformed parent cycle from looping.
 */
export function placeSpans(spans: Row[]): { rows: PlacedSpan[]; totalMs: number } {
  const starts = spans.map((s) => nanos(s.start_time_unix_nano)).filter(Number.isFinite);
  const ends = spans.map((s) => nanos(s.end_time_unix_nano)).filter(Number.isFinite);
  const t0 = starts.length ? Math.min(...starts) : 0;
  const t1 = ends.length ? Math.max(...ends) : t0;
  const ids = new Set(spans.map((s) => String(s.span_id)));
  const children = new Map<string, Row[]>();
  const roots: Row[] = [];
  for (const s of spans) {
    const parent = typeof s.parent_span_id === "string" ? s.parent_span_id : "";
    if (parent && ids.has(parent) && parent !== s.span_id) {
      const list = children.get(parent) ?? [];
      list.push(s);
      children.set(parent, list);
    } else roots.push(s);
  }
  const byStart = (a: Row, b: Row) => nanos(a.start_time_unix_nano) - nanos(b.start_time_unix_nano);
  const rows: PlacedSpan[] = [];
  const seen = new Set<string>();
  const visit = (s: Row, depth: number) => {
    const id = String(s.span_id);
    if (seen.has(id)) return;
    seen.add(id);
    const start = nanos(s.start_time_unix_nano);
    const end = nanos(s.end_time_unix_nano);
    const duration = Number(s.duration_ms);
    rows.push({
      span: s,
      depth,
      offsetMs: Number.isFinite(start) ? (start - t0) / 1e6 : 0,
      durationMs: Number.isFinite(duration)
        ? duration
        : Number.isFinite(end - start)
          ? (end - start) / 1e6
          : 0,
      error: isErrorSpan(s),
    });
    for (const c of (children.get(id) ?? []).sort(byStart)) visit(c, depth + 1);
  };
  for (const r of roots.sort(byStart)) visit(r, 0);
  // Spans only reachable through a cycle: still shown, at the top level.
  for (const s of spans) visit(s, 0);
  return { rows, totalMs: Math.max((t1 - t0) / 1e6, 0) };
}

const WIDTH = 1000;

function fmtMs(v: number): string {
  if (v >= 1000) return `${(v / 1000).toFixed(2)} s`;
  if (v >= 10) return `${Math.round(v)} ms`;
  return `${v.toFixed(2)} ms`;
}

/** Spans as horizontal bars on the trace's time axis, indented by nesting. */
export function Waterfall(props: { spans: Row[]; selected?: string; onSelect: (span: Row) => void }) {
  const { rows, totalMs } = placeSpans(props.spans);
  const scale = totalMs > 0 ? WIDTH / totalMs : 0;
  return (
    <section class="waterfall" aria-label="Span waterfall">
      <div class="wf-row wf-head" aria-hidden="true">
        <span>Span</span>
        <span class="wf-axis">
          <span>0</span>
          <span>{fmtMs(totalMs / 2)}</span>
          <span>{fmtMs(totalMs)}</span>
        </span>
        <span class="num">Duration</span>
      </div>
      <ul class="plain">
        {rows.map((p) => {
          const id = String(p.span.span_id);
          const x = Math.min(p.offsetMs * scale, WIDTH - 2);
          const w = Math.max(p.durationMs * scale, 2);
          return (
            <li
              key={id}
              class={`wf-row${p.error ? " error" : ""}${props.selected === id ? " selected" : ""}`}
              data-span-id={id}
              data-parent-span-id={text(p.span.parent_span_id)}
              data-depth={p.depth}
            >
              <button
                type="button"
                class="link wf-label"
                style={{ paddingLeft: `${p.depth * 1.25}rem` }}
                aria-pressed={props.selected === id}
                onClick={() => props.onSelect(p.span)}
              >
                <span class="wf-name">{String(p.span.name ?? id)}</span>{" "}
                <span class="muted small">{String(p.span.service_name ?? "")}</span>
                {p.error && <span class="sr-only"> (error)</span>}
              </button>
              <svg
                class="wf-track"
                viewBox={`0 0 ${WIDTH} 12`}
                preserveAspectRatio="none"
                role="img"
                aria-label={`${String(p.span.name ?? id)}: starts at ${fmtMs(p.offsetMs)}, lasts ${fmtMs(p.durationMs)}`}
              >
                <rect
                  class={p.error ? "span-bar error" : "span-bar"}
                  x={x}
                  y={1}
                  width={w}
                  height={10}
                  rx={1}
                />
              </svg>
              <span class="num small">{fmtMs(p.durationMs)}</span>
            </li>
          );
        })}
      </ul>
    </section>
  );
}

function text(v: unknown): string {
  return typeof v === "string" ? v : "";
}
