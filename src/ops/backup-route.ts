/**
 * `GET /api/admin/backup` (issue 19): a consistent backup of the running server's database in
 * the `netmon backup` file format, streamed as it is read. It is how `netmon backup --server`
 * backs up an embedded (PGlite) database without stopping the server. Admins only; the
 * instance secret key is never sent (`secret_key` is null): the CLI adds the local key file.
 */
import { PassThrough } from "node:stream";
import type { FastifyInstance } from "fastify";
import type { AppContext } from "../kernel/context.ts";
import { writeBackupStream } from "./backup-file.ts";

export function backupRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get(
    "/api/admin/backup",
    { config: { access: { role: "admin" }, rateLimit: "admin" } },
    async (request, reply) => {
      const out = new PassThrough();
      const started = Date.now();
      // A client that goes away mid-download must not leave the export (and its snapshot
      // transaction: on PGlite the only connection) waiting for a reader.
      reply.raw.once("close", () => {
        if (!out.writableFinished) out.destroy();
      });
      writeBackupStream(ctx.db, out, { secretKey: null }).then(
        (counts) => {
          const rows = [...counts.values()].reduce((a, b) => a + b, 0);
          request.log.info({ tables: counts.size, rows, ms: Date.now() - started }, "backup streamed");
        },
        (err) => {
          // The body is cut short: the file has no end marker and restore refuses it.
          request.log.error({ err }, "backup failed while streaming");
          out.destroy(err as Error);
        },
      );
      const stamp = new Date().toISOString().replace(/[:.]/g, "-");
      return reply
        .header("content-type", "application/gzip")
        .header("content-disposition", `attachment; filename="netmon-backup-${stamp}.jsonl.gz"`)
        .header("cache-control", "no-store")
        .send(out);
    },
  );
}
