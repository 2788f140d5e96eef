import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { rendererDir, sweepStaleTemporaries } from "./renderer-store.ts";

describe("stale upload temporaries", () => {
  it("removes .upload-/.cache- files older than an hour and keeps stored renderers and fresh temporaries", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-renderers-"));
    try {
      expect(await sweepStaleTemporaries(dataDir)).toBe(0); // no directory yet
      const dir = rendererDir(dataDir);
      fs.mkdirSync(dir, { recursive: true });
      const old = new Date(Date.now() - 2 * 3600_000);
      const write = (name: string, mtime?: Date) => {
        fs.writeFileSync(path.join(dir, name), "x");
        if (mtime) fs.utimesSync(path.join(dir, name), mtime, mtime);
      };
      write(".upload-dead", old);
      write(".cache-dead", old);
      write(".upload-live");
      write("a".repeat(64), old); // a stored renderer, however old
      expect(await sweepStaleTemporaries(dataDir)).toBe(2);
      expect(fs.readdirSync(dir).sort()).toEqual([".upload-live", "a".repeat(64)]);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
