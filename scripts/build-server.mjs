#!/usr/bin/env node
// Compile src/ to dist/ once (issue 11: production runs JavaScript, not tsx compiling on every
// start). dist/ mirrors src/ at the same depth, so paths relative to the repository root
// (package.json, web/dist) resolve the same from either. Files tsc does not emit (migrations,
// protos, worker .mjs, licences) are copied beside the output. Incremental: a no-change run
// takes a few seconds. The stamp tells bin/netmon.mjs the build is complete.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const src = path.join(root, "src");
const dist = path.join(root, "dist");
const stamp = path.join(dist, ".build-stamp");

fs.rmSync(stamp, { force: true });
execFileSync(
  process.execPath,
  [path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"],
  {
    cwd: root,
    stdio: "inherit",
  },
);
let copied = 0;
const walk = (dir) => {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const from = path.join(dir, e.name);
    if (e.isDirectory()) walk(from);
    else if (!e.name.endsWith(".ts")) {
      const to = path.join(dist, path.relative(src, from));
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.copyFileSync(from, to);
      copied++;
    }
  }
};
walk(src);
fs.writeFileSync(stamp, `${new Date().toISOString()}\n`);
if (process.argv.includes("--verbose")) console.log(`dist/: compiled, ${copied} asset files copied`);
