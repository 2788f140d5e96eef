import type {
  DownsampleNode,
  FilterNode,
  FilterOp,
  ListValue,
  QueryAst,
  ScalarValue,
  SortNode,
  StatsExpr,
  StatsNode,
  TimeNode,
} from "./ast.ts";
import { findEntity } from "./catalog.ts";
import { type Span, SrqlError } from "./errors.ts";
import { indexOutside, type RawToken, splitList, tokenize, unquote } from "./lexer.ts";

/** Lists (IN filters) hold at most this many values (reference §1.3). */
export const MAX_LIST_ITEMS = 200;
export const MAX_STATS_LENGTH = 1024;
const BUCKET_MIN_SECONDS = 1;
const BUCKET_MAX_SECONDS = 31 * 86400;

const IGNORED_KEYS = new Set(["window", "bounded", "mode"]);
/** Keys with a meaning of their own; every other key is a filter field. */
export const RESERVED_KEYS = new Set([
  "in",
  "limit",
  "sort",
  "order",
  "time",
  "timeframe",
  "bucket",
  "downsample",
  "agg",
  "series",
  "value_field",
  "value-field",
  "by",
  "group",
  "stats",
  "rollup_stats",
  "cursor",
  ...IGNORED_KEYS,
]);

interface KeyValue {
  key: string;
  /** Key exactly as written (for dynamic JSON paths, whose casing is kept). */
  rawKey: string;
  negated: boolean;
  value: string;
  valueStart: number;
  token: RawToken;
}

function splitToken(tok: RawToken): KeyValue {
  const colon = indexOutside(tok.text, ":");
  const neq = indexOutside(tok.text, "!=");
  // `field!=value` (the catalog's != operator) when no ':' comes before it.
  if (neq > 0 && (colon < 0 || neq < colon)) {
    const rawKey = tok.text.slice(0, neq).trim();
    return {
      key: rawKey.toLowerCase(),
      rawKey,
      negated: true,
      value: tok.text.slice(neq + 2),
      valueStart: tok.span.start + neq + 2,
      token: tok,
    };
  }
  if (colon < 0) throw new SrqlError("missing ':' in token", tok.text, tok.span);
  let rawKey = tok.text.slice(0, colon).trim();
  let negated = false;
  if (rawKey.startsWith("!")) {
    negated = true;
    rawKey = rawKey.slice(1);
  }
  if (rawKey === "") throw new SrqlError("missing key before ':'", tok.text, tok.span);
  return {
    key: rawKey.toLowerCase(),
    rawKey,
    negated,
    value: tok.text.slice(colon + 1),
    valueStart: tok.span.start + colon + 1,
    token: tok,
  };
}

/** Field names: lower-case, but the key part of a dynamic JSON path keeps its case. */
function fieldName(rawKey: string): string {
  const dot = rawKey.indexOf(".");
  if (dot < 0) return rawKey.toLowerCase();
  return rawKey.slice(0, dot).toLowerCase() + rawKey.slice(dot);
}

function parseValue(text: string, start: number, tok: RawToken): ScalarValue | ListValue {
  const trimmed = text.trim();
  const lead = text.length - text.trimStart().length;
  const s = start + lead;
  const span: Span = { start: s, end: s + trimmed.length };
  if (
    (trimmed.startsWith("(") && trimmed.endsWith(")")) ||
    (trimmed.startsWith("[") && trimmed.endsWith("]"))
  ) {
    const items = splitList(trimmed.slice(1, -1), s + 1)
      .filter((i) => i.text !== "")
      .map((i) => {
        const u = unquote(i.text);
        return { value: u.value, quoted: u.quoted, span: { start: i.start, end: i.start + i.text.length } };
      });
    if (items.length === 0)
      throw new SrqlError("list filters require at least one value", tok.text, tok.span);
    if (items.length > MAX_LIST_ITEMS) {
      throw new SrqlError(`list filters support at most ${MAX_LIST_ITEMS} values`, tok.text, tok.span);
    }
    return { kind: "list", items, span };
  }
  if (trimmed === "") throw new SrqlError("missing value after ':'", tok.text, tok.span);
  const u = unquote(trimmed);
  return { kind: "scalar", value: u.value, quoted: u.quoted, span };
}

function parseFilter(kv: KeyValue): FilterNode {
  let op: FilterOp = "eq";
  let negated = kv.negated;
  let text = kv.value;
  let start = kv.valueStart;
  const advance = (n: number) => {
    text = text.slice(n);
    start += n;
  };
  const lower = text.toLowerCase();
  if (text.startsWith(">=")) {
    op = "gte";
    advance(2);
  } else if (text.startsWith("<=")) {
    op = "lte";
    advance(2);
  } else if (text.startsWith(">")) {
    op = "gt";
    advance(1);
  } else if (text.startsWith("<")) {
    op = "lt";
    advance(1);
  } else if (text.startsWith("!=")) {
    negated = !negated;
    advance(2);
  } else if (lower.startsWith("contains:")) {
    op = "contains";
    advance(9);
  } else if (lower.startsWith("equals:")) {
    op = "equals";
    advance(7);
  }
  const value = parseValue(text, start, kv.token);
  if (value.kind === "list" && op !== "eq") {
    throw new SrqlError(`operator '${op}' does not take a list`, kv.token.text, kv.token.span);
  }
  return {
    kind: "filter",
    field: fieldName(kv.rawKey),
    negated,
    op,
    value,
    token: kv.token.text,
    span: kv.token.span,
  };
}

const UNIT_SECONDS: [RegExp, number][] = [
  [/^(s|sec|secs|second|seconds)$/, 1],
  [/^(m|min|mins|minute|minutes)$/, 60],
  [/^(h|hr|hrs|hour|hours)$/, 3600],
  [/^(d|day|days)$/, 86400],
  [/^(w|wk|week|weeks)$/, 7 * 86400],
  [/^(y|yr|year|years)$/, 365 * 86400],
];

/** Parse `last_30m`, `last 7 days`, `7 Days`, `30d` into seconds, or null. */
export function relativeSeconds(text: string): number | null {
  const m = /^(?:last[_\s-]?)?(\d{1,9})[_\s-]?([a-z]+)$/.exec(text.trim().toLowerCase());
  if (!m) return null;
  const n = Number(m[1]);
  const unit = UNIT_SECONDS.find(([re]) => re.test(m[2] as string));
  if (!unit || n <= 0) return null;
  return n * unit[1];
}

function parseTime(kv: KeyValue): TimeNode {
  const tok = kv.token;
  const raw = kv.value.trim();
  if (raw === "") throw new SrqlError("missing value after ':'", tok.text, tok.span);
  if (raw.startsWith("[") && raw.endsWith("]")) {
    const parts = splitList(raw.slice(1, -1), 0).map((p) => unquote(p.text).value.trim());
    if (parts.length !== 2) throw new SrqlError("invalid time range", tok.text, tok.span);
    const from = parts[0] === "" ? null : (parts[0] as string);
    const to = parts[1] === "" ? null : (parts[1] as string);
    if (from === null && to === null) {
      throw new SrqlError("time range requires at least one bound", tok.text, tok.span);
    }
    return { kind: "range", from, to, token: tok.text, span: tok.span };
  }
  const value = unquote(raw).value.trim().toLowerCase();
  if (value === "today" || value === "yesterday") return { kind: value, token: tok.text, span: tok.span };
  const seconds = relativeSeconds(value);
  if (seconds === null) {
    throw new SrqlError(`unsupported time token '${unquote(raw).value}'`, tok.text, tok.span);
  }
  return { kind: "relative", seconds, token: tok.text, span: tok.span };
}

function parseSort(kv: KeyValue): SortNode[] {
  const tok = kv.token;
  const value = unquote(kv.value.trim()).value;
  const out: SortNode[] = [];
  for (const part of value.split(",")) {
    const p = part.trim();
    if (p === "") continue;
    const [field, dir, extra] = p.split(":").map((s) => s.trim().toLowerCase());
    if (!field || extra !== undefined) throw new SrqlError(`invalid sort key '${p}'`, tok.text, tok.span);
    let direction: "asc" | "desc" = "desc";
    if (dir !== undefined) {
      if (dir !== "asc" && dir !== "desc") {
        throw new SrqlError(`unsupported sort direction '${dir}' (use asc or desc)`, tok.text, tok.span);
      }
      direction = dir;
    }
    out.push({ field, direction, token: tok.text, span: tok.span });
  }
  if (out.length === 0) throw new SrqlError("sort requires a field", tok.text, tok.span);
  return out;
}

function parseBucket(text: string, tok: RawToken): number {
  const v = unquote(text.trim()).value.trim().toLowerCase();
  const m = /^(-?[0-9.]+)([a-z]*)$/.exec(v);
  if (!m || m[2] === "") throw new SrqlError("bucket requires a duration like 5m, 1h", tok.text, tok.span);
  if (!/^-?\d+$/.test(m[1] as string)) {
    throw new SrqlError("bucket duration must be an integer", tok.text, tok.span);
  }
  const n = Number(m[1]);
  if (n <= 0) throw new SrqlError("bucket duration must be positive", tok.text, tok.span);
  const mult = { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as string];
  if (mult === undefined) throw new SrqlError("bucket supports only s|m|h|d suffixes", tok.text, tok.span);
  const seconds = n * mult;
  if (seconds < BUCKET_MIN_SECONDS || seconds > BUCKET_MAX_SECONDS) {
    throw new SrqlError("bucket duration must be between 1s and 31d", tok.text, tok.span);
  }
  return seconds;
}

const STATS_EXPR = /^([a-z_][a-z0-9_]*)\s*\(\s*([^()]*?)\s*\)(?:\s+as\s+(.+))?$/i;
const ALIAS = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Parse `count() as total by type,vendor_name` (reference §1.6). */
export function parseStatsText(text: string, tok: RawToken): { exprs: StatsExpr[]; by: string[] } {
  if (text.length > MAX_STATS_LENGTH) {
    throw new SrqlError(`stats expression must be <= ${MAX_STATS_LENGTH} characters`, tok.text, tok.span);
  }
  let exprText = text.trim();
  let by: string[] = [];
  const byMatch = /\s+by\s+(.*)$/i.exec(exprText) ?? /^by\s+(.*)$/i.exec(exprText);
  if (byMatch) {
    exprText = exprText.slice(0, byMatch.index).trim();
    by = (byMatch[1] as string).split(",").map((f) => f.trim());
    if (by.some((f) => f === ""))
      throw new SrqlError("stats group by field cannot be empty", tok.text, tok.span);
  } else if (/\s+by$/i.test(exprText)) {
    throw new SrqlError("stats group by field cannot be empty", tok.text, tok.span);
  }
  if (exprText === "")
    throw new SrqlError("stats requires an expression such as count()", tok.text, tok.span);
  const exprs: StatsExpr[] = [];
  for (const item of splitList(exprText, 0)) {
    const m = STATS_EXPR.exec(item.text);
    if (!m) {
      if (/\sas\s*$/i.test(item.text) || /\sas\s+\S+\s+\S/i.test(item.text)) {
        throw new SrqlError("stats aliases must be of the form 'stats:expr as alias'", tok.text, tok.span);
      }
      throw new SrqlError(`invalid stats expression '${item.text}'`, tok.text, tok.span);
    }
    const alias = (m[3] ?? "").trim();
    if (m[3] !== undefined && !ALIAS.test(alias)) {
      throw new SrqlError(`stats alias must be alphanumeric: '${alias}'`, tok.text, tok.span);
    }
    exprs.push({ fn: (m[1] as string).toLowerCase(), arg: (m[2] as string).trim(), alias });
  }
  return { exprs, by: by.map((b) => fieldName(b)) };
}

/** Tokens → typed AST. Pure syntax: entity and field names are resolved by the planner. */
export function parse(input: string): QueryAst {
  const tokens = tokenize(input);
  const ast: QueryAst = {
    entity: null,
    filters: [],
    sort: [],
    limit: null,
    time: null,
    stats: null,
    groupBy: null,
    downsample: null,
  };
  let ds: DownsampleNode | null = null;
  const downsample = (tok: RawToken): DownsampleNode => {
    ds ??= {
      bucketSeconds: null,
      agg: null,
      series: null,
      valueField: null,
      token: tok.text,
      span: tok.span,
    };
    return ds;
  };
  for (let i = 0; i < tokens.length; i++) {
    const tok = tokens[i] as RawToken;
    if (tok.text.toLowerCase() === "where") continue;
    const kv = splitToken(tok);
    if (kv.negated && RESERVED_KEYS.has(kv.key)) {
      throw new SrqlError(`'${kv.key}' cannot be negated`, tok.text, tok.span);
    }
    if (kv.negated) {
      ast.filters.push(parseFilter(kv));
      continue;
    }
    switch (kv.key) {
      case "in": {
        const name = unquote(kv.value.trim()).value.trim().toLowerCase();
        if (name === "") throw new SrqlError("missing value after ':'", tok.text, tok.span);
        ast.entity = { name, token: tok.text, span: tok.span };
        break;
      }
      case "limit": {
        const v = unquote(kv.value.trim()).value.trim();
        if (!/^[+-]?\d+$/.test(v)) throw new SrqlError("invalid limit", tok.text, tok.span);
        const n = Number(v);
        if (n <= 0) throw new SrqlError("limit must be a positive integer", tok.text, tok.span);
        ast.limit = { value: n, token: tok.text, span: tok.span };
        break;
      }
      case "sort":
      case "order":
        ast.sort.push(...parseSort(kv));
        break;
      case "time":
      case "timeframe":
        ast.time = parseTime(kv);
        break;
      case "bucket":
      case "downsample":
        downsample(tok).bucketSeconds = parseBucket(kv.value, tok);
        break;
      case "agg": {
        const fn = unquote(kv.value.trim()).value.trim().toLowerCase();
        const norm = fn === "mean" ? "avg" : fn;
        if (!["avg", "min", "max", "sum", "count", "rate"].includes(norm)) {
          throw new SrqlError(`unsupported agg '${fn}' (use avg|min|max|sum|count|rate)`, tok.text, tok.span);
        }
        downsample(tok).agg = { fn: norm as "avg", token: tok.text, span: tok.span };
        break;
      }
      case "series":
      case "value_field":
      case "value-field": {
        const field = fieldName(unquote(kv.value.trim()).value.trim());
        if (field === "") throw new SrqlError("missing value after ':'", tok.text, tok.span);
        if (kv.key === "series") downsample(tok).series = { field, token: tok.text, span: tok.span };
        else downsample(tok).valueField = { field, token: tok.text, span: tok.span };
        break;
      }
      case "by":
      case "group": {
        const fields = unquote(kv.value.trim())
          .value.split(",")
          .map((f) => fieldName(f.trim()));
        if (fields.some((f) => f === ""))
          throw new SrqlError("group field cannot be empty", tok.text, tok.span);
        if (ast.groupBy) {
          for (const f of fields) if (!ast.groupBy.fields.includes(f)) ast.groupBy.fields.push(f);
        } else ast.groupBy = { fields, token: tok.text, span: tok.span };
        break;
      }
      case "stats": {
        // Unquoted form: `stats:count() as total by type` spans following bare tokens.
        let text = unquote(kv.value.trim()).value;
        let end = tok.span.end;
        let tokenText = tok.text;
        for (;;) {
          const next = tokens[i + 1];
          const word = next?.text.toLowerCase();
          if (!next || (word !== "as" && word !== "by")) break;
          const arg = tokens[i + 2];
          if (!arg || indexOutside(arg.text, ":") >= 0) {
            throw new SrqlError(
              word === "as"
                ? "stats aliases must be of the form 'stats:expr as alias'"
                : "stats group by must be of the form 'stats:expr as alias by field'",
              next.text,
              next.span,
            );
          }
          text += ` ${word} ${arg.text}`;
          end = arg.span.end;
          tokenText = input.slice(tok.span.start, end);
          i += 2;
        }
        const span = { start: tok.span.start, end };
        let parsed: { exprs: StatsExpr[]; by: string[] } = { exprs: [], by: [] };
        let deferred: SrqlError | null = null;
        try {
          parsed = parseStatsText(text, { text: tokenText, span });
        } catch (err) {
          if (!(err instanceof SrqlError)) throw err;
          deferred = err;
        }
        if (ast.stats) {
          ast.stats.texts.push(text);
          ast.stats.deferred ??= deferred;
          const a = ast.stats.by.join(",");
          const b = parsed.by.join(",");
          if (parsed.by.length > 0 && ast.stats.by.length > 0 && a !== b) {
            ast.stats.deferred ??= new SrqlError(
              "conflicting 'by' clauses across stats expressions",
              tokenText,
              span,
            );
          }
          ast.stats.exprs.push(...parsed.exprs);
          if (ast.stats.by.length === 0) ast.stats.by = parsed.by;
        } else {
          ast.stats = {
            exprs: parsed.exprs,
            by: parsed.by,
            token: tokenText,
            span,
            texts: [text],
            deferred,
          } satisfies StatsNode;
        }
        break;
      }
      case "rollup_stats":
        throw new SrqlError(
          'rollup_stats is not supported; use stats:"count() by <field>"',
          tok.text,
          tok.span,
        );
      case "cursor":
        throw new SrqlError(
          "cursors go in the request body 'cursor', never in the query text",
          tok.text,
          tok.span,
        );
      default:
        if (IGNORED_KEYS.has(kv.key)) break;
        ast.filters.push(parseFilter(kv));
    }
  }
  ast.downsample = ds;
  if (ast.stats?.deferred && !ownStatsGrammar(ast.entity?.name)) throw ast.stats.deferred;
  return ast;
}

/** Entities whose stats text the planner parses itself (composite_results, reference §1.6). */
export function ownStatsGrammar(entity: string | undefined): boolean {
  return entity !== undefined && (findEntity(entity)?.statsFields ?? null) !== null;
}
