import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/**
 * This installation's identity: a short random id kept in the data directory, created on first
 * start. With the host name it names the embedded gateway and agent, so replicas sharing one
 * PostgreSQL (even two on one host) never take each other's gateway for their own, and a
 * restart comes back as the same gateway instead of leaving a silent one behind (issue 13).
 */
export function loadOrCreateInstanceId(dataDir: string): string {
  const file = path.join(dataDir, "instance-id");
  try {
    const id = fs.readFileSync(file, "utf8").trim();
    if (/^[0-9a-f]{8}$/.test(id)) return id;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const id = randomBytes(4).toString("hex");
  try {
    fs.writeFileSync(file, `${id}\n`, { mode: 0o600, flag: "wx" });
  } catch (err) {
    // Written concurrently by another process on this directory: use theirs.
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return loadOrCreateInstanceId(dataDir);
    throw err;
  }
  return id;
}
