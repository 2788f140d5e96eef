// Device reads near the Node ceiling (issue 14, goal 1). Four reads, each against netmon (child
// process, full edge: access hook, request budget, route, serialisation) and, on PostgreSQL, next
// to a bare node:http + pg peer (bench/inventory/_reads-baseline.ts, another child process) that
// runs the SQL netmon ran for that request and writes the same document; the bytes of both
// answers are compared before the load:
//   GET  /api/devices?limit=100
//   GET  /api/devices?search=host-00012&limit=50
//   POST /api/query  {"query":"in:devices hostname:%host-0001% limit:50"}
//   GET  /api/v2/devices?page[limit]=50
// The SQL is captured, not retyped: reads.ts first serves each request once from an in-process
// netmon whose database handle records the statements, and hands the devices statement to the peer.
// autocannon, READS_BENCH_CONNECTIONS (32) keep-alive connections for READS_BENCH_SECONDS (8) per
// case after a warm-up (2 s, or READS_BENCH_SECONDS if shorter), plus one connection for the
// single-client p50.
//
//   node --import tsx bench/inventory/reads.ts
//
// Env: READS_BENCH_DEVICES (PostgreSQL, default 1000000), READS_BENCH_PGLITE_DEVICES (default
// 1000000, seeded each run), READS_BENCH_DATABASE_URL (default postgres://root@127.0.0.1:5432/reads_bench; seeded
// once, reused while it holds exactly that many seeded devices), READS_BENCH_BACKENDS
// ("postgres,pglite"), READS_BENCH_SECONDS (8), READS_BENCH_CONNECTIONS (32), READS_BENCH_LOG_LEVEL
// (netmon's log level, default "info" as shipped), READS_BENCH_ONLY (comma list of list, search,
// srql, v2: only those reads), READS_BENCH_PROFILE (a directory: both servers run with
// --cpu-prof and write their profiles there on exit).
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import pg from "pg";
import { createApiToken, TOKEN_SCOPES } from "../../src/access/tokens.ts";
import { insertUser } from "../../src/access/users.ts";
import { loadConfig } from "../../src/config/config.ts";
import type { AppContext } from "../../src/kernel/context.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import { loadOrCreateSecretKey } from "../../src/kernel/secret-key.ts";
import { startServer } from "../../src/server.ts";
import type { Db } from "../../src/storage/db.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { openDatabase } from "../../src/storage/open.ts";
import { toQuery } from "../../src/storage/sql.ts";
import { ensurePgDatabase } from "../_lib/pg-database.ts";
import { seedDevices } from "./_reads-seed.ts";

const PG_DEVICES = Number(process.env.READS_BENCH_DEVICES ?? 1_000_000);
const PGLITE_DEVICES = Number(process.env.READS_BENCH_PGLITE_DEVICES ?? 1_000_000);
const PG_URL = process.env.READS_BENCH_DATABASE_URL ?? "postgres://root@127.0.0.1:5432/reads_bench";
const BACKENDS = (process.env.READS_BENCH_BACKENDS ?? "postgres,pglite").split(",").map((s) => s.trim());
const SECONDS = Number(process.env.READS_BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.READS_BENCH_CONNECTIONS ?? 32);
const LOG_LEVEL = process.env.READS_BENCH_LOG_LEVEL ?? "info";
const PROFILE = process.env.READS_BENCH_PROFILE;
const profArgs = (name: string) =>
  PROFILE
    ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(PROFILE)}`, `--cpu-prof-name=${name}.cpuprofile`]
    : [];
const root = path.resolve(import.meta.dirname, "../..");
const started = Date.now();
const log = (m: string) =>
  process.stderr.write(`[reads ${((Date.now() - started) / 1000).toFixed(0)}s] ${m}\n`);

interface Read {
  key: "list" | "search" | "srql" | "v2";
  label: string;
  method: "GET" | "POST";
  path: string;
  body?: string;
}
const SRQL = "in:devices hostname:%host-0001% limit:50";
const ALL_READS: Read[] = [
  { key: "list", label: "`GET /api/devices?limit=100`", method: "GET", path: "/api/devices?limit=100" },
  {
    key: "search",
    label: "`GET /api/devices?search=host-00012&limit=50`",
    method: "GET",
    path: "/api/devices?search=host-00012&limit=50",
  },
  {
    key: "srql",
    label: `\`POST /api/query\` \`${SRQL}\``,
    method: "POST",
    path: "/api/query",
    body: JSON.stringify({ query: SRQL }),
  },
  {
    key: "v2",
    label: "`GET /api/v2/devices?page[limit]=50`",
    method: "GET",
    path: "/api/v2/devices?page[limit]=50",
  },
];
const only = process.env.READS_BENCH_ONLY?.split(",").map((s) => s.trim());
const READS = ALL_READS.filter((r) => !only || only.includes(r.key));

function waitFor(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = "";
    const t = setTimeout(() => reject(new Error(`no start: ${out.slice(-2000)}`)), 120_000);
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
    child.on("exit", (code) => reject(new Error(`exited ${code}: ${out.slice(-2000)}`)));
  });
}

/** Records every statement text run through the handle (the in-process capture server). */
function recording(db: Db, seen: string[]): Db {
  return new Proxy(db, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (prop === "query" || prop === "one" || prop === "many") {
        return (q: Parameters<Db["query"]>[0], values?: readonly unknown[]) => {
          seen.push(toQuery(q, values).text);
          return (v as Db["query"]).call(target, q, values);
        };
      }
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

interface Setup {
  dataDir: string;
  env: Record<string, string>;
  token: string;
  secretKey: Buffer;
}

/** Migrate, seed, create a viewer with an API token (all scopes); the data dir holds the secret key. */
async function setUp(kind: "postgres" | "pglite", n: number): Promise<Setup> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `netmon-reads-${kind}-`));
  dataDirs.push(dataDir);
  // The budget is raised so the load measures the reads, not the 429s (it is still counted).
  const env: Record<string, string> = {
    NETMON_DATA_DIR: dataDir,
    HOST: "127.0.0.1",
    PORT: "0",
    NETMON_RATE_LIMIT_API_DEFAULT: "100000000/60s",
  };
  if (kind === "postgres") {
    await ensurePgDatabase(PG_URL);
    env.DATABASE_URL = PG_URL;
  }
  const config = loadConfig({ ...env, NETMON_LOG_LEVEL: "warn", NETMON_EMBEDDED_AGENT: "false" });
  const db = await openDatabase(config);
  await migrate(db);
  await seedDevices(db, n);
  const ctx: AppContext = {
    config,
    db,
    log: createLogger("warn"),
    secretKey: loadOrCreateSecretKey(config.secretKeyFile),
    now: () => new Date(),
  };
  const user = await insertUser(ctx, {
    email: `reads-${Date.now()}@example.test`,
    password: "bench-password-123",
    role: "viewer",
  });
  const { token } = await createApiToken(ctx, user.id, { name: "reads-bench", scopes: [...TOKEN_SCOPES] });
  await db.close();
  return { dataDir, env, token, secretKey: ctx.secretKey };
}

async function call(base: string, r: Read, token: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${base}${r.path}`, {
    method: r.method,
    headers: { authorization: `Bearer ${token}`, ...(r.body ? { "content-type": "application/json" } : {}) },
    body: r.body,
  });
  return { status: res.status, body: await res.text() };
}

/** The devices statement netmon runs for each read, from an in-process server recording its SQL. */
async function captureSql(s: Setup): Promise<Record<Read["key"] | "srqlProbe", string>> {
  const config = loadConfig({ ...s.env, NETMON_LOG_LEVEL: "warn", NETMON_EMBEDDED_AGENT: "false" });
  const seen: string[] = [];
  const db = recording(await openDatabase(config), seen);
  const server = await startServer(config, { db });
  const out = {} as Record<Read["key"] | "srqlProbe", string>;
  try {
    for (const r of READS) {
      seen.length = 0;
      const res = await call(server.url, r, s.token);
      if (res.status !== 200) throw new Error(`${r.path}: ${res.status} ${res.body.slice(0, 300)}`);
      // Background jobs (device cleanup) also touch devices: only reads count.
      const stmts = seen.filter((t) => /^\s*SELECT\b/i.test(t) && /\bFROM "?devices"?/.test(t));
      // SRQL counts a substring filter's matches first (src/srql/run.ts): the peer runs that too.
      const probe = r.key === "srql" && stmts.length === 2 ? stmts.shift() : undefined;
      if (stmts.length !== 1)
        throw new Error(`${r.path}: ${stmts.length} devices statements: ${stmts.join(" | ")}`);
      out[r.key] = stmts[0] as string;
      if (probe) out.srqlProbe = probe;
    }
  } finally {
    await server.close();
    await db.close();
  }
  return out;
}

interface Measure {
  rps: number;
  p50: number;
  p99: number;
  bad: number;
  /** CPU time (user + system) the server process spent per request, ms: robust to a busy machine. */
  cpuMs: number;
}

/** utime + stime of a process in ms (Linux /proc; 0 elsewhere). */
function cpuOf(pid: number | undefined): number {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return 0;
  }
}

async function load(
  base: string,
  r: Read,
  token: string,
  connections: number,
  pid?: number,
): Promise<Measure> {
  const opts = {
    url: `${base}${r.path}`,
    method: r.method,
    headers: { authorization: `Bearer ${token}`, ...(r.body ? { "content-type": "application/json" } : {}) },
    body: r.body,
    connections,
  };
  await autocannon({ ...opts, duration: Math.min(2, SECONDS) }); // warm-up
  const cpu0 = cpuOf(pid);
  const res = await autocannon({ ...opts, duration: SECONDS });
  const cpuMs = (cpuOf(pid) - cpu0) / Math.max(1, res.requests.total);
  return {
    rps: res.requests.average,
    p50: res.latency.p50,
    p99: res.latency.p99,
    bad: res.non2xx + res.errors,
    cpuMs,
  };
}

/** Every server child, killed when this script exits however it exits (no orphans after a failure). */
const children: ChildProcess[] = [];
const dataDirs: string[] = [];
process.on("exit", () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
});

function spawnNetmon(s: Setup): { child: ChildProcess; url: Promise<string> } {
  const child = spawn(process.execPath, [...profArgs("netmon"), path.join(root, "bin/netmon.mjs"), "serve"], {
    cwd: root,
    env: {
      ...process.env,
      ...s.env,
      NETMON_LOG_LEVEL: LOG_LEVEL,
      NETMON_EMBEDDED_AGENT: "false",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  const url = waitFor(child, /netmon listening on (http:\/\/[\d.:]+)/);
  url.then(() => {
    child.stdout?.resume();
    child.stderr?.resume();
  });
  return { child, url };
}

const stop = async (c: ChildProcess) => {
  if (c.exitCode !== null) return;
  const gone = new Promise((r) => c.once("exit", r));
  c.kill(PROFILE ? "SIGINT" : "SIGTERM");
  await Promise.race([gone, new Promise((r) => setTimeout(r, 10_000))]);
};

const fmt = (m: Measure) => `${Math.round(m.rps)} | ${m.p50} | ${m.p99} | ${m.cpuMs.toFixed(2)}`;
const sections: string[] = [];
const single: Record<string, Record<string, number>> = {};

for (const backend of BACKENDS) {
  if (backend !== "postgres" && backend !== "pglite") throw new Error(`unknown backend ${backend}`);
  const n = backend === "postgres" ? PG_DEVICES : PGLITE_DEVICES;
  log(`${backend}: setting up ${n} devices`);
  const s = await setUp(backend, n);
  let sqlText: Record<Read["key"], string> | null = null;
  if (backend === "postgres") {
    log("capturing netmon's SQL");
    sqlText = await captureSql(s);
  }
  const nm = spawnNetmon(s);
  const netmonUrl = await nm.url;
  let peer: ChildProcess | null = null;
  let peerUrl = "";
  const shapes = { v2Attributes: [] as string[], srqlViz: null as unknown };
  const answers: Record<string, string> = {};
  for (const r of READS) answers[r.key] = (await call(netmonUrl, r, s.token)).body;
  if (backend === "postgres" && sqlText) {
    if (answers.v2) {
      const v2 = JSON.parse(answers.v2) as { data: { attributes: object }[] };
      shapes.v2Attributes = Object.keys(v2.data[0]?.attributes ?? {});
    }
    if (answers.srql) shapes.srqlViz = (JSON.parse(answers.srql) as { viz: unknown }).viz;
    const config = loadConfig({ ...s.env });
    const peerArgs = [
      ...profArgs("bare"),
      "--import",
      "tsx",
      path.join(root, "bench/inventory/_reads-baseline.ts"),
    ];
    peer = spawn(process.execPath, peerArgs, {
      cwd: root,
      env: {
        ...process.env,
        DATABASE_URL: PG_URL,
        POOL: String(config.dbPoolSize),
        READS_SQL: JSON.stringify(sqlText),
        READS_SHAPES: JSON.stringify(shapes),
        READS_SECRET_KEY: s.secretKey.toString("base64"),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(peer);
    peerUrl = await waitFor(peer, /baseline at (http:\/\/[\d.:]+)/);
    peer.stdout?.resume();
    peer.stderr?.resume();
  }
  const rows: string[] = [];
  single[backend] = {};
  for (const r of READS) {
    log(`${backend}: ${r.path}`);
    let same = "–";
    let bytes = Buffer.byteLength(answers[r.key] as string);
    let ratio = "–";
    let peerCols = "– | – | – | –";
    if (peer) {
      // Host differs (port) in v2 links: compare with netmon's own origin substituted.
      const mine = (await call(peerUrl, r, s.token)).body.replaceAll(peerUrl, netmonUrl);
      same = mine === answers[r.key] ? "yes" : `NO (${Buffer.byteLength(mine)} vs ${bytes} bytes)`;
      if (mine !== answers[r.key]) {
        let i = 0;
        const a = answers[r.key] as string;
        while (i < a.length && a[i] === mine[i]) i++;
        log(`differs at ${i}: netmon …${a.slice(i - 40, i + 80)}… peer …${mine.slice(i - 40, i + 80)}…`);
      }
      const pm = await load(peerUrl, r, s.token, CONNECTIONS, peer.pid);
      peerCols = fmt(pm);
      const nmm = await load(netmonUrl, r, s.token, CONNECTIONS, nm.child.pid);
      ratio = `${(nmm.rps / pm.rps).toFixed(2)} | ${(pm.cpuMs / Math.max(nmm.cpuMs, 0.001)).toFixed(2)}`;
      const one = await load(netmonUrl, r, s.token, 1);
      single[backend][r.key] = one.p50;
      rows.push(
        `| ${r.label} | ${bytes} | ${same} | ${peerCols} | ${fmt(nmm)} | ${ratio} | ${one.p50} | ${nmm.bad} |`,
      );
    } else {
      const nmm = await load(netmonUrl, r, s.token, CONNECTIONS, nm.child.pid);
      const one = await load(netmonUrl, r, s.token, 1);
      single[backend][r.key] = one.p50;
      bytes = Buffer.byteLength(answers[r.key] as string);
      const pgP50 = single.postgres?.[r.key];
      const vsPg = pgP50 ? `${(one.p50 / Math.max(pgP50, 1)).toFixed(1)}×` : "–";
      rows.push(`| ${r.label} | ${bytes} | ${fmt(nmm)} | ${one.p50} | ${vsPg} | ${nmm.bad} |`);
    }
  }
  await stop(nm.child);
  if (peer) await stop(peer);
  fs.rmSync(s.dataDir, { recursive: true, force: true });
  if (backend === "postgres") {
    sections.push(`### PostgreSQL, ${n.toLocaleString("en-US")} devices, ${CONNECTIONS} connections, ${SECONDS} s per case

| read | bytes | same bytes | bare req/s | bare p50 ms | bare p99 ms | bare CPU ms/req | netmon req/s | netmon p50 ms | netmon p99 ms | netmon CPU ms/req | ratio req/s netmon/bare | ratio CPU bare/netmon | netmon p50 ms, 1 client | non-2xx+errors |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
${rows.join("\n")}

Goal: req/s ratio ≥ 0.70 and netmon p99 < 50 ms. "CPU ms/req" is the server process's own CPU
time (user + system) per request during the measured seconds, so "ratio CPU" is the ceiling ratio
on a machine whose cores are shared (it excludes PostgreSQL's share). SQL the peer runs (captured from netmon):
${READS.map((r) => `- ${r.key}: \`${(sqlText?.[r.key] ?? "").replace(/\s+/g, " ")}\``).join("\n")}
`);
  } else {
    sections.push(`### PGlite, ${n.toLocaleString("en-US")} devices, ${CONNECTIONS} connections, ${SECONDS} s per case

| read | bytes | netmon req/s | p50 ms | p99 ms | CPU ms/req | p50 ms, 1 client | 1-client p50 vs PostgreSQL | non-2xx+errors |
|---|---|---|---|---|---|---|---|---|
${rows.join("\n")}

Goal: 1-client p50 < 20 ms and ≤ 3× PostgreSQL per request.
`);
  }
}

console.log(`## Device reads next to a bare node:http + pg peer (issue 14, goal 1)

${sections.join("\n")}
netmon log level ${LOG_LEVEL}; load average at the end ${os
  .loadavg()
  .map((x) => x.toFixed(2))
  .join(" ")} on ${os.cpus().length} CPUs.
Command: \`node --import tsx bench/inventory/reads.ts\` (READS_BENCH_DEVICES=${PG_DEVICES}, READS_BENCH_PGLITE_DEVICES=${PGLITE_DEVICES}). Wall time ${((Date.now() - started) / 1000).toFixed(0)} s.
`);
process.exit(0);
