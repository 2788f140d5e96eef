import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { cssVar } from "../theme.ts";

export interface Series {
  label: string;
  /** Unix seconds → value (null = gap). */
  points: Array<[number, number | null]>;
}

const PALETTE = ["--chart-1", "--chart-2", "--chart-3", "--chart-4", "--chart-5", "--chart-6"];

/** Align several series on one x axis (uPlot wants column arrays over a shared x). */
function align(series: Series[]): uPlot.AlignedData {
  const xs = [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const cols = series.map((s) => {
    const col: Array<number | null> = xs.map(() => null);
    for (const [x, y] of s.points) col[index.get(x) ?? 0] = y;
    return col;
  });
  return [xs, ...cols] as uPlot.AlignedData;
}

/** A time-series chart (uPlot) that follows its container's width and the theme's colours. */
export function TimeChart(props: {
  series: Series[];
  height?: number;
  unit?: string;
  title: string;
  sparkline?: boolean;
  /** Fixed x extent in unix seconds (the chosen time range); default: the data's own extent. */
  xRange?: [number, number];
  /**
   * Draw lines across x values where a series has no sample. Series that are sampled at their
   * own instants (OTLP points) need it; a null in a check's history is a real gap.
   */
  spanGaps?: boolean;
}) {
  const box = useRef<HTMLDivElement>(null);
  // Read at draw time, so a range that follows the clock needs no re-creation of the plot.
  const xRange = useRef(props.xRange);
  xRange.current = props.xRange;
  const fixedX = props.xRange !== undefined;
  const plot = useRef<uPlot | undefined>(undefined);
  const { series, height = 180, unit = "", sparkline = false, title } = props;
  const key = series.map((s) => s.label).join("\u0000");
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const fg = cssVar("--fg-muted") || "#666";
    const grid = cssVar("--border") || "#ddd";
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 100),
      height,
      legend: { show: !sparkline && series.length > 1 },
      cursor: { show: !sparkline },
      axes: sparkline
        ? [{ show: false }, { show: false }]
        : [
            { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
            {
              stroke: fg,
              grid: { stroke: grid, width: 1 },
              ticks: { stroke: grid },
              size: 56,
              values: (_u, vals) => vals.map((v) => `${v}${unit}`),
            },
          ],
      series: [
        {},
        ...series.map((s, i) => ({
          label: s.label,
          stroke: cssVar(PALETTE[i % PALETTE.length] ?? "--chart-1") || "#1f6feb",
          width: sparkline ? 1.5 : 2,
          spanGaps: props.spanGaps ?? false,
        })),
      ],
      scales: {
        x: fixedX
          ? { time: true, range: (_u, min, max): uPlot.Range.MinMax => xRange.current ?? [min, max] }
          : { time: true },
      },
    };
    plot.current = new uPlot(opts, align(series), el);
    const ro = new ResizeObserver(() =>
      plot.current?.setSize({ width: Math.max(el.clientWidth, 100), height }),
    );
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = undefined;
    };
  }, [key, height, sparkline, unit, fixedX, props.spanGaps]);

  useEffect(() => {
    plot.current?.setData(align(series));
  }, [series]);

  const empty = series.every((s) => s.points.length === 0);
  return (
    <figure class={sparkline ? "chart spark" : "chart"} aria-label={title}>
      {!sparkline && <figcaption>{title}</figcaption>}
      <div ref={box} role="img" aria-label={`${title} chart`} />
      {empty && !sparkline && <p class="muted">No data yet.</p>}
    </figure>
  );
}
