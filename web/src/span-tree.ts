/**
 * A trace's spans laid out for the waterfall (pure, no DOM: unit-tested in test/web). Ids and
 * times are as /api/v2/otel_traces serialises them.
 */
export interface Span {
  span_id?: unknown;
  parent_span_id?: unknown;
  start_time_unix_nano?: unknown;
  end_time_unix_nano?: unknown;
  duration_ms?: unknown;
  status_code?: unknown;
  [attr: string]: unknown;
}

export interface PlacedSpan<T extends Span = Span> {
  span: T;
  depth: number;
  /** Milliseconds from the trace's first start. */
  offsetMs: number;
  durationMs: number;
  error: boolean;
}

/** OTLP Status.code 2 is ERROR. */
export const isErrorSpan = (s: Span): boolean => Number(s.status_code) === 2;

const nanos = (v: unknown): number => (typeof v === "number" ? v : Number(v ?? Number.NaN));

/**
 * Spans in display order: each parent followed by its children (by start time), depth from the
 * nesting. A span whose parent is not in the trace (not yet arrived, or sampled away) is shown
 * as a root rather than hidden; the seen set keeps a malformed parent cycle from looping.
 */
export function placeSpans<T extends Span>(spans: T[]): { rows: PlacedSpan<T>[]; totalMs: number } {
  const starts = spans.map((s) => nanos(s.start_time_unix_nano)).filter(Number.isFinite);
  const ends = spans.map((s) => nanos(s.end_time_unix_nano)).filter(Number.isFinite);
  const t0 = starts.length ? Math.min(...starts) : 0;
  const t1 = ends.length ? Math.max(...ends) : t0;
  const ids = new Set(spans.map((s) => String(s.span_id)));
  const children = new Map<string, T[]>();
  const roots: T[] = [];
  for (const s of spans) {
    const parent = typeof s.parent_span_id === "string" ? s.parent_span_id : "";
    if (parent && ids.has(parent) && parent !== s.span_id) {
      const list = children.get(parent) ?? [];
      list.push(s);
      children.set(parent, list);
    } else roots.push(s);
  }
  const byStart = (a: Span, b: Span) => nanos(a.start_time_unix_nano) - nanos(b.start_time_unix_nano);
  const rows: PlacedSpan<T>[] = [];
  const seen = new Set<string>();
  const visit = (s: T, depth: number) => {
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
