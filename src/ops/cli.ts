/**
 * `netmon backup`, `netmon restore` and `netmon db copy` (issue 19, docs/operations.md).
 * They open the configured database themselves. While a server holds the embedded database,
 * `backup` is forwarded to it over the local channel (src/cli/cli-channel.ts) and runs with the
 * server's open database; `backup --server URL` downloads one over HTTP instead (a remote
 * server). `restore` and `db copy` replace or read a whole database: never inside a server.
 */
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { flag, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { cliIo, cliPath, stderr, stdout } from "../cli/io.ts";
import { type Config, loadConfig } from "../config/config.ts";
import { redactUrl } from "../config/parsers.ts";
import { DatabaseLockedError, type Db } from "../storage/db.ts";
import { migrate } from "../storage/migrate.ts";
import { PgliteDb } from "../storage/pglite/client.ts";
import { PostgresDb } from "../storage/postgres/client.ts";
import { makePrivateDir } from "../storage/private-dir.ts";
import { copyDatabase, restoreBackup, type TableReport } from "./backup.ts";
import { type BackupHeader, readBackupStream, writeBackupFile } from "./backup-file.ts";
import type { DumpSink } from "./dump.ts";

/** CLI connections are named so `restore`/`db copy` can tell running servers ('netmon') apart. */
const CLI_APPLICATION_NAME = "netmon-cli";

async function openConfigured(config: Config, what: string): Promise<Db> {
  if (config.databaseUrl) {
    return PostgresDb.open({
      connectionString: config.databaseUrl,
      poolSize: 2,
      applicationName: CLI_APPLICATION_NAME,
    });
  }
  makePrivateDir(config.dataDir);
  try {
    return await PgliteDb.open({ dataDir: path.join(config.dataDir, "pg") });
  } catch (err) {
    if (err instanceof DatabaseLockedError && what === "backup") {
      throw new DatabaseLockedError(
        `${config.dataDir}/pg (a running server holds it: run 'netmon backup FILE --server URL' with an admin token in NETMON_TOKEN to back it up while it runs)`,
      );
    }
    throw err;
  }
}

/** `--to`: a PostgreSQL URL, or a data directory for an embedded database (`<dir>/pg`). */
async function openTarget(to: string): Promise<{ db: Db; label: string; dataDir?: string }> {
  if (/^postgres(ql)?:\/\//.test(to)) {
    const db = await PostgresDb.open({
      connectionString: to,
      poolSize: 2,
      applicationName: CLI_APPLICATION_NAME,
    });
    return { db, label: redactUrl(to) };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(to)) {
    throw new UsageError(`--to must be a postgres:// URL or a data directory, got ${redactUrl(to)}`);
  }
  const dataDir = cliPath(to);
  makePrivateDir(dataDir);
  return {
    db: await PgliteDb.open({ dataDir: path.join(dataDir, "pg") }),
    label: `pglite:${dataDir}/pg`,
    dataDir,
  };
}

function progress(name: string, rows: number): void {
  stderr(`  ${name.padEnd(40, " ")} ${String(rows).padStart(10, " ")} rows\n`);
}

function printReport(report: readonly TableReport[]): void {
  const width = Math.max(5, ...report.map((r) => r.table.length));
  stdout(`${"table".padEnd(width)}  ${"source".padStart(10)}  ${"target".padStart(10)}  check\n`);
  for (const r of report) {
    stdout(
      `${r.table.padEnd(width)}  ${String(r.expected).padStart(10)}  ${String(r.found).padStart(10)}  ${r.expected === r.found ? "ok" : "MISMATCH"}\n`,
    );
  }
  const total = report.reduce((s, r) => s + r.found, 0);
  stdout(`${report.length} tables, ${total} rows verified\n`);
}

function readKeyFile(file: string): string | null {
  try {
    return fs.readFileSync(file, "utf8").trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

/** Download a backup from a running server, adding the local secret key to its header. */
async function backupFromServer(
  server: string,
  token: string,
  file: string,
  key: string | null,
): Promise<void> {
  let url: URL;
  try {
    url = new URL("/api/admin/backup", server);
  } catch {
    throw new UsageError(`--server is not a URL: ${server}`);
  }
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  if (!res.ok || !res.body) {
    const text = await res.text().catch(() => "");
    throw new Error(`the server answered ${res.status}: ${text.slice(0, 300)}`);
  }
  const tmp = `${file}.${process.pid}.download`;
  await fs.promises.writeFile(tmp, Readable.fromWeb(res.body as import("node:stream/web").ReadableStream), {
    mode: 0o600,
  });
  try {
    // Check it is complete, then rewrite it with the key (the server never sends its key).
    const counting: DumpSink = {
      header: async () => {},
      table: async () => {},
      rows: async () => {},
      endTable: async (n, r) => progress(n, r),
    };
    await readBackupStream(fs.createReadStream(tmp), counting);
    if (key === null) {
      fs.renameSync(tmp, file);
      return;
    }
    await rewriteHeader(tmp, file, (h) => ({ ...h, secret_key: key }));
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

async function rewriteHeader(
  from: string,
  to: string,
  change: (h: BackupHeader) => BackupHeader,
): Promise<void> {
  const zlib = await import("node:zlib");
  const { pipeline } = await import("node:stream/promises");
  const { Transform } = await import("node:stream");
  let first = true;
  let pending = "";
  const edit = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      if (!first) return cb(null, chunk);
      pending += chunk.toString("utf8");
      const nl = pending.indexOf("\n");
      if (nl < 0) return cb();
      first = false;
      const header = change(JSON.parse(pending.slice(0, nl)) as BackupHeader);
      cb(null, Buffer.from(`${JSON.stringify(header)}\n${pending.slice(nl + 1)}`, "utf8"));
    },
  });
  await pipeline(
    fs.createReadStream(from),
    zlib.createGunzip(),
    edit,
    zlib.createGzip(),
    fs.createWriteStream(to, { mode: 0o600 }),
  );
}

export const backupCommand: Command = {
  name: "backup",
  summary: "Write a consistent backup of the database (and the secret key) to FILE",
  usage: `netmon backup FILE [--without-secret-key] [--server URL]

Writes every table of the configured database (DATABASE_URL, or the embedded database in
NETMON_DATA_DIR) to FILE: gzip'd JSON lines, read from one snapshot, so the copy is
consistent even while servers write. The file also holds the instance secret key
(NETMON_SECRET_KEY_FILE) unless --without-secret-key is given; then keep the key file
yourself: without it, restored sessions and API tokens are invalid. FILE is created 0600.
The same file restores into either backend ('netmon restore').

An embedded database can be opened by one process only. While the server runs, add
--server URL (e.g. http://127.0.0.1:4000) and put an admin bearer token in NETMON_TOKEN:
the server writes the snapshot (pausing its own database work meanwhile) and this command
adds the local key file.`,
  booleanFlags: ["without-secret-key"],
  async run(args) {
    const file = args.positionals[0];
    if (!file || args.positionals.length > 1) throw new UsageError("expected one FILE argument");
    const target = cliPath(file);
    // Forwarded to the running server (its embedded database is held): use its database and key.
    const inServer = cliIo().ctx;
    const config = inServer?.config ?? loadConfig();
    const key = flag(args, "without-secret-key") === "true" ? null : readKeyFile(config.secretKeyFile);
    const server = flag(args, "server");
    if (server) {
      const token = inServer ? cliIo().env.NETMON_TOKEN : config.token;
      if (!token) throw new UsageError("--server needs an admin bearer token in NETMON_TOKEN");
      await backupFromServer(server, token, target, key);
    } else if (inServer) {
      await writeBackupFile(inServer.db, target, { secretKey: key, onTable: progress });
    } else {
      const db = await openConfigured(config, "backup");
      try {
        await writeBackupFile(db, target, { secretKey: key, onTable: progress });
      } finally {
        await db.close();
      }
    }
    stdout(
      `backup written to ${target}${key === null ? " (without the secret key: keep NETMON_SECRET_KEY_FILE separately)" : " (with the secret key: keep the file private)"}\n`,
    );
    return 0;
  },
};

export const restoreCommand: Command = {
  name: "restore",
  summary: "Replace the database's contents with a backup FILE (verified per table)",
  usage: `netmon restore FILE [--force] [--keep-secret-key]

Restores a backup made by 'netmon backup' (on either backend) into the configured database
(DATABASE_URL, or the embedded database in NETMON_DATA_DIR): migrates it, empties every
table, loads every row in one transaction and checks each table's count before committing.
Stop the servers first. It refuses a database that already holds users, or a PostgreSQL
database running servers are connected to, unless --force.

When the backup holds the secret key, it is written to NETMON_SECRET_KEY_FILE (a different
key already there is kept beside it as secret.key.replaced-<time>), unless --keep-secret-key.`,
  booleanFlags: ["force", "keep-secret-key"],
  async run(args) {
    const file = args.positionals[0];
    if (!file || args.positionals.length > 1) throw new UsageError("expected one FILE argument");
    if (cliIo().ctx) throw new UsageError("restore replaces the whole database: stop the server first");
    const source = cliPath(file);
    if (!fs.existsSync(source)) throw new UsageError(`no such file: ${file}`);
    const config = loadConfig();
    const db = await openConfigured(config, "restore");
    let header: BackupHeader;
    let report: TableReport[];
    try {
      ({ header, report } = await restoreBackup(db, source, {
        force: flag(args, "force") === "true",
        onTable: progress,
      }));
    } finally {
      await db.close();
    }
    printReport(report);
    if (header.secret_key && flag(args, "keep-secret-key") !== "true") {
      const current = readKeyFile(config.secretKeyFile);
      if (current !== header.secret_key) {
        if (current !== null) {
          const aside = `${config.secretKeyFile}.replaced-${new Date().toISOString().replace(/[:.]/g, "-")}`;
          fs.renameSync(config.secretKeyFile, aside);
          stdout(`the previous secret key was moved to ${aside}\n`);
        }
        fs.mkdirSync(path.dirname(config.secretKeyFile), { recursive: true, mode: 0o700 });
        fs.writeFileSync(config.secretKeyFile, `${header.secret_key}\n`, { mode: 0o600 });
        stdout(`secret key restored to ${config.secretKeyFile}\n`);
      }
    } else if (!header.secret_key) {
      stdout(
        "the backup holds no secret key: start netmon with the key file of the instance that made it, or users must sign in again and API tokens be reissued\n",
      );
    }
    stdout(
      `restored ${file} (made ${header.created_at} by netmon ${header.netmon_version} on ${header.backend})\n`,
    );
    return 0;
  },
};

export const dbCommand: Command = {
  name: "db",
  summary: "Database tools: 'db copy --to postgres://…|DIR' moves every table to another database",
  usage: `netmon db copy --to postgres://user@host/db | DIR [--force]

Copies every table of the configured database (DATABASE_URL, or the embedded database in
NETMON_DATA_DIR) into another one: a PostgreSQL URL, or a data directory for an embedded
database (created as DIR/pg). The target is migrated, emptied, loaded in one transaction
and each table's count is checked against the source (progress on stderr, the check on
stdout). The source is read from one snapshot. Stop the server first when the source is
embedded. It refuses a target that already holds users, or one running servers use, unless
--force.

Afterwards start netmon with DATABASE_URL (or NETMON_DATA_DIR) pointing at the target and
the SAME secret key file (NETMON_SECRET_KEY_FILE); for a directory target the key is copied
to DIR/secret.key when none is there.`,
  booleanFlags: ["force"],
  async run(args) {
    const sub = args.positionals[0];
    if (sub !== "copy" || args.positionals.length > 1)
      throw new UsageError("expected 'netmon db copy --to TARGET'");
    const to = flag(args, "to");
    if (!to) throw new UsageError("--to is required (a postgres:// URL or a data directory)");
    if (cliIo().ctx) throw new UsageError("db copy reads the whole database: stop the server first");
    const config = loadConfig();
    const source = await openConfigured(config, "db copy");
    try {
      await migrate(source);
      const target = await openTarget(to);
      try {
        stderr(`copying to ${target.label}\n`);
        const report = await copyDatabase(source, target.db, {
          force: flag(args, "force") === "true",
          onTable: progress,
        });
        printReport(report);
      } finally {
        await target.db.close();
      }
      if (target.dataDir) {
        const key = path.join(target.dataDir, "secret.key");
        if (!fs.existsSync(key) && fs.existsSync(config.secretKeyFile)) {
          fs.copyFileSync(config.secretKeyFile, key);
          fs.chmodSync(key, 0o600);
          stdout(`secret key copied to ${key}\n`);
        }
      } else {
        stdout(`keep using the secret key file ${config.secretKeyFile} (every replica needs it)\n`);
      }
    } finally {
      await source.close();
    }
    return 0;
  },
};
