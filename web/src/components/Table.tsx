import type { ComponentChildren } from "preact";

export interface Column<T> {
  key: string;
  label: string;
  render?: (row: T) => ComponentChildren;
  sortable?: boolean;
  numeric?: boolean;
}

/** A data table whose sort lives in the URL (`sort=field` / `sort=-field`), as the API takes it. */
export function DataTable<T extends { id?: unknown }>(props: {
  columns: Column<T>[];
  rows: T[] | undefined;
  sort?: string;
  onSort?: (sort: string) => void;
  empty?: string;
  caption: string;
  rowKey?: (row: T, i: number) => string;
  /** Mouse convenience only: give the row a button or link too, for the keyboard. */
  onRowClick?: (row: T) => void;
  /** Key (as rowKey gives it) of the row to mark as selected. */
  selected?: string;
}) {
  const { columns, rows, sort, onSort, caption } = props;
  const desc = sort?.startsWith("-") ?? false;
  const field = sort?.replace(/^-/, "");
  // A scrolling region must be reachable by keyboard (axe: scrollable-region-focusable).
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: the region scrolls horizontally on phones.
    <section class="table-wrap" tabIndex={0} aria-label={caption}>
      <table>
        <caption class="sr-only">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => {
              const active = field === c.key;
              const ariaSort = active ? (desc ? "descending" : "ascending") : undefined;
              return (
                <th key={c.key} scope="col" aria-sort={ariaSort} class={c.numeric ? "num" : undefined}>
                  {c.sortable && onSort ? (
                    <button
                      type="button"
                      class="sort"
                      onClick={() => onSort(active && !desc ? `-${c.key}` : c.key)}
                    >
                      {c.label}
                      <span aria-hidden="true">{active ? (desc ? " ▼" : " ▲") : ""}</span>
                    </button>
                  ) : (
                    c.label
                  )}
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>
          {rows === undefined ? (
            <tr>
              <td colSpan={columns.length} class="muted">
                Loading…
              </td>
            </tr>
          ) : rows.length === 0 ? (
            <tr>
              <td colSpan={columns.length} class="muted">
                {props.empty ?? "Nothing here yet."}
              </td>
            </tr>
          ) : (
            rows.map((r, i) => {
              const key = props.rowKey ? props.rowKey(r, i) : String(r.id ?? i);
              const click = props.onRowClick;
              return (
                <tr
                  key={key}
                  class={
                    [click ? "clickable" : "", props.selected === key ? "selected" : ""].join(" ").trim() ||
                    undefined
                  }
                  onClick={click ? () => click(r) : undefined}
                >
                  {columns.map((c) => (
                    <td key={c.key} class={c.numeric ? "num" : undefined}>
                      {c.render ? c.render(r) : fallback((r as Record<string, unknown>)[c.key])}
                    </td>
                  ))}
                </tr>
              );
            })
          )}
        </tbody>
      </table>
    </section>
  );
}

function fallback(v: unknown): string {
  if (v === null || v === undefined || v === "") return "—";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

export function Pager(props: {
  prev?: string;
  next?: string;
  onPage: (cursor: string, dir: "next" | "prev") => void;
}) {
  return (
    <nav class="pager" aria-label="Pages">
      <button
        type="button"
        disabled={!props.prev}
        onClick={() => props.prev && props.onPage(props.prev, "prev")}
      >
        ← Previous
      </button>
      <button
        type="button"
        disabled={!props.next}
        onClick={() => props.next && props.onPage(props.next, "next")}
      >
        Next →
      </button>
    </nav>
  );
}
