import type { Span, SrqlError } from "./errors.ts";

/** The typed syntax tree of one SRQL query. Every node keeps its source span. */

export interface ScalarValue {
  kind: "scalar";
  value: string;
  quoted: boolean;
  span: Span;
}

export interface ListValue {
  kind: "list";
  items: { value: string; quoted: boolean; span: Span }[];
  span: Span;
}

export type FilterOp = "eq" | "gt" | "gte" | "lt" | "lte" | "contains" | "equals";

export interface FilterNode {
  kind: "filter";
  /** Field name as written (lower-cased, except dynamic JSON keys after the first dot). */
  field: string;
  negated: boolean;
  op: FilterOp;
  value: ScalarValue | ListValue;
  /** The whole token text and span. */
  token: string;
  span: Span;
}

export interface SortNode {
  field: string;
  direction: "asc" | "desc";
  token: string;
  span: Span;
}

export type TimeNode =
  | { kind: "relative"; seconds: number; token: string; span: Span }
  | { kind: "today" | "yesterday"; token: string; span: Span }
  | { kind: "range"; from: string | null; to: string | null; token: string; span: Span };

export interface StatsExpr {
  fn: string;
  arg: string;
  alias: string;
}

export interface StatsNode {
  exprs: StatsExpr[];
  by: string[];
  token: string;
  span: Span;
  /** The text of each `stats:` token as written (entities with their own stats grammar). */
  texts: string[];
  /**
   * The generic grammar's error, held until the entity is known: composite_results answers its
   * own messages for the same text (reference §1.6); every other entity raises this one.
   */
  deferred: SrqlError | null;
}

export interface DownsampleNode {
  bucketSeconds: number | null;
  agg: { fn: "avg" | "min" | "max" | "sum" | "count" | "rate"; token: string; span: Span } | null;
  series: { field: string; token: string; span: Span } | null;
  valueField: { field: string; token: string; span: Span } | null;
  token: string;
  span: Span;
}

export interface QueryAst {
  entity: { name: string; token: string; span: Span } | null;
  filters: FilterNode[];
  sort: SortNode[];
  limit: { value: number; token: string; span: Span } | null;
  time: TimeNode | null;
  stats: StatsNode | null;
  /** `by:` / `group:` control tokens (documented in docs/decisions/0300-srql.md). */
  groupBy: { fields: string[]; token: string; span: Span } | null;
  downsample: DownsampleNode | null;
}
