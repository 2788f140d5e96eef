/**
 * The action runner's state writer (issue 11): the only code that writes a state column.
 *
 * A stateful table is declared once with `stateTable` — its state machine, key, touch column
 * and the columns a transition may change. Declared operations (`runAction`, the v2 routes)
 * apply their `transition` through the engine's update; jobs and domain code that move many
 * records or run below a declared operation (the scheduler, the notifier, the liveness sweep,
 * rollouts) call the three writers here. Either way the transition is checked against the
 * machine and the write is guarded by the state the check saw, so a concurrent change can
 * never slip through and a transition to an undeclared state cannot be written.
 *
 *   transitionRow    one record: lock, check, write (throws NotFound / InvalidTransition)
 *   transitionRows   many records by id or by a condition: one guarded UPDATE, no read first
 *   writeTransitions per-record changes to rows the caller locked (set-based, one UPDATE per
 *                    shape of change)
 *
 * `test/architecture/state-writes.test.ts` holds every other file in src/ to never assigning a
 * declared state column.
 */
import { InvalidTransitionError, NotFoundError } from "../../kernel/errors.ts";
import type { Queryable, Row } from "../../storage/db.ts";
import { ident, isFragment, join, raw, type SqlFragment, sql } from "../../storage/sql.ts";
import { checkTransition, type StateMachine, sourcesOf } from "../state-machine.ts";

export interface StateTableDecl {
  machine: StateMachine;
  table: string;
  /** Key column and its SQL type. */
  key: string;
  keyType: "uuid" | "text" | "bigint";
  /** Column set to the write time on every transition (e.g. updated_at). */
  touch?: string;
  /** Columns a transition may write besides the state, with their SQL types ("jsonb" values are JSON-encoded). */
  columns: Readonly<Record<string, string>>;
}

export interface StateTable extends StateTableDecl {
  /** The state column (the machine's attribute). */
  state: string;
}

const IDENT = /^[a-z_][a-z0-9_]*$/;
const TYPE = /^[a-z][a-z0-9_ ]*(\[\])?$/;
const registry: StateTable[] = [];

/** Declare a stateful table; validated at import (start-up), listed for the state-write test. */
export function stateTable(decl: StateTableDecl): StateTable {
  const state = decl.machine.attribute;
  for (const name of [decl.table, decl.key, state, ...(decl.touch ? [decl.touch] : [])]) {
    if (!IDENT.test(name)) throw new Error(`stateTable ${decl.table}: bad identifier ${name}`);
  }
  for (const [col, type] of Object.entries(decl.columns)) {
    if (!IDENT.test(col) || !TYPE.test(type))
      throw new Error(`stateTable ${decl.table}: bad column ${col} ${type}`);
    if (col === state) throw new Error(`stateTable ${decl.table}: ${state} is written by transitions only`);
  }
  const t = Object.freeze({ ...decl, state });
  registry.push(t);
  return t;
}

/** Every declared stateful table (for the architecture test and docs). */
export function stateTables(): readonly StateTable[] {
  return registry;
}

/**
 * A change: a value for a declared column, or an SQL expression over the row's own columns
 * (from code, e.g. sql`attempts + 1`).
 */
export type Changes = Readonly<Record<string, unknown>>;

function assignments(t: StateTable, to: string | null, changes: Changes, now: Date): SqlFragment {
  const out: SqlFragment[] = [];
  if (to !== null) out.push(sql`${ident(t.state)} = ${to}`);
  for (const [col, v] of Object.entries(changes)) {
    if (v === undefined) continue;
    const type = t.columns[col];
    if (!type) throw new Error(`stateTable ${t.table}: column ${col} is not writable by a transition`);
    out.push(sql`${ident(col)} = ${value(type, v)}`);
  }
  if (t.touch) out.push(sql`${ident(t.touch)} = ${now}`);
  if (out.length === 0) throw new Error(`stateTable ${t.table}: a transition with nothing to write`);
  return join(out);
}

function value(type: string, v: unknown): SqlFragment {
  if (isFragment(v)) return v;
  if (v === null) return sql`NULL`;
  if (type === "jsonb" || type === "json") return sql`CAST(${JSON.stringify(v)} AS ${raw(type)})`;
  return sql`CAST(${v instanceof Date ? v.toISOString() : v} AS ${raw(type)})`;
}

/** The target state of `transition` from any of its sources (null: no state change). */
function targetOf(t: StateTable, transition: string): string | null {
  const decl = t.machine.transitions[transition];
  if (!decl) throw new Error(`state machine ${t.machine.name}: unknown transition ${transition}`);
  return decl.to;
}

/**
 * Lock one record, check `transition` from its current state and write it with `changes` (a
 * function receives the locked row, for changes that depend on it). Returns the updated row.
 */
export async function transitionRow<R extends Row = Row>(
  q: Queryable,
  t: StateTable,
  id: string,
  transition: string,
  changes: Changes | ((row: R) => Changes),
  now: Date,
  opts: { operation?: string } = {},
): Promise<R> {
  const row = await q.one<R>(sql`SELECT * FROM ${ident(t.table)} WHERE ${ident(t.key)} = ${id} FOR UPDATE`);
  if (!row) throw new NotFoundError(`${t.machine.name} '${id}' not found`);
  const current = String(row[t.state] ?? "");
  const to = checkTransition(t.machine, transition, current, opts.operation ?? transition);
  const c = typeof changes === "function" ? changes(row) : changes;
  const updated = await q.one<R>(sql`
    UPDATE ${ident(t.table)} SET ${assignments(t, to === current ? null : to, c, now)}
    WHERE ${ident(t.key)} = ${id} AND ${ident(t.state)} = ${current} RETURNING *`);
  // Only possible outside a transaction: the row moved between the lock and the write.
  if (!updated) throw new InvalidTransitionError(opts.operation ?? transition, current);
  return updated;
}

export type RowsTarget =
  | { ids: readonly string[] }
  | {
      /** Condition on the table's columns (besides the transition's source states). */
      where: SqlFragment;
      orderBy?: SqlFragment;
      limit?: number;
      /** Skip rows another transaction holds (claims by several replicas). */
      skipLocked?: boolean;
    };

/**
 * Apply `transition` to every target record in a state it accepts, in one guarded UPDATE
 * without reading first. Returns the updated rows; a record in another state is left alone
 * (callers that must refuse compare the answer with what they asked for).
 */
export async function transitionRows<R extends Row = Row>(
  q: Queryable,
  t: StateTable,
  transition: string,
  target: RowsTarget,
  changes: Changes,
  now: Date,
): Promise<R[]> {
  const to = targetOf(t, transition);
  const from = [...sourcesOf(t.machine, transition)];
  const set = assignments(t, to, changes, now);
  const inState = sql`${ident(t.state)} = ANY(CAST(${from} AS text[]))`;
  if ("ids" in target) {
    if (target.ids.length === 0) return [];
    return q.many<R>(sql`
      UPDATE ${ident(t.table)} SET ${set}
      WHERE ${ident(t.key)} = ANY(CAST(${[...target.ids]} AS ${raw(`${t.keyType}[]`)})) AND ${inState}
      RETURNING *`);
  }
  const pick = sql`SELECT ${ident(t.key)} FROM ${ident(t.table)} WHERE ${inState} AND (${target.where})${
    target.orderBy ? sql` ORDER BY ${target.orderBy}` : raw("")
  }${target.limit !== undefined ? sql` LIMIT ${target.limit}` : raw("")}${
    target.skipLocked ? raw(" FOR UPDATE SKIP LOCKED") : raw("")
  }`;
  return q.many<R>(sql`
    UPDATE ${ident(t.table)} SET ${set}
    WHERE ${ident(t.key)} IN (${pick}) AND ${inState}
    RETURNING *`);
}

export interface LockedTransition {
  id: string;
  /** The state the caller read under its lock. */
  seen: string;
  /** The transitions to apply in order (e.g. start then complete); checked from `seen`. */
  transitions: readonly string[];
  /** Plain values only (no SQL expressions): rows with the same columns are written together. */
  changes: Changes;
}

/**
 * Write per-record transitions to rows the caller locked (`SELECT … FOR UPDATE` in the same
 * transaction), one UPDATE per shape of change. The answer is aligned with `items`: the updated
 * row, or the error that kept that record unchanged (an illegal transition) — one record's
 * refusal does not stop the others.
 */
export async function writeTransitions<R extends Row = Row>(
  q: Queryable,
  t: StateTable,
  items: readonly LockedTransition[],
  now: Date,
): Promise<(R | Error)[]> {
  const out: (R | Error)[] = new Array(items.length);
  const groups = new Map<
    string,
    { cols: string[]; rows: { i: number; item: LockedTransition; to: string }[] }
  >();
  items.forEach((item, i) => {
    let to = item.seen;
    try {
      for (const tr of item.transitions) to = checkTransition(t.machine, tr, to);
    } catch (err) {
      out[i] = err as Error;
      return;
    }
    const cols = Object.keys(item.changes)
      .filter((k) => item.changes[k] !== undefined)
      .sort();
    for (const c of cols) {
      if (!t.columns[c])
        throw new Error(`stateTable ${t.table}: column ${c} is not writable by a transition`);
      if (isFragment(item.changes[c])) throw new Error(`writeTransitions: ${c} must be a plain value`);
    }
    const key = cols.join(",");
    const g = groups.get(key) ?? { cols, rows: [] };
    g.rows.push({ i, item, to });
    groups.set(key, g);
  });
  for (const { cols, rows } of groups.values()) {
    let updated: R[];
    const only = rows.length === 1 ? rows[0] : undefined;
    if (only) {
      // One record: plain parameters (PGlite plans this in a fraction of the unnest() form).
      updated = await q.many<R>(sql`
        UPDATE ${ident(t.table)} SET ${assignments(t, only.to, pick(only.item.changes, cols), now)}
        WHERE ${ident(t.key)} = ${only.item.id} AND ${ident(t.state)} = ${only.item.seen} RETURNING *`);
    } else {
      const arrays = [
        sql`CAST(${rows.map((r) => r.item.id)} AS ${raw(`${t.keyType}[]`)})`,
        sql`CAST(${rows.map((r) => r.item.seen)} AS text[])`,
        sql`CAST(${rows.map((r) => r.to)} AS text[])`,
        ...cols.map((c) => {
          const type = t.columns[c] as string;
          const vals = rows.map((r) => encodeCell(type, r.item.changes[c]));
          return sql`CAST(${vals} AS ${raw(`${isJson(type) ? "text" : type}[]`)})`;
        }),
      ];
      const names = ["k__", "seen__", "to__", ...cols];
      const set = join([
        sql`${ident(t.state)} = v.to__`,
        ...cols.map(
          (c) =>
            sql`${ident(c)} = v.${ident(c)}${isJson(t.columns[c] as string) ? raw(`::${t.columns[c]}`) : raw("")}`,
        ),
        ...(t.touch ? [sql`${ident(t.touch)} = ${now}`] : []),
      ]);
      updated = await q.many<R>(sql`
        UPDATE ${ident(t.table)} AS p SET ${set}
        FROM unnest(${join(arrays)}) AS v(${raw(names.join(", "))})
        WHERE p.${ident(t.key)} = v.k__ AND p.${ident(t.state)} = v.seen__ RETURNING p.*`);
    }
    const byId = new Map(updated.map((u) => [String(u[t.key]), u]));
    for (const r of rows) {
      const u = byId.get(r.item.id);
      // The caller holds the row lock, so the state cannot have moved: a bug, not a race.
      if (!u) throw new Error(`${t.table} ${r.item.id} changed while locked`);
      out[r.i] = u;
    }
  }
  return out;
}

const isJson = (type: string) => type === "jsonb" || type === "json";

function encodeCell(type: string, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (isJson(type)) return JSON.stringify(v);
  return v instanceof Date ? v.toISOString() : v;
}

function pick(changes: Changes, cols: readonly string[]): Changes {
  const out: Record<string, unknown> = Object.create(null);
  for (const c of cols) out[c] = changes[c];
  return out;
}
