#!/usr/bin/env node
// Entry point: load TypeScript sources through tsx (no build step), then run the CLI.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/cli/main.ts");
const code = await main(process.argv.slice(2));
process.exitCode = code;
