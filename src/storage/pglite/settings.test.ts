import { describe, expect, it } from "vitest";
import { PgliteDb } from "./client.ts";

describe("PGlite settings", () => {
  it("runs with the configured shared_buffers (32 MiB unless told otherwise)", async () => {
    for (const [opts, want] of [
      [{}, "32MB"],
      [{ sharedBuffersMb: 24 }, "24MB"],
    ] as const) {
      const db = await PgliteDb.open(opts);
      try {
        const row = await db.one<{ shared_buffers: string }>("SHOW shared_buffers");
        expect(row?.shared_buffers).toBe(want);
      } finally {
        await db.close();
      }
    }
  });

  it("bounds the WAL (a server-start setting: a session SET is refused)", async () => {
    const db = await PgliteDb.open({});
    try {
      const row = await db.one<{ max: string; min: string }>(
        "SELECT current_setting('max_wal_size') AS max, current_setting('min_wal_size') AS min",
      );
      expect(row).toEqual({ max: "256MB", min: "64MB" });
    } finally {
      await db.close();
    }
  });
});
