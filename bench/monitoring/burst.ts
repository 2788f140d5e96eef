/**
 * Pipeline capacity: N checks all due at once on the embedded gateway + agent (in-process);
 * reports how long until every check has a result and where the time went.
 *   NETMON_BENCH_CHECKS=3000 node --import tsx bench/monitoring/burst.ts
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { loadConfig } from "../../src/config/config.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { Agent, inProcessGatewayLink } from "../../src/monitoring/runtime/agent.ts";
import { Gateway } from "../../src/monitoring/runtime/gateway.ts";
import { type CoreLink, inProcessCoreLink } from "../../src/monitoring/runtime/links.ts";
import { TargetPolicy } from "../../src/monitoring/target-policy.ts";
import { startServer } from "../../src/server.ts";
import { sql } from "../../src/storage/sql.ts";

const N = Number(process.env.NETMON_BENCH_CHECKS ?? 3000);
const ROOT = path.resolve(import.meta.dirname, "../..");
const targets = spawn(
  process.execPath,
  ["--import", "tsx", path.join(ROOT, "bench/monitoring/targets-child.ts")],
  { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] },
);
const rl = readline.createInterface({ input: targets.stdout as NodeJS.ReadableStream });
let ports = { http: 0, tcp: 0 };
for await (const line of rl) {
  ports = JSON.parse(line);
  break;
}
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-burst-"));
const config = loadConfig({
  PORT: "0",
  HOST: "127.0.0.1",
  NETMON_DATA_DIR: dataDir,
  NETMON_EMBEDDED_AGENT: "false",
  NETMON_LOG_LEVEL: "warn",
  ...(process.env.NETMON_BENCH_DATABASE_URL ? { DATABASE_URL: process.env.NETMON_BENCH_DATABASE_URL } : {}),
});
const log = createLogger("warn");
const server = await startServer(config, { logger: log });
const ctx = server.ctx;
const timing: Record<string, { n: number; ms: number }> = {};
const base = inProcessCoreLink(ctx);
const timed = Object.fromEntries(
  Object.entries(base).map(([k, fn]) => [
    k,
    async (...a: unknown[]) => {
      const t = performance.now();
      try {
        return await (fn as (...x: unknown[]) => Promise<unknown>)(...a);
      } finally {
        const e = timing[k] ?? { n: 0, ms: 0 };
        e.n++;
        e.ms += performance.now() - t;
        timing[k] = e;
      }
    },
  ]),
) as unknown as CoreLink;
const gateway = new Gateway({ id: "burst-gw", core: timed, log });
await gateway.start();
const agent = new Agent({
  uid: "burst-agent",
  gateway: inProcessGatewayLink(gateway),
  policy: new TargetPolicy(),
  log,
  hostMetricsMs: 0,
  maxConcurrentChecks: 256,
});
const names: string[] = [];
const types: string[] = [];
const tg: string[] = [];
const pt: (number | null)[] = [];
for (let j = 0; j < N; j++) {
  const tcp = j % 2 === 0;
  names.push(`b-${j}`);
  types.push(tcp ? "tcp" : "http");
  tg.push(tcp ? "127.0.0.1" : `http://127.0.0.1:${ports.http}/ok`);
  pt.push(tcp ? ports.tcp : null);
}
await ctx.db.query(sql`INSERT INTO service_checks (name, check_type, target, port, interval_seconds, timeout_seconds, next_run_at)
  SELECT v.n, v.t, v.g, v.p, 3600, 5, now() FROM unnest(${names}::text[], ${types}::text[], ${tg}::text[], ${pt}::int[]) AS v(n, t, g, p)`);
const t0 = performance.now();
await agent.start();
for (;;) {
  const r = await ctx.db.one<{ n: number }>(
    sql`SELECT count(*)::int AS n FROM service_checks WHERE last_result IS NOT NULL`,
  );
  if ((r?.n ?? 0) >= N) break;
  await new Promise((res) => setTimeout(res, 100));
}
const total = performance.now() - t0;
await agent.stop(1000);
await gateway.stop();
await server.close();
targets.kill();
fs.rmSync(dataDir, { recursive: true, force: true });
console.log(`## Burst: ${N} checks due at once (embedded, ${config.databaseUrl ? "PostgreSQL" : "PGlite"})

All results recorded after **${(total / 1000).toFixed(1)} s** (${Math.round((N / total) * 60000)} checks/min).

| core call | calls | total ms | mean ms |
|---|---|---|---|
${Object.entries(timing)
  .map(([k, v]) => `| ${k} | ${v.n} | ${v.ms.toFixed(0)} | ${(v.ms / v.n).toFixed(1)} |`)
  .join("\n")}
`);
process.exit(0);
