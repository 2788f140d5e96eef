#!/usr/bin/env node
// Entry point. Runs the compiled build in dist/ (made by `npm ci`/`npm run build`) when it is
// at least as new as every source file; otherwise — a working copy edited since the last
// build — compiles the TypeScript sources on the fly through tsx, so a stale build never runs.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function newestSource(dir) {
  let newest = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (!e.name.endsWith(".test.ts")) newest = Math.max(newest, fs.statSync(p).mtimeMs);
  }
  return newest;
}

function buildIsFresh() {
  if (process.env.NETMON_FROM_SOURCE === "1") return false;
  try {
    const built = fs.statSync(path.join(root, "dist", ".build-stamp")).mtimeMs;
    return built >= newestSource(path.join(root, "src"));
  } catch {
    return false;
  }
}

let main;
if (buildIsFresh()) {
  ({ main } = await import("../dist/cli/main.js"));
} else {
  const { register } = await import("tsx/esm/api");
  register();
  ({ main } = await import("../src/cli/main.ts"));
}
process.exitCode = await main(process.argv.slice(2));
