#!/usr/bin/env node
// After `vite build`: write .br and .gz next to each text asset so the server sends them
// precompressed (@fastify/static preCompressed) instead of compressing on every request.
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";

const dist = path.resolve(import.meta.dirname, "../web/dist");
const TEXT = /\.(js|css|html|svg|json)$/;

function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : [p];
  });
}

let n = 0;
for (const file of walk(dist)) {
  if (!TEXT.test(file)) continue;
  const data = fs.readFileSync(file);
  fs.writeFileSync(`${file}.gz`, zlib.gzipSync(data, { level: 9 }));
  fs.writeFileSync(
    `${file}.br`,
    zlib.brotliCompressSync(data, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 } }),
  );
  n++;
}
console.log(`web/dist: ${n} files precompressed (br, gz)`);
