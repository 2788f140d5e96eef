// Start-up of `netmon serve`: the compiled build (dist/, decision 0006) against the same code
// run from source through tsx, in the same run. Time from spawn to /health/live answering, and
// the resident memory of the process after it has idled. Each mode starts twice on the same
// data directory: the first start creates and migrates the embedded database, the second is an
// ordinary restart. Knobs: STARTUP_BENCH_IDLE_S (default 20), STARTUP_BENCH_ROUNDS (default 3).
//
// STARTUP_BENCH_DEVICES=N instead measures the restart of a data directory holding N devices
// (seeded as the moonshot seeds, bench/ops/_seed.ts; STARTUP_BENCH_DATA_DIR keeps and reuses it),
// compiled build only, to a healthy `/health` (the database answering), ROUNDS times.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { seedDataDir } from "./_seed.ts";

const root = path.resolve(import.meta.dirname, "../..");
const idleS = Number(process.env.STARTUP_BENCH_IDLE_S ?? 20);
const rounds = Number(process.env.STARTUP_BENCH_ROUNDS ?? 3);
const devices = process.env.STARTUP_BENCH_DEVICES ? Number(process.env.STARTUP_BENCH_DEVICES) : undefined;

execFileSync(process.execPath, ["scripts/build-server.mjs"], { cwd: root, stdio: "ignore" });

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

async function start(
  dataDir: string,
  fromSource: boolean,
  route = "/health/live",
): Promise<{ healthyS: number; rss: number }> {
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(process.execPath, ["bin/netmon.mjs", "serve"], {
    cwd: root,
    stdio: "ignore",
    env: {
      ...process.env,
      PORT: String(port),
      NETMON_DATA_DIR: dataDir,
      NETMON_OTLP_GRPC_PORT: "0",
      NETMON_SYSLOG_PORT: "0",
      NETMON_SNMP_TRAP_PORT: "0",
      NETMON_FROM_SOURCE: fromSource ? "1" : "0",
    },
  });
  try {
    const deadline = Date.now() + 180_000;
    for (;;) {
      if (Date.now() > deadline) throw new Error("not healthy within 180 s");
      const ok = await fetch(`http://127.0.0.1:${port}${route}`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const healthyS = (performance.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, idleS * 1000));
    return { healthyS, rss: rssMb(child.pid as number) };
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
}

if (devices !== undefined) {
  const dir = process.env.STARTUP_BENCH_DATA_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), "netmon-startup-"));
  fs.mkdirSync(dir, { recursive: true });
  const log = (m: string) => process.stderr.write(`[startup] ${m}\n`);
  const seeded = await seedDataDir(dir, { devices, checks: 0, interval: 60 }, log);
  log(seeded.reused ? `reusing ${dir}` : `seeded ${devices} devices in ${seeded.seconds.toFixed(0)} s`);
  const times: number[] = [];
  const rss: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const r = await start(dir, false, "/health");
    times.push(r.healthyS);
    rss.push(r.rss);
  }
  if (!process.env.STARTUP_BENCH_DATA_DIR) fs.rmSync(dir, { recursive: true, force: true });
  console.log(`## Restart with ${devices.toLocaleString("en")} devices (bench/ops/startup.ts)

\`STARTUP_BENCH_DEVICES=${devices} node --import tsx bench/ops/startup.ts\`: compiled build, spawn to
a healthy \`/health\`, ${rounds} restarts: ${times.map((t) => `${t.toFixed(2)} s`).join(", ")}; idle RSS after
${idleS} s ${rss.map((m) => `${m.toFixed(0)} MB`).join(", ")}. Load average at the end: ${os.loadavg()[0]?.toFixed(1)} on ${os.cpus().length} cores.
`);
  process.exit(0);
}

const rows: string[] = [];
const summary = {
  build: [] as number[],
  source: [] as number[],
  buildRss: [] as number[],
  sourceRss: [] as number[],
};
for (let round = 0; round < rounds; round++) {
  for (const fromSource of [false, true]) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-startup-"));
    try {
      const first = await start(dir, fromSource);
      const again = await start(dir, fromSource);
      const mode = fromSource ? "source (tsx)" : "build (dist/)";
      rows.push(
        `| ${round + 1} | ${mode} | ${first.healthyS.toFixed(2)} s | ${first.rss.toFixed(0)} MB | ${again.healthyS.toFixed(2)} s | ${again.rss.toFixed(0)} MB |`,
      );
      (fromSource ? summary.source : summary.build).push(again.healthyS);
      (fromSource ? summary.sourceRss : summary.buildRss).push(again.rss);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
}
// The least-disturbed run: on a shared machine other processes only ever add time.
const best = (xs: number[]) => Math.min(...xs);
const load = os.loadavg()[0]?.toFixed(1);
console.log(`## Start-up: compiled build vs tsx (bench/ops/startup.ts)

\`node --import tsx bench/ops/startup.ts\`: \`netmon serve\` on the embedded database, spawn to
\`/health/live\`; "first" creates and migrates the data directory, "restart" starts again on it;
RSS of the server process after ${idleS} s idle (the PGlite worker thread included).

| round | mode | first start | idle RSS after it | restart | idle RSS after it |
|---|---|---|---|---|---|
${rows.join("\n")}

Restart, best of ${rounds}: build ${best(summary.build).toFixed(2)} s vs source ${best(summary.source).toFixed(2)} s
(**${(best(summary.source) / Math.max(0.001, best(summary.build))).toFixed(2)}×**); idle RSS ${best(summary.buildRss).toFixed(0)} MB vs
${best(summary.sourceRss).toFixed(0)} MB. Load average at the end: ${load} on ${os.cpus().length} cores.
`);
