import fs from "node:fs";
import path from "node:path";

/**
 * The data directory holds the database and the instance secret: only netmon's user may read
 * it. Creates `dir` as 0700 and brings an existing tree to 0700 directories / 0600 files
 * (issue 10: embedded database files were created 0666 under a permissive umask). Files
 * created later inherit the process umask, which the CLI sets to 077 at start.
 */
export function makePrivateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stack = [dir];
  while (stack.length > 0) {
    const d = stack.pop() as string;
    fs.chmodSync(d, 0o700);
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) stack.push(p);
      else if (e.isFile() && (fs.statSync(p).mode & 0o077) !== 0) fs.chmodSync(p, 0o600);
    }
  }
}
