import { createHash, randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";

/**
 * Renderer bytes are content-addressed: an upload streams to a temporary file under
 * `$NETMON_DATA_DIR/dashboards/renderers/` while it is hashed and counted, so the 50 MB cap is
 * enforced as bytes arrive. Once accepted, the bytes are stored in the database
 * (`dashboard_renderers`, migration 0701) so every replica can serve them and backups carry
 * them; the file `<sha256>` stays as this process's cache and is rebuilt from the database when
 * missing. Two packages with the same bytes share one copy; a file is only ever written whole
 * (rename after the hash is known).
 */
export const RENDERER_MAX_BYTES = 50 * 1024 * 1024;

export function rendererDir(dataDir: string): string {
  return path.join(dataDir, "dashboards", "renderers");
}

export interface StagedRenderer {
  /** Temporary file holding the bytes (deleted by commit or discard). */
  tmpPath: string;
  size: number;
  sha256: string;
  /** More than the cap arrived; the bytes past it were discarded, not written. */
  tooLarge: boolean;
}

/**
 * Stream `source` to a temporary file under the renderer directory, hashing as it goes.
 * `truncated()` reports the multipart layer's own cut-off (busboy stops at its file-size limit).
 */
export async function stageRenderer(
  dataDir: string,
  source: Readable,
  truncated: () => boolean,
  max = RENDERER_MAX_BYTES,
): Promise<StagedRenderer> {
  const dir = rendererDir(dataDir);
  await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
  const tmpPath = path.join(dir, `.upload-${randomUUID()}`);
  const out = fs.createWriteStream(tmpPath, { mode: 0o600 });
  const hash = createHash("sha256");
  let size = 0;
  let tooLarge = false;
  try {
    for await (const chunk of source) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > max) tooLarge = true;
      // Past the cap the rest is drained (so the response can still be read) but not kept.
      if (tooLarge) continue;
      hash.update(buf);
      if (!out.write(buf)) await new Promise<void>((resolve) => out.once("drain", resolve));
    }
  } finally {
    await new Promise<void>((resolve, reject) =>
      out.end((err?: Error | null) => (err ? reject(err) : resolve())),
    );
  }
  if (truncated()) tooLarge = true;
  return { tmpPath, size, sha256: hash.digest("hex"), tooLarge };
}

/** Move staged bytes to their content address. Returns the stored name (the hash). */
export async function commitRenderer(dataDir: string, staged: StagedRenderer): Promise<string> {
  const target = path.join(rendererDir(dataDir), staged.sha256);
  await fs.promises.rename(staged.tmpPath, target);
  return staged.sha256;
}

/**
 * Keep accepted bytes: in the database (shared by replicas, in backups) and as the local cache
 * file. Idempotent per hash. Returns the stored name (the hash).
 */
export async function persistRenderer(
  db: Queryable,
  dataDir: string,
  staged: StagedRenderer,
): Promise<string> {
  const bytes = await fs.promises.readFile(staged.tmpPath);
  await db.query(sql`
    INSERT INTO dashboard_renderers (content_hash, bytes, size) VALUES (${staged.sha256}, ${bytes}, ${bytes.length})
    ON CONFLICT (content_hash) DO NOTHING`);
  return commitRenderer(dataDir, staged);
}

/** The local file holding a stored renderer, fetched from the database when not cached here. */
export async function rendererFile(db: Queryable, dataDir: string, stored: string): Promise<string | null> {
  const file = rendererPath(dataDir, stored);
  if (!file) return null;
  if (fs.existsSync(file)) return file;
  const row = await db.one<{ bytes: Uint8Array }>(
    sql`SELECT bytes FROM dashboard_renderers WHERE content_hash = ${stored}`,
  );
  if (!row) return null;
  await fs.promises.mkdir(rendererDir(dataDir), { recursive: true, mode: 0o700 });
  const tmp = path.join(rendererDir(dataDir), `.cache-${randomUUID()}`);
  await fs.promises.writeFile(tmp, row.bytes, { mode: 0o600 });
  await fs.promises.rename(tmp, file);
  return file;
}

export async function discardRenderer(staged: StagedRenderer | null): Promise<void> {
  if (staged) await fs.promises.rm(staged.tmpPath, { force: true });
}

export function rendererPath(dataDir: string, stored: string): string | null {
  if (!/^[0-9a-f]{64}$/.test(stored)) return null;
  return path.join(rendererDir(dataDir), stored);
}

/** Temporary files older than this are leftovers of a process that died mid-upload. */
const STALE_TEMP_MS = 60 * 60_000;

/**
 * Delete upload and cache temporaries a crashed process left behind (`.upload-*`, `.cache-*`
 * older than an hour; a live upload or cache fill finishes in far less). Returns how many.
 */
export async function sweepStaleTemporaries(dataDir: string, now = Date.now()): Promise<number> {
  const dir = rendererDir(dataDir);
  let names: string[];
  try {
    names = await fs.promises.readdir(dir);
  } catch {
    return 0; // nothing uploaded yet
  }
  let removed = 0;
  for (const name of names) {
    if (!name.startsWith(".upload-") && !name.startsWith(".cache-")) continue;
    const file = path.join(dir, name);
    const stat = await fs.promises.stat(file).catch(() => null);
    if (stat && now - stat.mtimeMs > STALE_TEMP_MS) {
      await fs.promises.rm(file, { force: true });
      removed++;
    }
  }
  return removed;
}
