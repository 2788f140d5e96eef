// PGlite host, run in a worker thread so long queries never block the HTTP event loop.
// Plain JavaScript on purpose: it must load the same way under tsx, vitest and plain node.
// Protocol: parent posts {id, op, ...}; worker answers {id, ok, result} or {id, ok:false, error}.
import { parentPort, workerData } from "node:worker_threads";
import { PGlite } from "@electric-sql/pglite";
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm";

const { dataDir, loadDataDir } = workerData;

let db;
const ready = (async () => {
  const opts = { extensions: { pg_trgm } };
  if (dataDir) opts.dataDir = dataDir;
  if (loadDataDir) opts.loadDataDir = new Blob([loadDataDir]);
  db = await PGlite.create(opts);
  // Keep WAL small: PGlite's default retention made a 100k-row directory 80% WAL.
  await db.exec("SET max_wal_size = '64MB'; SET min_wal_size = '32MB'").catch(() => {});
})();

function serializeError(err) {
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

async function handle(msg) {
  await ready;
  switch (msg.op) {
    case "query": {
      const r = await db.query(msg.text, msg.values ?? []);
      return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
    }
    case "exec": {
      await db.exec(msg.text);
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
