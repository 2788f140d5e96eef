// HTTP edge overhead: netmon's full Fastify edge (request ids, logging at warn, error mapping,
// access hooks) serving GET /health/live vs a bare node:http server answering the same JSON,
// both as separate processes, loaded by autocannon from this process.
// Run: node --import tsx bench/foundation/http-edge.ts   (BENCH_SECONDS, default 8; BENCH_CONNECTIONS, default 50)
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);

function waitFor(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = "";
    const t = setTimeout(() => reject(new Error(`no start: ${out}`)), 60_000);
    const on = (d: Buffer) => {
      out += d;
      const m = pattern.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(m[1] as string);
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", on);
  });
}

async function load(url: string) {
  await autocannon({ url, connections: CONNECTIONS, duration: 2 }); // warm-up
  return autocannon({ url, connections: CONNECTIONS, duration: SECONDS });
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-bench-"));
const netmon = spawn(process.execPath, ["bin/netmon.mjs", "serve"], {
  env: {
    ...process.env,
    PORT: "0",
    HOST: "127.0.0.1",
    NETMON_DATA_DIR: dataDir,
    NETMON_LOG_LEVEL: "info",
    NETMON_EMBEDDED_AGENT: "false",
  },
  stdio: ["ignore", "pipe", "pipe"],
});
const netmonUrl = await waitFor(netmon, /netmon listening on (http:\/\/[\d.:]+)/);
netmon.stdout?.resume();

const baseline = spawn(
  process.execPath,
  [
    "-e",
    `const s=require("http").createServer((q,r)=>{r.writeHead(200,{"content-type":"application/json; charset=utf-8"});r.end('{"status":"ok"}')});s.listen(0,"127.0.0.1",()=>console.log("at http://127.0.0.1:"+s.address().port))`,
  ],
  { stdio: ["ignore", "pipe", "pipe"] },
);
const baseUrl = await waitFor(baseline, /at (http:\/\/[\d.:]+)/);

const n = await load(`${netmonUrl}/health/live`);
const b = await load(`${baseUrl}/`);
netmon.kill("SIGTERM");
baseline.kill("SIGTERM");
fs.rmSync(dataDir, { recursive: true, force: true });

console.log(`## HTTP edge overhead (GET /health/live, ${CONNECTIONS} connections, ${SECONDS} s)

Note: info-level request logging is on in netmon (as in production); the bare server logs nothing.

| server | req/s (mean) | p50 ms | p99 ms | non-2xx |
|---|---|---|---|---|
| bare node:http | ${Math.round(b.requests.average)} | ${b.latency.p50} | ${b.latency.p99} | ${b.non2xx} |
| netmon (Fastify edge) | ${Math.round(n.requests.average)} | ${n.latency.p50} | ${n.latency.p99} | ${n.non2xx} |

Throughput ratio netmon/bare: ${(n.requests.average / b.requests.average).toFixed(2)}. Command: \`node --import tsx bench/foundation/http-edge.ts\`.
`);
