// Writes docs/errors.md from the error-code catalogue (src/kernel/error-codes.ts).
// `node --import tsx scripts/error-docs.ts`; src/kernel/error-codes.test.ts fails when stale.
import fs from "node:fs";
import path from "node:path";
import { renderErrorDocs } from "../src/kernel/error-docs.ts";

const out = path.resolve(import.meta.dirname, "../docs/errors.md");
fs.writeFileSync(out, renderErrorDocs());
console.log(`wrote ${out}`);
