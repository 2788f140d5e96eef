#!/usr/bin/env node
// Sum vitest JSON reports into the single line CI reads: "N passed, N failed".
// A missing report (a run that crashed before reporting) counts as a failure.
import fs from "node:fs";

let passed = 0;
let failed = 0;
for (const file of process.argv.slice(2)) {
  if (!fs.existsSync(file)) {
    console.error(`no test report at ${file}`);
    failed += 1;
    continue;
  }
  const r = JSON.parse(fs.readFileSync(file, "utf8"));
  passed += r.numPassedTests ?? 0;
  failed += (r.numFailedTests ?? 0) + (r.numRuntimeErrorTestSuites ?? 0);
  if (r.success === false && (r.numFailedTests ?? 0) === 0 && (r.numRuntimeErrorTestSuites ?? 0) === 0)
    failed += 1;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
