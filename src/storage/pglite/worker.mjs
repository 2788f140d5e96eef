// PGlite host, run in a worker thread so long queries never block the HTTP event loop.
// Plain JavaScript on purpose: it must load the same way under tsx, vitest and plain node.
// Protocol: parent posts {id, op, ...}; worker answers {id, ok, result} or {id, ok:false, error}.
import fs from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import { PGlite } from "@electric-sql/pglite";
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm";

const { dataDir, loadDataDir, sharedBuffersMb } = workerData;

// PGlite's file system layer (Emscripten NODEFS) chmods every file to the WASM-side mode
// (0666/0777), which the process umask does not touch. The data directory must stay private
// (issue 10): mask group/other bits off every mode this thread's fs module is asked to set.
// Worker threads have their own module instances, so this touches only the database thread.
const PRIVATE = 0o700;
const mask = (mode) => (typeof mode === "number" ? mode & PRIVATE : mode);
for (const name of ["chmodSync", "fchmodSync", "lchmodSync"]) {
  const real = fs[name];
  if (typeof real === "function") fs[name] = (target, mode) => real(target, mask(mode));
}
{
  const realOpen = fs.openSync;
  fs.openSync = (p, flags, mode) => realOpen(p, flags, mode === undefined ? 0o600 : mask(mode));
  const realMkdir = fs.mkdirSync;
  fs.mkdirSync = (p, opts) =>
    realMkdir(
      p,
      typeof opts === "number" ? mask(opts) : { ...(opts ?? {}), mode: mask(opts?.mode ?? 0o700) },
    );
}

let db;
const ready = (async () => {
  // int8 as a number, as the PostgreSQL driver does (src/storage/postgres/client.ts): PGlite's
  // default returns a BigInt past 2^53 (OTLP's unix-nanosecond columns), which JSON cannot
  // serialise — /api/query answered 500 for spans.
  const opts = {
    extensions: { pg_trgm },
    parsers: { 20: (v) => Number(v) },
    // WAL kept to ~256 MB (PostgreSQL's default lets it reach 1 GB, most of a small install's
    // disk; a 100k-device ingest left 337 MB). These are server-start settings: a session SET
    // is refused ("cannot be changed now"), which the start used to swallow.
    startParams: [
      ...PGlite.defaultStartParams,
      "-c",
      `shared_buffers=${Number(sharedBuffersMb)}MB`,
      "-c",
      "max_wal_size=256MB",
      "-c",
      "min_wal_size=64MB",
    ],
  };
  if (dataDir) opts.dataDir = dataDir;
  if (loadDataDir) opts.loadDataDir = new Blob([loadDataDir]);
  db = await PGlite.create(opts);
})();

// PGlite's file system reports WASI errno numbers on a bare ErrnoError (no message).
const WASI_ERRNO = {
  2: "EACCES",
  19: "EDQUOT",
  29: "EIO",
  44: "ENOENT",
  51: "ENOSPC",
  63: "EPERM",
  69: "EROFS",
};

function serializeError(err) {
  if (err?.name === "ErrnoError" && typeof err.errno === "number") {
    const code = WASI_ERRNO[err.errno] ?? `ERRNO_${err.errno}`;
    const why =
      code === "ENOSPC"
        ? "no space left on device"
        : code === "EACCES" || code === "EPERM"
          ? "permission denied"
          : "file system error";
    return { message: `cannot write the database files: ${why} (${code})`, code };
  }
  return {
    message: err?.message ?? String(err),
    code: err?.code,
    detail: err?.detail,
    constraint: err?.constraint,
    table: err?.table,
    column: err?.column,
    position: err?.position,
  };
}

const unlisten = new Map();

async function handle(msg) {
  await ready;
  switch (msg.op) {
    case "query": {
      const r = await db.query(msg.text, msg.values ?? []);
      return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
    }
    case "copy": {
      const r = await db.query(msg.text, [], { blob: new Blob([msg.data]) });
      return r.affectedRows ?? 0;
    }
    case "exec": {
      await db.exec(msg.text);
      return null;
    }
    case "listen": {
      // Notifications go to the parent as {notify, payload}, posted while PGlite handles the
      // statement that raised them — so before that statement's own result.
      const channel = msg.channel;
      if (!unlisten.has(channel)) {
        unlisten.set(
          channel,
          await db.listen(channel, (payload) => parentPort.postMessage({ notify: channel, payload })),
        );
      }
      return null;
    }
    case "unlisten": {
      const stop = unlisten.get(msg.channel);
      unlisten.delete(msg.channel);
      if (stop) await stop();
      return null;
    }
    case "dump": {
      const blob = await db.dumpDataDir("none");
      return new Uint8Array(await blob.arrayBuffer());
    }
    case "close": {
      await db.close();
      return null;
    }
    default:
      throw new Error(`unknown op ${msg.op}`);
  }
}

ready.then(
  () => parentPort.postMessage({ id: 0, ok: true, result: "ready" }),
  (err) => parentPort.postMessage({ id: 0, ok: false, error: serializeError(err) }),
);

parentPort.on("message", (msg) => {
  handle(msg).then(
    (result) => parentPort.postMessage({ id: msg.id, ok: true, result }),
    (err) => parentPort.postMessage({ id: msg.id, ok: false, error: serializeError(err) }),
  );
});
