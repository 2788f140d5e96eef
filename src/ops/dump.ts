/**
 * A logical, backend-neutral copy of every netmon table (issue 19, decision 0950): the engine
 * under `netmon backup`, `netmon restore`, `netmon db copy` and `GET /api/admin/backup`.
 *
 * Export reads every table in one REPEATABLE READ, READ ONLY transaction (one snapshot: a
 * consistent copy while the server runs), parents before children, through a cursor, each
 * row as PostgreSQL's own `row_to_json(t)::text`. The text is never parsed in JavaScript: it
 * is handed back to the target as `json_populate_recordset(NULL::table, $1::json)`, so
 * timestamps keep their microseconds, int8 and numeric their digits, bytea its bytes, on
 * PGlite and PostgreSQL alike.
 *
 * Import runs in one transaction on a migrated target: it empties every table, inserts the
 * rows (columns matched by name; generated columns are left to the target), resets the
 * sequences, and verifies each table's count before committing.
 */
import { ConflictError, InvalidRequestError } from "../kernel/errors.ts";
import type { Db, Queryable, Tx } from "../storage/db.ts";
import { loadMigrations } from "../storage/migrate.ts";
import { ident, join, raw, sql } from "../storage/sql.ts";

/** netmon's own bookkeeping: every target has its own, written by its migrations. */
const SKIPPED_TABLES = new Set(["netmon_schema_migrations"]);
const FETCH_ROWS = 2000;
/** Rows per INSERT on import, bounded by size too (one parameter holds the whole batch). */
const BATCH_ROWS = 2000;
const BATCH_BYTES = 4 * 1024 * 1024;

export interface MigrationRecord {
  version: number;
  name: string;
  checksum: string;
}

export interface DumpHeader {
  migrations: MigrationRecord[];
  tables: string[];
}

/** Where an export goes: a backup file, an HTTP response, or another database's import. */
export interface DumpSink {
  header(h: DumpHeader): Promise<void>;
  table(name: string, columns: string[]): Promise<void>;
  /** Rows of the current table, each the JSON text of one row. */
  rows(texts: string[]): Promise<void>;
  endTable(name: string, count: number): Promise<void>;
}

/**
 * Base tables of the current schema, parents before children (by foreign key). A partitioned
 * table is one table (read and loaded through its parent, rows routed by the target's own
 * partitions); its partitions are never listed, or their rows would be copied twice.
 */
export async function listTables(q: Queryable): Promise<string[]> {
  const tables = (
    await q.many<{ name: string }>(sql`
      SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
      ORDER BY c.relname`)
  )
    .map((r) => r.name)
    .filter((t) => !SKIPPED_TABLES.has(t));
  const edges = await q.many<{ child: string; parent: string }>(sql`
    SELECT c.relname AS child, p.relname AS parent FROM pg_constraint k
    JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE k.contype = 'f' AND n.nspname = current_schema() AND c.oid <> p.oid`);
  const parents = new Map<string, Set<string>>(tables.map((t) => [t, new Set()]));
  for (const e of edges) parents.get(e.child)?.add(e.parent);
  const ordered: string[] = [];
  const state = new Map<string, "visiting" | "done">();
  const visit = (t: string) => {
    if (state.get(t) === "done" || state.get(t) === "visiting") return; // a cycle: order arbitrary
    state.set(t, "visiting");
    for (const p of parents.get(t) ?? []) if (parents.has(p)) visit(p);
    state.set(t, "done");
    ordered.push(t);
  };
  for (const t of tables) visit(t);
  return ordered;
}

async function insertableColumns(
  q: Queryable,
  table: string,
): Promise<{ name: string; identity: boolean }[]> {
  const rows = await q.many<{ name: string; identity: string | null }>(sql`
    SELECT column_name AS name, identity_generation AS identity FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = ${table} AND is_generated = 'NEVER'
    ORDER BY ordinal_position`);
  return rows.map((r) => ({ name: r.name, identity: r.identity === "ALWAYS" }));
}

/** Export every table to `sink` from one snapshot. Returns the row count per table. */
export async function exportDatabase(db: Db, sink: DumpSink): Promise<Map<string, number>> {
  return db.transaction(async (tx) => {
    await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
    const migrations = await tx.many<{ version: number; name: string; checksum: string }>(
      "SELECT version, name, checksum FROM netmon_schema_migrations ORDER BY version",
    );
    const tables = await listTables(tx);
    await sink.header({ migrations, tables });
    const counts = new Map<string, number>();
    for (const table of tables) {
      const columns = (await insertableColumns(tx, table)).map((c) => c.name);
      await sink.table(table, columns);
      const list = join(columns.map((c) => ident(c)));
      await tx.query(
        sql`DECLARE netmon_dump NO SCROLL CURSOR FOR SELECT row_to_json(r)::text AS j FROM (SELECT ${list} FROM ${ident(table)}) r`,
      );
      let count = 0;
      for (;;) {
        const batch = await tx.many<{ j: string }>(`FETCH FORWARD ${FETCH_ROWS} FROM netmon_dump`);
        if (batch.length === 0) break;
        count += batch.length;
        await sink.rows(batch.map((r) => r.j));
      }
      await tx.query("CLOSE netmon_dump");
      await sink.endTable(table, count);
      counts.set(table, count);
    }
    return counts;
  });
}

/** Whether the database holds anything an operator made (a user exists). */
export async function hasUserData(q: Queryable): Promise<boolean> {
  const r = await q.one<{ n: number }>("SELECT count(*)::int8 AS n FROM users");
  return Number(r?.n ?? 0) > 0;
}

/**
 * Refuse a dump whose schema this code does not know (made by a newer netmon): its tables
 * could hold columns or meanings this version would silently drop.
 */
export function assertCompatible(h: DumpHeader): void {
  const known = new Map(loadMigrations().map((m) => [m.version, m]));
  const unknown = h.migrations.filter((m) => !known.has(m.version));
  if (unknown.length > 0) {
    throw new InvalidRequestError(
      `the backup was made by a newer netmon (migrations ${unknown.map((m) => `${m.version}_${m.name}`).join(", ")} are unknown here): restore it with that version or later`,
      { code: "backup_too_new" },
    );
  }
}

interface TableState {
  name: string;
  columns: string[];
  identity: boolean;
  rows: string[];
  bytes: number;
  inserted: number;
}

/**
 * A `DumpSink` that writes into a target database inside transaction `tx`: call `begin`
 * with the header, feed it, then `finish` (sequences, verification). The caller owns the
 * transaction, so a failure anywhere rolls the target back to what it was.
 */
export class DumpImporter implements DumpSink {
  #current: TableState | undefined;
  readonly counts = new Map<string, number>();
  #targetTables = new Set<string>();
  #onTable: ((name: string, rows: number) => void) | undefined;

  constructor(
    private readonly tx: Tx,
    opts: { onTable?: (name: string, rows: number) => void } = {},
  ) {
    this.#onTable = opts.onTable;
  }

  async header(h: DumpHeader): Promise<void> {
    assertCompatible(h);
    const tables = await listTables(this.tx);
    this.#targetTables = new Set(tables);
    const missing = h.tables.filter((t) => !this.#targetTables.has(t));
    if (missing.length > 0) {
      throw new InvalidRequestError(`the target has no table ${missing.join(", ")}`, {
        code: "backup_schema_mismatch",
      });
    }
    // Superusers (PGlite always; PostgreSQL as its owner) skip triggers and foreign-key checks
    // while loading, so self-references and cycles load in any order; otherwise parents are
    // loaded first (listTables order), which covers every foreign key netmon declares
    // between tables.
    const su = await this.tx.one<{ su: boolean }>(
      "SELECT rolsuper AS su FROM pg_roles WHERE rolname = current_user",
    );
    if (su?.su) await this.tx.query("SET LOCAL session_replication_role = replica");
    if (tables.length > 0)
      await this.tx.query(sql`TRUNCATE ${join(tables.map((t) => ident(t)))} RESTART IDENTITY`);
  }

  async table(name: string, columns: string[]): Promise<void> {
    if (!this.#targetTables.has(name)) {
      throw new InvalidRequestError(`the backup names an unknown table ${name}`, { code: "invalid_backup" });
    }
    const target = await insertableColumns(this.tx, name);
    const wanted = new Set(columns);
    const shared = target.filter((c) => wanted.has(c.name));
    this.#current = {
      name,
      columns: shared.map((c) => c.name),
      identity: shared.some((c) => c.identity),
      rows: [],
      bytes: 0,
      inserted: 0,
    };
  }

  async rows(texts: string[]): Promise<void> {
    const t = this.#current;
    if (!t) throw new InvalidRequestError("rows before any table", { code: "invalid_backup" });
    for (const text of texts) {
      t.rows.push(text);
      t.bytes += text.length;
      if (t.rows.length >= BATCH_ROWS || t.bytes >= BATCH_BYTES) await this.#flush(t);
    }
  }

  async #flush(t: TableState): Promise<void> {
    if (t.rows.length === 0) return;
    const list = join(t.columns.map((c) => ident(c)));
    const overriding = raw(t.identity ? "OVERRIDING SYSTEM VALUE" : "");
    const res = await this.tx.query(sql`
      INSERT INTO ${ident(t.name)} (${list}) ${overriding}
      SELECT ${list} FROM json_populate_recordset(NULL::${ident(t.name)}, ${`[${t.rows.join(",")}]`}::json)`);
    t.inserted += res.rowCount;
    t.rows = [];
    t.bytes = 0;
  }

  async endTable(name: string, count: number): Promise<void> {
    const t = this.#current;
    if (!t || t.name !== name)
      throw new InvalidRequestError(`unexpected end of ${name}`, { code: "invalid_backup" });
    await this.#flush(t);
    if (t.inserted !== count) {
      throw new ConflictError(`${name}: the backup lists ${count} rows but ${t.inserted} were read`, {
        code: "backup_count_mismatch",
      });
    }
    this.counts.set(name, count);
    this.#current = undefined;
    this.#onTable?.(name, count);
  }

  /** Reset sequences past the loaded ids and check every table's count in the target. */
  async finish(): Promise<{ table: string; expected: number; found: number }[]> {
    const serials = await this.tx.many<{ table: string; column: string }>(sql`
      SELECT table_name AS table, column_name AS column FROM information_schema.columns
      WHERE table_schema = current_schema() AND (column_default LIKE 'nextval(%' OR is_identity = 'YES')`);
    for (const s of serials) {
      if (!this.counts.has(s.table)) continue;
      await this.tx.query(sql`
        SELECT setval(pg_get_serial_sequence(${`"${s.table}"`}, ${s.column}), GREATEST(max(${ident(s.column)}), 1), max(${ident(s.column)}) IS NOT NULL)
        FROM ${ident(s.table)}`);
    }
    const report: { table: string; expected: number; found: number }[] = [];
    for (const [table, expected] of this.counts) {
      const r = await this.tx.one<{ n: number }>(sql`SELECT count(*)::int8 AS n FROM ${ident(table)}`);
      report.push({ table, expected, found: Number(r?.n ?? 0) });
    }
    const bad = report.filter((r) => r.expected !== r.found);
    if (bad.length > 0) {
      throw new ConflictError(
        `verification failed: ${bad.map((b) => `${b.table} expected ${b.expected}, found ${b.found}`).join("; ")}`,
        { code: "backup_count_mismatch" },
      );
    }
    return report;
  }
}
