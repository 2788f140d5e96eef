import type { Row } from "../api.ts";
import { placeSpans } from "../span-tree.ts";

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
