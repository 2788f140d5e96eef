import { createHash, randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";

/**
 * Renderer bytes live content-addressed under `$NETMON_DATA_DIR/dashboards/renderers/<sha256>`:
 * an upload streams to a temporary file while it is hashed and counted, so the 50 MB cap is
 * enforced as bytes arrive and a part is never held in memory. Two packages with the same
 * bytes share one file; a file is only ever written whole (rename after the hash is known).
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

export async function discardRenderer(staged: StagedRenderer | null): Promise<void> {
  if (staged) await fs.promises.rm(staged.tmpPath, { force: true });
}

export function rendererPath(dataDir: string, stored: string): string | null {
  if (!/^[0-9a-f]{64}$/.test(stored)) return null;
  return path.join(rendererDir(dataDir), stored);
}
