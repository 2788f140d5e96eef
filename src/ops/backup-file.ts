/**
 * The backup file (decision 0950): gzip-compressed JSON lines, the same on both backends, so
 * a PGlite backup restores into PostgreSQL and back.
 *
 *   {"netmon_backup":1,"created_at":…,"netmon_version":…,"backend":…,"migrations":[…],"tables":[…],"secret_key":…}
 *   {"table":"devices","columns":["uid",…]}
 *   {"r":<the row as PostgreSQL's row_to_json text>}          one line per row
 *   {"end":"devices","rows":1234}
 *   …
 *   {"done":true,"tables":{"devices":1234,…}}
 *
 * A file without its `done` line (a backup cut short) is refused on restore. `secret_key`
 * is the instance key file's content (base64) when the backup was allowed to include it,
 * otherwise null: keep the key file separately then (docs/operations.md).
 */
import fs from "node:fs";
import path from "node:path";
import type { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import zlib from "node:zlib";
import { InvalidRequestError } from "../kernel/errors.ts";
import { VERSION } from "../kernel/version.ts";
import type { Db } from "../storage/db.ts";
import { type DumpHeader, type DumpSink, exportDatabase, type MigrationRecord } from "./dump.ts";

export const BACKUP_FORMAT_VERSION = 1;

export interface BackupHeader extends DumpHeader {
  netmon_backup: number;
  created_at: string;
  netmon_version: string;
  backend: string;
  secret_key: string | null;
}

/**
 * Write one line, waiting for the reader when its buffer is full. Rejects when the stream
 * is closed or fails meanwhile (a download cut off), so the export — and the transaction it
 * holds, on PGlite the only connection — never waits for a reader that is gone.
 */
async function writeLine(out: Writable, line: string): Promise<void> {
  if (out.destroyed) throw new Error("the backup stream was closed before the end");
  if (out.write(`${line}\n`)) return;
  await new Promise<void>((resolve, reject) => {
    const cleanup = () => {
      out.off("drain", onDrain);
      out.off("close", onClose);
      out.off("error", onClose);
    };
    const onDrain = () => {
      cleanup();
      resolve();
    };
    const onClose = () => {
      cleanup();
      reject(new Error("the backup stream was closed before the end"));
    };
    out.on("drain", onDrain);
    out.on("close", onClose);
    out.on("error", onClose);
  });
}

/**
 * Write a backup of `db` as gzip'd JSON lines to `out` (ended when done). `secretKey`: the key
 * file's content to include, or null. Returns the row count per table.
 */
export async function writeBackupStream(
  db: Db,
  out: Writable,
  opts: { secretKey: string | null; onTable?: (name: string, rows: number) => void },
): Promise<Map<string, number>> {
  const gzip = zlib.createGzip();
  const piped = pipeline(gzip, out);
  // A reader that goes away fails the pipeline at once; the export notices on its next write.
  piped.catch(() => {});
  const sink: DumpSink = {
    header: (h) =>
      writeLine(
        gzip,
        JSON.stringify({
          netmon_backup: BACKUP_FORMAT_VERSION,
          created_at: new Date().toISOString(),
          netmon_version: VERSION,
          backend: db.kind,
          migrations: h.migrations,
          tables: h.tables,
          secret_key: opts.secretKey,
        } satisfies BackupHeader),
      ),
    table: (name, columns) => writeLine(gzip, JSON.stringify({ table: name, columns })),
    rows: async (texts) => {
      for (const t of texts) await writeLine(gzip, `{"r":${t}}`);
    },
    endTable: async (name, rows) => {
      await writeLine(gzip, JSON.stringify({ end: name, rows }));
      opts.onTable?.(name, rows);
    },
  };
  try {
    const counts = await exportDatabase(db, sink);
    await writeLine(gzip, JSON.stringify({ done: true, tables: Object.fromEntries(counts) }));
    gzip.end();
    await piped;
    return counts;
  } catch (err) {
    gzip.destroy(err as Error);
    await piped.catch(() => {});
    throw err;
  }
}

/** Write a backup file atomically (a temporary file renamed into place), mode 0600. */
export async function writeBackupFile(
  db: Db,
  file: string,
  opts: { secretKey: string | null; onTable?: (name: string, rows: number) => void },
): Promise<Map<string, number>> {
  const tmp = path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.${process.pid}.partial`);
  const out = fs.createWriteStream(tmp, { mode: 0o600, flags: "wx" });
  try {
    const counts = await writeBackupStream(db, out, opts);
    fs.renameSync(tmp, file);
    return counts;
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

function invalid(message: string): InvalidRequestError {
  return new InvalidRequestError(message, { code: "invalid_backup" });
}

function parseLine(line: string, n: number): Record<string, unknown> {
  try {
    const v = JSON.parse(line) as unknown;
    if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw invalid(`line ${n} is not a backup record`);
}

function assertHeader(v: Record<string, unknown>): BackupHeader {
  if (v.netmon_backup !== BACKUP_FORMAT_VERSION) {
    throw invalid(
      typeof v.netmon_backup === "number"
        ? `backup format ${v.netmon_backup} is not supported (this netmon reads format ${BACKUP_FORMAT_VERSION})`
        : "not a netmon backup file",
    );
  }
  if (!Array.isArray(v.migrations) || !Array.isArray(v.tables))
    throw invalid("the backup header is incomplete");
  return v as unknown as BackupHeader;
}

/**
 * Read a backup from a gzip'd byte stream into `sink`. Throws `InvalidRequestError`
 * (`invalid_backup`) for anything that is not a complete backup file.
 */
export async function readBackupStream(
  input: NodeJS.ReadableStream,
  sink: DumpSink,
  opts: { onHeader?: (h: BackupHeader) => void | Promise<void> } = {},
): Promise<BackupHeader> {
  const gunzip = zlib.createGunzip();
  input.pipe(gunzip);
  (input as NodeJS.ReadableStream & { on(e: "error", f: (err: Error) => void): void }).on("error", (err) =>
    gunzip.destroy(err),
  );
  gunzip.setEncoding("utf8");
  let header: BackupHeader | undefined;
  let done = false;
  let n = 0;
  let rows: string[] = [];
  const flush = async () => {
    if (rows.length > 0) await sink.rows(rows);
    rows = [];
  };
  const handle = async (line: string) => {
    n++;
    if (line === "") return;
    if (!header) {
      header = assertHeader(parseLine(line, n));
      await opts.onHeader?.(header);
      await sink.header({ migrations: header.migrations as MigrationRecord[], tables: header.tables });
      return;
    }
    if (done) throw invalid(`line ${n}: data after the end of the backup`);
    if (line.startsWith('{"r":') && line.endsWith("}")) {
      rows.push(line.slice(5, -1));
      if (rows.length >= 1000) await flush();
      return;
    }
    await flush();
    const v = parseLine(line, n);
    if (typeof v.table === "string" && Array.isArray(v.columns)) {
      await sink.table(
        v.table,
        v.columns.filter((c): c is string => typeof c === "string"),
      );
    } else if (typeof v.end === "string" && typeof v.rows === "number") {
      await sink.endTable(v.end, v.rows);
    } else if (v.done === true) {
      done = true;
    } else {
      throw invalid(`line ${n} is not a backup record`);
    }
  };
  // Async iteration (not readline) so a corrupt or truncated gzip stream rejects here.
  let pending = "";
  try {
    for await (const chunk of gunzip as AsyncIterable<string>) {
      const parts = (pending + chunk).split("\n");
      pending = parts.pop() ?? "";
      for (const line of parts) await handle(line);
    }
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("Z_")) {
      throw invalid(`the file is not a complete gzip'd netmon backup (${(err as Error).message})`);
    }
    throw err;
  }
  if (pending !== "") await handle(pending);
  await flush();
  if (!header) throw invalid("the file is empty");
  if (!done) throw invalid("the backup is incomplete (no end marker): it was cut short");
  return header;
}
