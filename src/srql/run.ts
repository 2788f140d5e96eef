import { type Actor, hasPermission } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { AppError, ForbiddenError, InvalidRequestError, ServiceUnavailableError } from "../kernel/errors.ts";
import { DbError } from "../storage/db-error.ts";
import { build, type SqlQuery } from "../storage/sql.ts";
import type { QueryAst } from "./ast.ts";
import { type EntityDecl, type FieldKind, findEntity } from "./catalog.ts";
import {
  compileDownsample,
  compileMatchProbe,
  compileRows,
  compileStats,
  type Direction,
  type Scope,
  substringHazard,
} from "./compiler.ts";
import { cursorKey, decodeCursor, encodeCursor, queryDigest } from "./cursor.ts";
import { SrqlError } from "./errors.ts";
import { parse } from "./parser.ts";
import { MAX_STATS_GROUPS, type Plan, plan } from "./planner.ts";

export const QUERY_PERMISSION = "analytics.view";
export const FORBIDDEN_ENTITY_MESSAGE = "You do not have permission to query this entity";
export const STATEMENT_TIMEOUT_MS = 15_000;

export interface QueryRequest {
  query: string;
  limit?: number | null;
  cursor?: string | null;
  direction?: Direction | null;
  mode?: string | null;
}

export interface VizColumn {
  name: string;
  type: string;
  semantic?: "id" | "time" | "value" | "label" | "series";
}

export interface Viz {
  columns: VizColumn[];
  suggestions: { kind: "timeseries" | "table"; x?: string; y?: string; series?: string }[];
}

export interface QueryResponse {
  results: Record<string, unknown>[];
  pagination: { next_cursor: string | null; prev_cursor: string | null; limit: number };
  viz: Viz | null;
  error: null;
}

/** Parse → plan → SQL, without running it (golden tests, benchmarks, EXPLAIN). */
export interface Translation {
  ast: QueryAst;
  plan: Plan;
  sql: SqlQuery;
  keyColumns: string[];
}

export interface TranslateOptions {
  now: Date;
  partitions?: readonly string[] | null;
  limit?: number | null;
  cursor?: { direction: Direction; values: (string | null)[] } | null;
  direction?: Direction;
}

export function translate(query: string, opts: TranslateOptions): Translation {
  const ast = parse(query);
  const p = plan(ast, { now: opts.now, limit: opts.limit ?? null });
  const scope: Scope = { partitions: opts.partitions ?? null };
  if (p.mode === "rows") {
    const q = compileRows(p, scope, opts.cursor ?? null, opts.direction ?? "next");
    return { ast, plan: p, sql: build(q.sql), keyColumns: q.keyColumns };
  }
  const f = p.mode === "stats" ? compileStats(p, scope) : compileDownsample(p, scope);
  return { ast, plan: p, sql: build(f), keyColumns: [] };
}

const VIZ_TYPE: Record<FieldKind, string> = {
  text: "text",
  ip: "text",
  uuid: "text",
  int: "int",
  float: "float",
  bool: "bool",
  time: "timestamptz",
  text_array: "text_array",
  json: "jsonb",
};

function vizFor(p: Plan): Viz {
  const e = p.entity;
  if (p.mode === "downsample") {
    return {
      columns: [
        { name: "timestamp", type: "timestamptz", semantic: "time" },
        { name: "series", type: "text", semantic: "series" },
        { name: "value", type: "float", semantic: "value" },
      ],
      suggestions: [{ kind: "timeseries", x: "timestamp", y: "value", series: "series" }],
    };
  }
  if (p.mode === "stats") {
    return {
      columns: [
        ...p.groups.map((g) => ({ name: g.name, type: VIZ_TYPE[g.kind], semantic: "label" as const })),
        ...p.countAliases.map((a) => ({ name: a, type: "int", semantic: "value" as const })),
      ],
      suggestions: [{ kind: "table" }],
    };
  }
  const columns: VizColumn[] = e.resultColumns.map((c) => {
    const f = e.fields.get(c);
    const col: VizColumn = { name: c, type: VIZ_TYPE[f?.kind ?? "text"] };
    if (c === e.timeField) col.semantic = "time";
    else if (c === e.tieBreaker) col.semantic = "id";
    else if (e.downsample && c === e.downsample.defaultValue) col.semantic = "value";
    return col;
  });
  const suggestions: Viz["suggestions"] = [];
  if (e.downsample && e.timeField) {
    suggestions.push({
      kind: "timeseries",
      x: e.timeField,
      y: e.downsample.defaultValue,
      ...(e.downsample.defaultSeries ? { series: e.downsample.defaultSeries } : {}),
    });
  }
  suggestions.push({ kind: "table" });
  return { columns, suggestions };
}

/** Check the caller may query `entity`: analytics.view plus the entity's own view permission. */
export function assertMayQuery(actor: Actor, entity: EntityDecl): void {
  if (!hasPermission(actor, QUERY_PERMISSION) || !hasPermission(actor, entity.permission)) {
    throw new ForbiddenError(FORBIDDEN_ENTITY_MESSAGE);
  }
}

function validateRequest(req: QueryRequest): void {
  if (typeof req?.query !== "string" || req.query.trim() === "") {
    throw new InvalidRequestError("missing required field: query", { source: { pointer: "/query" } });
  }
  if (req.limit !== undefined && req.limit !== null) {
    if (typeof req.limit !== "number" || !Number.isInteger(req.limit) || req.limit <= 0) {
      throw new InvalidRequestError("limit must be a positive integer", { source: { pointer: "/limit" } });
    }
  }
  if (req.cursor !== undefined && req.cursor !== null && typeof req.cursor !== "string") {
    throw new InvalidRequestError("cursor must be a string", { source: { pointer: "/cursor" } });
  }
  if (
    req.direction !== undefined &&
    req.direction !== null &&
    req.direction !== "next" &&
    req.direction !== "prev"
  ) {
    throw new InvalidRequestError("direction must be 'next' or 'prev'", {
      source: { pointer: "/direction" },
    });
  }
}

function mapDbError(err: unknown, entity: EntityDecl): never {
  if (err instanceof AppError) throw err;
  if (err instanceof DbError) {
    if (err.code === "57014") {
      throw new ServiceUnavailableError(
        "the query exceeded the statement timeout; narrow it (time:, filters)",
        {
          code: "query_timeout",
        },
      );
    }
    if (err.code === "42P01") {
      throw new ServiceUnavailableError(`storage for entity '${entity.name}' is not available`);
    }
    if (err.code?.startsWith("22")) throw new InvalidRequestError(`invalid value in query: ${err.message}`);
  }
  throw err;
}

/**
 * Aggregations (stats, downsampling) may read a whole table, so they run under a statement
 * timeout (a transaction with SET LOCAL: three extra round trips, small next to their cost).
 * Row pages are LIMIT-bounded keyset reads and run as one statement: the extra round trips
 * would triple the latency of a typical 1 ms page (measured, bench/srql/RESULTS.md).
 */
/**
 * A substring-filtered page sorted by time sorts its matches itself when there are at most this
 * many (a top-N sort of 2,000 rows is ~1 ms); with more, the time index finds a page early.
 */
const FEW_MATCHES = 2000;

async function execute(ctx: AppContext, q: SqlQuery, guarded = false) {
  if (!guarded) return ctx.db.many(q);
  return ctx.db.transaction(async (tx) => {
    await tx.query(`SET LOCAL statement_timeout = ${STATEMENT_TIMEOUT_MS}`);
    return tx.many(q);
  });
}

function rename(row: Record<string, unknown>, keyColumns: string[]): Record<string, unknown> {
  for (const k of keyColumns) delete row[k];
  return row;
}

/**
 * Run one SRQL query for `actor` (the domain function behind POST /api/query, the CLI, MCP and
 * dashboards). Throws AppError: 400 for invalid queries/cursors, 403 for forbidden entities.
 */
export async function runQuery(ctx: AppContext, actor: Actor, req: QueryRequest): Promise<QueryResponse> {
  validateRequest(req);
  const ast = parse(req.query);
  if (!ast.entity) throw new SrqlError("queries must include an in:<entity> token");
  const entity = findEntity(ast.entity.name);
  if (!entity)
    throw new SrqlError(`unsupported entity '${ast.entity.name}'`, ast.entity.token, ast.entity.span);
  assertMayQuery(actor, entity);

  const p = plan(ast, { now: ctx.now(), limit: req.limit ?? null });
  const scope: Scope = { partitions: actor.partitions };
  if (p.mode !== "rows" && req.cursor) {
    throw new InvalidRequestError(
      "stats and downsampled results are complete and never paged; omit the cursor",
      {
        code: "invalid_cursor",
        source: { parameter: "cursor" },
      },
    );
  }

  if (p.mode === "stats") {
    const rows = await execute(ctx, build(compileStats(p, scope)), true).catch((e) => mapDbError(e, entity));
    if (rows.length > MAX_STATS_GROUPS) {
      throw new SrqlError(
        `stats grouping exceeds ${MAX_STATS_GROUPS} groups; narrow the query`,
        p.mode,
        null,
      );
    }
    const results = rows.map((r) => {
      const out: Record<string, unknown> = {};
      p.groups.forEach((g, i) => {
        out[g.name] = r[`__g${i}`] ?? null;
      });
      for (const a of p.countAliases) out[a] = r.__c;
      return out;
    });
    return {
      results,
      pagination: { next_cursor: null, prev_cursor: null, limit: p.limit },
      viz: vizFor(p),
      error: null,
    };
  }

  if (p.mode === "downsample") {
    const rows = await execute(ctx, build(compileDownsample(p, scope)), true).catch((e) =>
      mapDbError(e, entity),
    );
    const results = rows.map((r) => {
      const out: Record<string, unknown> = { timestamp: r.__t, series: r.__s, value: r.__v };
      if (p.series && !(p.series.name in out)) out[p.series.name] = r.__s;
      if (!(p.value.name in out)) out[p.value.name] = r.__v;
      return out;
    });
    return {
      results,
      pagination: { next_cursor: null, prev_cursor: null, limit: p.limit },
      viz: vizFor(p),
      error: null,
    };
  }

  const key = cursorKey(ctx.secretKey);
  const digest = queryDigest(req.query);
  let cursor: { direction: Direction; values: (string | null)[] } | null = null;
  let direction: Direction = "next";
  if (req.cursor) {
    const payload = decodeCursor(key, req.cursor, req.query, p.sort.length);
    direction = req.direction ?? payload.d;
    cursor = { direction, values: payload.k };
  }
  let hideSortIndex = false;
  if (substringHazard(p)) {
    const probe = await ctx.db
      .one<{ n: number }>(build(compileMatchProbe(p, scope, cursor, direction, FEW_MATCHES)))
      .catch((e) => mapDbError(e, entity));
    hideSortIndex = (probe?.n ?? 0) <= FEW_MATCHES;
  }
  const q = compileRows(p, scope, cursor, direction, { hideSortIndex });
  const rows = await execute(ctx, build(q.sql)).catch((e) => mapDbError(e, entity));
  const hasMore = rows.length > p.limit;
  const page = hasMore ? rows.slice(0, p.limit) : rows;
  if (direction === "prev") page.reverse();
  const boundary = (row: Record<string, unknown> | undefined, d: Direction) =>
    row
      ? encodeCursor(key, {
          v: 1,
          q: digest,
          k: q.keyColumns.map((c) => (row[c] ?? null) as string | null),
          d,
        })
      : null;
  const first = page[0];
  const last = page[page.length - 1];
  let next: string | null;
  let prev: string | null;
  if (direction === "next") {
    next = hasMore ? boundary(last, "next") : null;
    prev = cursor ? boundary(first, "prev") : null;
  } else {
    prev = hasMore ? boundary(first, "prev") : null;
    next = boundary(last, "next");
  }
  const results = page.map((r) => rename(r, q.keyColumns));
  return {
    results,
    pagination: { next_cursor: next, prev_cursor: prev, limit: p.limit },
    viz: vizFor(p),
    error: null,
  };
}
