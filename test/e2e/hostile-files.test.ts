import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

/** Issue 10 item 7: the data directory is private whatever the umask netmon starts with. */
const BIN = path.resolve(import.meta.dirname, "../../bin/netmon.mjs");

function modes(root: string): { path: string; mode: number; dir: boolean }[] {
  const out: { path: string; mode: number; dir: boolean }[] = [];
  const walk = (p: string) => {
    const st = fs.statSync(p);
    out.push({ path: path.relative(root, p) || ".", mode: st.mode & 0o777, dir: st.isDirectory() });
    if (st.isDirectory()) for (const e of fs.readdirSync(p)) walk(path.join(p, e));
  };
  walk(root);
  return out;
}

describe.runIf(!process.env.NETMON_TEST_DATABASE_URL)("data directory modes", () => {
  it("creates every file 0600 and every directory 0700 under umask 000, and repairs an open tree", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-modes-"));
    const data = path.join(root, "data");
    try {
      // A tree left world-readable by an older version is repaired on open.
      fs.mkdirSync(path.join(data, "pg"), { recursive: true, mode: 0o777 });
      fs.chmodSync(data, 0o777);
      fs.writeFileSync(path.join(data, "leftover"), "x", { mode: 0o666 });
      fs.chmodSync(path.join(data, "leftover"), 0o666);
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        NETMON_DATA_DIR: data,
        NETMON_SECRET_KEY_FILE: path.join(data, "secret.key"),
      };
      delete env.DATABASE_URL;
      const r = spawnSync("sh", ["-c", `umask 000 && exec node ${JSON.stringify(BIN)} migrate`], {
        env,
        encoding: "utf8",
        timeout: 120_000,
      });
      expect(r.status, r.stderr).toBe(0);
      const all = modes(data);
      expect(all.length).toBeGreaterThan(20);
      const bad = all.filter((f) => f.mode !== (f.dir ? 0o700 : 0o600));
      expect(bad.map((f) => `${f.path} ${f.mode.toString(8)}`)).toEqual([]);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  }, 150_000);
});
