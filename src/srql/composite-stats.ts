import type { StatsNode } from "./ast.ts";
import { COMPOSITE_STATS_FIELDS, type EntityDecl, type FieldKind } from "./catalog.ts";
import { SrqlError } from "./errors.ts";
import { MAX_STATS_LENGTH } from "./parser.ts";

/**
 * composite_results has its own stats grammar (reference §1.6): exactly `count() as <alias>
 * [by f1,f2]`, with the reference's messages. Grouping by an `input_*` field counts inputs
 * (one row per input of each result, the composite_result_inputs view) instead of results.
 */

/** A group column (the planner's Target, declared here so the planner may import this file). */
interface Target {
  name: string;
  column: string;
  kind: FieldKind;
  nullable: boolean;
}

const ALIAS = /^[A-Za-z_][A-Za-z0-9_]*$/;
const INPUT_TABLE = "composite_result_inputs";

const COLUMNS: Record<string, { column: string; kind: Target["kind"] }> = {
  check: { column: "check_slug", kind: "text" },
  check_slug: { column: "check_slug", kind: "text" },
  check_name: { column: "check_name", kind: "text" },
  verdict: { column: "verdict", kind: "text" },
  status: { column: "status", kind: "text" },
  input_key: { column: "input_key", kind: "text" },
  input_value: { column: "input_value", kind: "text" },
  input_stale: { column: "input_stale", kind: "bool" },
};

export interface CompositeStats {
  groups: Target[];
  alias: string;
  /** The table to count: results, or their inputs when a group field is an input's. */
  table: string;
}

function group(name: string, err: (m: string) => SrqlError): Target {
  const key = name.toLowerCase();
  const f = Object.hasOwn(COLUMNS, key) ? COLUMNS[key] : undefined;
  if (!f) {
    throw err(
      `unsupported stats group field '${name}'. Supported fields: ${COMPOSITE_STATS_FIELDS.join(", ")}`,
    );
  }
  // Rows are keyed by the field as the user named it (`check` or `check_slug`), in lower case.
  return { name: key, column: f.column, kind: f.kind, nullable: false };
}

/** Parse the `stats:` text(s) and the `by:` token of a composite_results query. */
export function planCompositeStats(
  entity: EntityDecl,
  st: StatsNode,
  groupBy: { fields: string[] } | null,
): CompositeStats {
  const err = (m: string) => new SrqlError(m, st.token, st.span);
  let alias = "count";
  let by: string[] = [];
  if (st.texts.length > 0) {
    // Several stats: tokens merge into one comma list, which is not the one allowed form.
    const text = st.texts.join(", ").trim();
    if (text.length > MAX_STATS_LENGTH)
      throw err(`stats expression must be <= ${MAX_STATS_LENGTH} characters`);
    const call = /^([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*([^()]*?)\s*\)([\s\S]*)$/.exec(text);
    if (!call) throw err("composite_results stats must be of the form 'count() as alias'");
    const [, fn, arg, rest] = call as unknown as [string, string, string, string];
    if (fn.toLowerCase() !== "count" || (arg !== "" && arg !== "*")) {
      throw err("composite_results stats only support count()");
    }
    const as = /^\s+as\s+(\S+)([\s\S]*)$/i.exec(rest);
    const [, name, tail] = (as ?? []) as unknown as [string, string, string];
    if (!as || name.includes(",") || tail.trim().startsWith(",")) {
      throw err("composite_results stats must be of the form 'count() as alias'");
    }
    if (!ALIAS.test(name)) throw err("stats alias must be alphanumeric");
    alias = name;
    const trimmed = tail.trim();
    if (trimmed !== "") {
      const m = /^by\s+(\S[\s\S]*)$/i.exec(trimmed);
      if (!m) throw err("expected 'by <field>' after stats alias");
      by = (m[1] as string).split(",").map((f) => f.trim());
      if (by.some((f) => f === "")) throw err("stats group by field cannot be empty");
    }
  }
  if (groupBy) {
    if (by.length > 0 && by.join(",") !== groupBy.fields.join(",")) {
      throw err("conflicting 'by' clauses across stats expressions");
    }
    by = groupBy.fields;
  }
  const groups = by.map((f) => group(f, err));
  if (new Set(groups.map((g) => g.name)).size !== groups.length)
    throw err("stats group fields must be unique");
  if (groups.some((g) => g.name === alias)) throw err("a stats alias may not repeat a group field");
  const inputs = groups.some((g) => g.column.startsWith("input_"));
  return { groups, alias, table: inputs ? INPUT_TABLE : entity.table };
}
