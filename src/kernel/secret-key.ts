import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/**
 * The instance secret (signing and encryption). Read from the configured file, or generated
 * into it on first start with mode 0600. Keys for separate purposes are derived from it.
 */
export function loadOrCreateSecretKey(file: string): Buffer {
  if (fs.existsSync(file)) {
    const text = fs.readFileSync(file, "utf8").trim();
    const key = Buffer.from(text, "base64");
    if (key.length < 32) throw new Error(`secret key file ${file} must hold at least 32 bytes (base64)`);
    return key;
  }
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const key = randomBytes(48);
  try {
    fs.writeFileSync(file, key.toString("base64") + "\n", { mode: 0o600, flag: "wx" });
  } catch (err) {
    // Another replica wrote it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return loadOrCreateSecretKey(file);
    throw err;
  }
  return key;
}
