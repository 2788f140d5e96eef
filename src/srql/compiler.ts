import { ident, join, raw, type SqlFragment, sql } from "../storage/sql.ts";
import type { FieldKind } from "./catalog.ts";
import { type Condition, MAX_STATS_GROUPS, type Plan, type SortKey, type Target } from "./planner.ts";

/**
 * Plan → parameterised SQL. Every user value becomes a `$n` parameter; identifiers come only
 * from the catalog through `ident()`, and fixed SQL from this file through `raw()`.
 */

const CAST: Record<FieldKind, string> = {
  text: "text",
  ip: "text",
  int: "bigint",
  float: "double precision",
  bool: "boolean",
  time: "timestamptz",
  uuid: "uuid",
  text_array: "text[]",
  json: "jsonb",
};

export function castOf(kind: FieldKind): SqlFragment {
  return raw(CAST[kind]);
}

export function targetSql(t: Target): SqlFragment {
  if (t.expr) return raw(t.expr);
  if (t.jsonPath) {
    // `attributes.http.method`: a flat key with dots (OTel style) or a nested path.
    if (t.jsonPath.length > 1) {
      return sql`COALESCE(${ident(t.column)} ->> ${t.jsonPath.join(".")}::text, ${ident(t.column)} #>> ${t.jsonPath}::text[])`;
    }
    return sql`(${ident(t.column)} #>> ${t.jsonPath}::text[])`;
  }
  return ident(t.column);
}

function notTrue(f: SqlFragment): SqlFragment {
  return sql`NOT COALESCE(${f}, false)`;
}

function conditionSql(c: Condition): SqlFragment {
  const t = targetSql(c.target);
  switch (c.kind) {
    case "cmp": {
      const v = sql`${c.value}::${castOf(c.target.kind)}`;
      if (c.negated) return sql`${t} IS DISTINCT FROM ${v}`;
      return sql`${t} ${raw(c.op)} ${v}`;
    }
    case "in": {
      const f = c.lower
        ? sql`lower(${t}) = ANY(${c.values}::text[])`
        : sql`${t} = ANY(${c.values}::${castOf(c.target.kind)}[])`;
      return c.negated ? notTrue(f) : f;
    }
    case "like": {
      const subject = c.castText ? sql`(${t})::text` : t;
      const f = sql`${subject} ILIKE ${c.pattern}`;
      return c.negated ? notTrue(f) : f;
    }
    case "array": {
      let f: SqlFragment;
      if (c.json) {
        f =
          c.mode === "all"
            ? sql`${t} @> ${JSON.stringify(c.values)}::jsonb`
            : sql`${t} ?| ${c.values}::text[]`;
      } else f = sql`${t} ${raw(c.mode === "all" ? "@>" : "&&")} ${c.values}::text[]`;
      return c.negated ? notTrue(f) : f;
    }
    case "cidr": {
      const f = sql`netmon_try_inet(${t}) <<= ${c.cidr}::inet`;
      return c.negated ? notTrue(f) : f;
    }
    case "iprange": {
      const f = sql`netmon_try_inet(${t}) BETWEEN ${c.from}::inet AND ${c.to}::inet`;
      return c.negated ? notTrue(f) : f;
    }
    case "composite": {
      // The latest result only: a device that was down and is healthy again no longer matches.
      const latest = sql`(SELECT r.${ident(c.attr)} FROM composite_results r WHERE r.check_slug = ${c.slug} AND r.device_uid = ${ident(c.table, c.target.column)} ORDER BY r.evaluated_at DESC, r.id DESC LIMIT 1)`;
      const f = sql`${latest} = ANY(${c.values}::text[])`;
      return c.negated ? notTrue(f) : f;
    }
  }
}

export interface Scope {
  /** Partitions the caller may see; null = all. */
  partitions: readonly string[] | null;
}

function whereClauses(p: Plan, scope: Scope): SqlFragment[] {
  const out = p.conditions.map(conditionSql);
  const e = p.entity;
  if (e.softDeleteColumn && !p.includeDeleted) out.push(sql`${ident(e.softDeleteColumn)} IS NULL`);
  if (p.time && p.timeTarget) {
    const t = targetSql(p.timeTarget);
    if (p.time.from) out.push(sql`${t} >= ${p.time.from.toISOString()}::timestamptz`);
    if (p.time.to) out.push(sql`${t} < ${p.time.to.toISOString()}::timestamptz`);
  }
  if (scope.partitions !== null && e.partition) {
    const parts = [...scope.partitions];
    if ("column" in e.partition) {
      out.push(sql`${ident(e.partition.column)} = ANY(${parts}::text[])`);
    } else {
      const col = ident(e.table, e.partition.deviceColumn);
      out.push(
        sql`(${col} IS NULL OR EXISTS (SELECT 1 FROM devices d WHERE d.uid = ${col} AND d.partition = ANY(${parts}::text[])))`,
      );
    }
  }
  return out;
}

function whereSql(clauses: SqlFragment[]): SqlFragment {
  return clauses.length === 0 ? raw("") : sql` WHERE ${join(clauses, " AND ")}`;
}

/** Text form of a sort key value, exact enough to round-trip through the cursor. */
function keyText(t: Target): SqlFragment {
  if (t.kind === "time") {
    return sql`to_char(${targetSql(t)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
  }
  return sql`(${targetSql(t)})::text`;
}

export type Direction = "next" | "prev";

export interface RowsQuery {
  sql: SqlFragment;
  /** Names of the hidden key columns, in sort order. */
  keyColumns: string[];
}

function effective(keys: SortKey[], direction: Direction): { t: Target; asc: boolean; nullsLast: boolean }[] {
  return keys.map((k) => {
    const asc = k.direction === "asc";
    return direction === "next"
      ? { t: k.target, asc, nullsLast: true }
      : { t: k.target, asc: !asc, nullsLast: false };
  });
}

function orderSql(keys: ReturnType<typeof effective>, hideIndex = false): SqlFragment {
  return join(
    keys.map(({ t, asc, nullsLast }, i) => {
      const dir = raw(asc ? "ASC" : "DESC");
      // `+ interval '0'` sorts the same values, but no index matches the expression: the
      // planner must find the (few) matching rows first and sort them (see runRows).
      const expr =
        hideIndex && i === 0 && t.kind === "time" ? sql`(${targetSql(t)} + interval '0 s')` : targetSql(t);
      if (!t.nullable) return sql`${expr} ${dir}`;
      return sql`${expr} ${dir} ${raw(nullsLast ? "NULLS LAST" : "NULLS FIRST")}`;
    }),
  );
}

/** Rows strictly after the boundary `values` in the effective order. */
function keysetSql(keys: ReturnType<typeof effective>, values: (string | null)[]): SqlFragment {
  const cast = (i: number) => sql`${values[i]}::${castOf(keys[i]?.t.kind ?? "text")}`;
  const sameDir = keys.every((k) => k.asc === keys[0]?.asc);
  if (sameDir && keys.every((k, i) => !k.t.nullable && values[i] !== null)) {
    const lhs = join(keys.map((k) => targetSql(k.t)));
    const rhs = join(keys.map((_, i) => cast(i)));
    return sql`(${lhs}) ${raw(keys[0]?.asc ? ">" : "<")} (${rhs})`;
  }
  const ors: SqlFragment[] = [];
  const eqs: SqlFragment[] = [];
  keys.forEach((k, i) => {
    const col = targetSql(k.t);
    const v = values[i] ?? null;
    let after: SqlFragment | null;
    let eq: SqlFragment;
    if (v === null) {
      after = k.nullsLast ? null : sql`${col} IS NOT NULL`;
      eq = sql`${col} IS NULL`;
    } else {
      const cmp = sql`${col} ${raw(k.asc ? ">" : "<")} ${cast(i)}`;
      after = k.t.nullable && k.nullsLast ? sql`(${cmp} OR ${col} IS NULL)` : cmp;
      eq = sql`${col} = ${cast(i)}`;
    }
    if (after) ors.push(eqs.length ? sql`(${join([...eqs, after], " AND ")})` : after);
    eqs.push(eq);
  });
  return ors.length === 0 ? raw("false") : sql`(${join(ors, " OR ")})`;
}

/**
 * A substring match (`hostname:%host-0001%`) sorted by a time column with a LIMIT is a plan
 * hazard: the planner walks the time index expecting matches spread evenly over time, and when
 * the matches are the oldest rows it reads (and discards) almost the whole table. For such a
 * page the runner first counts matches up to a cap (`compileMatchProbe`); when there are few,
 * it sorts them without the index (`hideSortIndex`).
 */
export function substringHazard(p: Extract<Plan, { mode: "rows" }>): boolean {
  return (
    p.sort[0]?.target.kind === "time" &&
    p.conditions.some((c) => c.kind === "like" && !c.negated && c.pattern.startsWith("%"))
  );
}

/** `SELECT count(*)` of the page's matching rows, counting at most `cap + 1`. */
export function compileMatchProbe(
  p: Extract<Plan, { mode: "rows" }>,
  scope: Scope,
  cursor: { direction: Direction; values: (string | null)[] } | null,
  direction: Direction,
  cap: number,
): SqlFragment {
  const clauses = whereClauses(p, scope);
  if (cursor) clauses.push(keysetSql(effective(p.sort, direction), cursor.values));
  return sql`SELECT count(*)::int AS n FROM (SELECT 1 FROM ${ident(p.entity.table)}${whereSql(clauses)} LIMIT ${cap + 1}) AS m`;
}

export function compileRows(
  p: Extract<Plan, { mode: "rows" }>,
  scope: Scope,
  cursor: { direction: Direction; values: (string | null)[] } | null,
  direction: Direction,
  opts: { hideSortIndex?: boolean } = {},
): RowsQuery {
  const keys = effective(p.sort, direction);
  const clauses = whereClauses(p, scope);
  if (cursor) clauses.push(keysetSql(keys, cursor.values));
  const keyColumns = keys.map((_, i) => `__k${i}`);
  const select = join([
    ...p.entity.resultColumns.map((c) => ident(c)),
    ...keys.map((k, i) => sql`${keyText(k.t)} AS ${ident(keyColumns[i] as string)}`),
  ]);
  return {
    sql: sql`SELECT ${select} FROM ${ident(p.entity.table)}${whereSql(clauses)} ORDER BY ${orderSql(keys, opts.hideSortIndex)} LIMIT ${p.limit + 1}`,
    keyColumns,
  };
}

export function compileStats(p: Extract<Plan, { mode: "stats" }>, scope: Scope): SqlFragment {
  const groups = p.groups.map((g, i) => sql`${targetSql(g)} AS ${ident(`__g${i}`)}`);
  const select = join([...groups, raw(`count(*) AS "__c"`)]);
  const where = whereSql(whereClauses(p, scope));
  const from = sql`FROM ${ident(p.entity.table)}${where}`;
  if (p.groups.length === 0) return sql`SELECT ${select} ${from}`;
  const positions = p.groups.map((_, i) => raw(String(i + 1)));
  const order: SqlFragment[] = p.order.map((o) => {
    const dir = raw(o.direction === "asc" ? "ASC" : "DESC");
    if (o.target.column === "") return sql`"__c" ${dir}`;
    const idx = p.groups.indexOf(o.target);
    return sql`${raw(String(idx + 1))} ${dir} NULLS LAST`;
  });
  if (p.order.length === 0) order.push(raw(`"__c" DESC`));
  order.push(...positions.map((pos) => sql`${pos} ASC NULLS LAST`));
  return sql`SELECT ${select} ${from} GROUP BY ${join(positions)} ORDER BY ${join(order)} LIMIT ${MAX_STATS_GROUPS + 1}`;
}

export function compileDownsample(p: Extract<Plan, { mode: "downsample" }>, scope: Scope): SqlFragment {
  const ts = targetSql(p.timeTarget);
  const v = targetSql(p.value);
  const bucket = sql`date_bin(${p.bucketSeconds}::double precision * interval '1 second', ${ts}, TIMESTAMPTZ '2000-01-01 00:00:00+00')`;
  const series = p.series ? sql`(${targetSql(p.series)})::text` : raw("NULL::text");
  let value: SqlFragment;
  switch (p.agg) {
    case "rate":
      value = sql`((max(${v}) - min(${v}))::double precision / ${p.bucketSeconds}::double precision)`;
      break;
    case "count":
      value = sql`count(${v})::double precision`;
      break;
    default:
      value = sql`${raw(p.agg)}(${v})::double precision`;
  }
  const where = whereSql(whereClauses(p, scope));
  const dir = raw(p.direction === "asc" ? "ASC" : "DESC");
  return sql`SELECT ${bucket} AS "__t", ${series} AS "__s", ${value} AS "__v" FROM ${ident(p.entity.table)}${where} GROUP BY 1, 2 ORDER BY 1 ${dir}, 2 ASC NULLS LAST LIMIT ${p.limit}`;
}
