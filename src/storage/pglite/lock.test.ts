import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { holderAlive, PgliteDb, processIdentity } from "./client.ts";

/** Issue 10 item 7: a lock left by a killed server never blocks the next start. */
describe("data directory lock", () => {
  it("knows a live holder from a reused PID", () => {
    expect(holderAlive(processIdentity(process.pid))).toBe(true);
    const [pid, , boot] = processIdentity(process.pid).split(" ");
    // Same PID, another start time: the PID was reused (a container's PID 1 after kill -9).
    expect(holderAlive(`${pid} 1 ${boot}`)).toBe(false);
    // An old PID-only lock naming this very process is stale too.
    expect(holderAlive(String(process.pid))).toBe(false);
    expect(holderAlive("999999999 1 x")).toBe(false);
    expect(holderAlive("garbage")).toBe(false);
  });

  it("takes over a stale lock and refuses a live second opener with a clear message", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-lock-"));
    const [pid, , boot] = processIdentity(process.pid).split(" ");
    fs.writeFileSync(path.join(dir, "netmon.lock"), `${pid} 1 ${boot}`);
    const db = await PgliteDb.open({ dataDir: dir });
    try {
      await expect(PgliteDb.open({ dataDir: dir })).rejects.toThrow(/in use|locked|another/i);
    } finally {
      await db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
