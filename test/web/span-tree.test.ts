import { describe, expect, it } from "vitest";
import { placeSpans, type Span } from "../../web/src/span-tree.ts";

/** The console's waterfall layout (web/src/span-tree.ts): pure, so tested without a browser. */
const T0 = 1_700_000_000_000_000_000;
const span = (id: string, parent: string | null, startMs: number, endMs: number, status = 0): Span => ({
  span_id: id,
  parent_span_id: parent,
  start_time_unix_nano: T0 + startMs * 1e6,
  end_time_unix_nano: T0 + endMs * 1e6,
  duration_ms: endMs - startMs,
  status_code: status,
});
const layout = (spans: Span[]) => placeSpans(spans).rows.map((r) => [r.span.span_id, r.depth]);

describe("placeSpans", () => {
  it("puts each parent before its children, children by start time, depth by nesting", () => {
    const spans = [
      span("c2", "root", 50, 90),
      span("g1", "c1", 15, 20),
      span("root", null, 0, 100),
      span("c1", "root", 10, 40, 2),
    ];
    expect(layout(spans)).toEqual([
      ["root", 0],
      ["c1", 1],
      ["g1", 2],
      ["c2", 1],
    ]);
    const { rows, totalMs } = placeSpans(spans);
    expect(totalMs).toBeCloseTo(100, 3);
    const c1 = rows.find((r) => r.span.span_id === "c1");
    expect(c1).toMatchObject({ error: true, durationMs: 30 });
    expect(c1?.offsetMs).toBeCloseTo(10, 3);
  });

  it("shows a span whose parent is missing as a root instead of hiding it", () => {
    expect(layout([span("a", null, 0, 10), span("orphan", "never-arrived", 5, 8)])).toEqual([
      ["a", 0],
      ["orphan", 0],
    ]);
  });

  it("terminates on a parent cycle and on a span naming itself as parent, showing every span once", () => {
    const cycle = [span("x", "y", 0, 10), span("y", "x", 1, 5), span("self", "self", 2, 3)];
    const rows = layout(cycle);
    expect(rows.map((r) => r[0]).sort()).toEqual(["self", "x", "y"]);
    expect(rows.find((r) => r[0] === "self")?.[1]).toBe(0);
  });

  it("copes with an empty trace and missing times", () => {
    expect(placeSpans([])).toEqual({ rows: [], totalMs: 0 });
    const { rows } = placeSpans([{ span_id: "n", duration_ms: null }]);
    expect(rows).toEqual([expect.objectContaining({ depth: 0, offsetMs: 0, durationMs: 0, error: false })]);
  });
});
