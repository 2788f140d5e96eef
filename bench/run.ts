// `npm run bench`: runs every benchmark script (bench/<domain>/<name>.ts, not starting with "_"),
// each in its own process group, and writes what they print (markdown) into BENCHMARKS.md.
//
//   npm run bench [-- [<substring>…] [--quick] [--scale=<devices>] [--write] [--timeout=<s>]]
//
//   <substring>        only the scripts whose path contains it (a partial run replaces only their
//                      sections of the output file).
//   --quick            every script small: run.ts sets the scripts' own env knobs (PLANS below, only
//                      those the caller did not set) so the whole run takes under 5 minutes on the
//                      2-core development machine; 90 s timeout per script instead of 9 minutes. The
//                      output goes to BENCHMARKS.quick.md (git-ignored), so a quick run never
//                      replaces the full-run sections of BENCHMARKS.md, unless --write is given.
//                      The soak and the 1M restart are left out (PLANS' quickSkip says why): other
//                      scripts' quick runs exercise the same code.
//   --scale=<devices>  data-set size of the inventory, SRQL and JSON:API benchmarks, in devices
//                      (default 1,000,000 = the scripts' defaults; --quick alone uses 10,000; 20k and
//                      1m are accepted). Each script's size knobs keep their default ratio to
//                      1,000,000 devices (e.g. SRQL logs = 10 × devices). At a non-default scale the
//                      seeded PostgreSQL databases get a suffix (inventory_bench_10000), so a smaller
//                      run never truncates the 1,000,000-device seed that takes half an hour to build.
//                      Without --quick it writes BENCHMARKS.md: a deliberate choice, each section marked.
//   --write            write BENCHMARKS.md even for a --quick run.
//   --recorded         run nothing; refresh BENCHMARKS.md's copy of the bench/<domain>/RESULTS.md files.
//   --timeout=<s>      per-script timeout in seconds (default 540, --quick 90).
//
// Each section of a --quick or --scale run says so and shows the knobs it ran with. The scripts
// never write bench/<domain>/RESULTS.md (full-scale runs recorded by hand); this file only reads them.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const DEFAULT_DEVICES = 1_000_000;
const QUICK_DEVICES = 10_000;
/** bench/srql/query.ts reads the device at OFFSET 4242; below this the ratios mean little anyway. */
const MIN_DEVICES = 10_000;
const FULL_TIMEOUT_MS = 9 * 60_000;
const QUICK_TIMEOUT_MS = 90_000;
const QUICK_BUDGET_S = 5 * 60;

const USAGE =
  "usage: npm run bench -- [<substring>…] [--quick] [--scale=<devices>] [--write] [--timeout=<s>] [--recorded]";
function fail(msg: string): never {
  process.stderr.write(`${msg}\n${USAGE}\n`);
  process.exit(2);
}

function parseCount(s: string): number {
  const m = /^(\d+(?:\.\d+)?)([km]?)$/i.exec(s.replace(/[_,]/g, ""));
  if (!m) return Number.NaN;
  const mult = { "": 1, k: 1_000, m: 1_000_000 }[(m[2] as string).toLowerCase()] as number;
  return Math.round(Number(m[1]) * mult);
}

let quick = false;
let write = false;
/** `--recorded`: run nothing, only rewrite BENCHMARKS.md's copy of the bench/<domain>/RESULTS.md files. */
let recordedOnly = false;
let scaleArg: number | undefined;
let timeoutArg: number | undefined;
const filters: string[] = [];
for (const arg of process.argv.slice(2)) {
  if (arg === "--quick") quick = true;
  else if (arg === "--write") write = true;
  else if (arg === "--recorded") recordedOnly = true;
  else if (arg.startsWith("--scale=")) {
    scaleArg = parseCount(arg.slice("--scale=".length));
    if (!Number.isSafeInteger(scaleArg) || scaleArg < MIN_DEVICES)
      fail(`--scale needs a number of devices >= ${MIN_DEVICES.toLocaleString("en")} (got ${arg})`);
  } else if (arg.startsWith("--timeout=")) {
    timeoutArg = Number(arg.slice("--timeout=".length));
    if (!(timeoutArg > 0)) fail(`--timeout needs a number of seconds (got ${arg})`);
  } else if (arg === "--help" || arg === "-h") {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  } else if (arg.startsWith("-")) fail(`unknown flag ${arg}`);
  else filters.push(arg);
}
/** Devices scale; undefined = each script's own defaults (a plain full run). */
const devices = scaleArg ?? (quick ? QUICK_DEVICES : undefined);

/** A PostgreSQL bench database URL: the caller's, else the default one, suffixed off the default scale. */
function benchDbUrl(callerUrl: string | undefined, defaultName: string, n: number): string {
  if (callerUrl) return callerUrl;
  const name = n === DEFAULT_DEVICES ? defaultName : `${defaultName}_${n}`;
  return `postgres://root@127.0.0.1:5432/${name}`;
}

interface Plan {
  /** Data-set size knobs for `devices` devices (--scale, and --quick). */
  scale?: (n: number) => Record<string, string>;
  /** Duration / iteration knobs for --quick. */
  quick?: Record<string, string>;
  /** Runs after this script (it reads the database that one seeds). */
  after?: string;
  /** Its own timeout in a full run (a soak outlasts the default). */
  fullTimeoutS?: number;
  /** Left out of --quick: what it measures another script's quick run already exercises. */
  quickSkip?: string;
}

const div = (n: number, d: number) => String(Math.max(1, Math.round(n / d)));
const inventoryUrl = (n: number) =>
  benchDbUrl(process.env.INVENTORY_BENCH_DATABASE_URL, "inventory_bench", n);

/** The moonshot: a ladder up to the chosen scale (the report names the largest count whose reads stay < 100 ms p99). */
function moonshotPlan(quickChecks: number): Plan {
  return {
    scale: (n) => ({
      MOONSHOT_LADDER: [n / 100, n / 10, n].map((x) => Math.max(1000, Math.round(x))).join(","),
    }),
    quick: {
      MOONSHOT_LADDER: "10000",
      MOONSHOT_CHECKS: String(quickChecks),
      MOONSHOT_USERS: "5",
      MOONSHOT_SECONDS: "5",
      MOONSHOT_INTERVAL: "5",
    },
    fullTimeoutS: 45 * 60,
  };
}

// Keyed by script path. Values mirror each script's header comment; the defaults there are the
// full-scale run. A script missing here runs at its defaults in a quick run (a note says so).
const PLANS: Record<string, Plan> = {
  "bench/access/auth-overhead.ts": { quick: { ACCESS_BENCH_SECONDS: "1", ACCESS_BENCH_CACHE: "on" } },
  "bench/alerting/pipeline.ts": { quick: { ALERTING_BENCH_LOGS: "500", ALERTING_BENCH_DELIVERIES: "100" } },
  "bench/console/console.ts": { quick: { BENCH_CONSOLE_RUNS: "1" } },
  "bench/foundation/event-loop.ts": { quick: { BENCH_ROWS: "50000" } },
  "bench/foundation/http-edge.ts": { quick: { BENCH_SECONDS: "1" } },
  "bench/inventory/inventory.ts": {
    scale: (n) => ({
      INVENTORY_BENCH_DEVICES: String(n),
      INVENTORY_BENCH_PGLITE_DEVICES: div(n, 4),
      INVENTORY_BENCH_SIGHTINGS: div(n, 10),
      INVENTORY_BENCH_PGLITE_SIGHTINGS: div(n, 50),
      INVENTORY_BENCH_DATABASE_URL: inventoryUrl(n),
    }),
    quick: { INVENTORY_BENCH_ITERATIONS: "20" },
  },
  "bench/inventory/batch-probe.ts": {
    // Probes the database inventory.ts seeds (rolled back), so it runs after it.
    scale: (n) => ({ PROBE_N: String(n), PROBE_URL: inventoryUrl(n) }),
    after: "bench/inventory/inventory.ts",
  },
  "bench/inventory/reads.ts": {
    scale: (n) => ({
      READS_BENCH_DEVICES: String(n),
      READS_BENCH_PGLITE_DEVICES: String(n),
      READS_BENCH_DATABASE_URL: benchDbUrl(process.env.READS_BENCH_DATABASE_URL, "reads_bench", n),
    }),
    // PGlite's fresh migrate + seed alone takes ~45 s here: a quick run measures PostgreSQL only.
    quick: { READS_BENCH_SECONDS: "1", READS_BENCH_BACKENDS: "postgres" },
    // PostgreSQL (seeded once) and PGlite at 1M (seeded each run, ~2 min) outlast the default.
    fullTimeoutS: 20 * 60,
  },
  "bench/inventory/statistics.ts": { scale: (n) => ({ STATS_N: div(n, 20) }) },
  "bench/jsonapi/alerts-list.ts": {
    scale: (n) => ({ BENCH_ALERTS: String(n) }),
    quick: { BENCH_SECONDS: "2" },
  },
  "bench/monitoring/burst.ts": { quick: { NETMON_BENCH_CHECKS: "300" } },
  "bench/monitoring/ping-sweep.ts": { quick: { NETMON_BENCH_TARGETS: "256", NETMON_BENCH_ROUNDS: "3" } },
  "bench/monitoring/throughput.ts": {
    quick: { NETMON_BENCH_CHECKS: "400", NETMON_BENCH_INTERVAL: "5", NETMON_BENCH_SECONDS: "8" },
  },
  // The same ladder on each backend (PostgreSQL's quick run keeps fewer checks).
  "bench/ops/moonshot.ts": moonshotPlan(500),
  "bench/ops/moonshot-postgres.ts": moonshotPlan(200),
  // 30 minutes by design (goal 3 of issue 14); --quick keeps only its mechanics.
  "bench/ops/soak.ts": {
    quickSkip: "it is bench/ops/moonshot.ts without users, which the quick run exercises",
    fullTimeoutS: 40 * 60,
  },
  "bench/ops/restart.ts": {
    scale: (n) => ({ RESTART_BENCH_DEVICES: String(n) }),
    quickSkip: "bench/ops/startup.ts measures a restart in the quick run",
    fullTimeoutS: 20 * 60,
  },
  "bench/ops/startup.ts": { quick: { STARTUP_BENCH_IDLE_S: "2", STARTUP_BENCH_ROUNDS: "1" } },
  "bench/srql/query.ts": {
    scale: (n) => ({
      SRQL_BENCH_DEVICES: String(n),
      SRQL_BENCH_LOGS: String(n * 10),
      SRQL_BENCH_DATABASE_URL: benchDbUrl(process.env.SRQL_BENCH_DATABASE_URL, "srql_bench", n),
    }),
    quick: { SRQL_BENCH_ITER: "3" },
  },
  "bench/telemetry/otlp-ingest.ts": { quick: { OTLP_BENCH_BATCHES: "20" } },
  "bench/telemetry/syslog-udp.ts": { quick: { SYSLOG_BENCH_RATES: "2000,10000", SYSLOG_BENCH_SECONDS: "1" } },
};

/** The knobs run.ts sets for `script`: only those the caller did not set. */
function knobsFor(script: string): { set: Record<string, string>; shown: string[] } {
  const plan = PLANS[script] ?? {};
  const wanted = {
    ...(devices !== undefined && plan.scale ? plan.scale(devices) : {}),
    ...(quick ? (plan.quick ?? {}) : {}),
  };
  const set = Object.fromEntries(Object.entries(wanted).filter(([k]) => process.env[k] === undefined));
  const shown = Object.keys(wanted).map((k) => `${k}=${process.env[k] ?? set[k]}`);
  return { set, shown };
}

const all = fs
  .readdirSync(path.join(root, "bench"), { withFileTypes: true })
  .filter((d) => d.isDirectory() && !d.name.startsWith("_"))
  .flatMap((d) =>
    fs
      .readdirSync(path.join(root, "bench", d.name))
      .filter(
        (f) => f.endsWith(".ts") && !f.startsWith("_") && !f.endsWith(".test.ts") && !f.endsWith(".d.ts"),
      )
      .map((f) => path.join("bench", d.name, f)),
  )
  .filter((p) => filters.length === 0 || filters.some((f) => p.includes(f)))
  .sort();
// A script with `after` moves right behind that script when both run.
const scripts = all.filter((s) => !all.includes(PLANS[s]?.after ?? ""));
for (const s of all.filter((x) => !scripts.includes(x))) {
  scripts.splice(scripts.indexOf(PLANS[s]?.after as string) + 1, 0, s);
}
// Library-style helpers under bench/<domain>/ that are not benchmarks on their own.
const notBenchmarks = new Set(["bench/monitoring/targets-child.ts"]);
const toRun = recordedOnly
  ? []
  : scripts.filter((s) => !notBenchmarks.has(s) && !(quick && PLANS[s]?.quickSkip && filters.length === 0));
if (quick && filters.length === 0)
  for (const s of scripts.filter((x) => PLANS[x]?.quickSkip))
    process.stderr.write(`--quick leaves out ${s}: ${PLANS[s]?.quickSkip}\n`);
if (toRun.length === 0 && !recordedOnly) fail(`no benchmark script matches ${filters.join(", ")}`);

interface Outcome {
  status: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

let current: number | undefined;
function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {}
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    if (current) killGroup(current, "SIGKILL");
    process.exit(130);
  });
}

/** Runs one script in its own process group; on timeout the whole group (its servers too) goes. */
function runScript(script: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", script], {
      cwd: root,
      env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    current = child.pid;
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d;
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr = (stderr + d).slice(-8000);
    });
    let timedOut = false;
    let hardKill: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid as number, "SIGTERM");
      hardKill = setTimeout(() => killGroup(child.pid as number, "SIGKILL"), 5000);
    }, timeoutMs);
    // A process the script started in a group of its own (a detached server) may still hold the
    // pipes after the script is gone: give it a moment, then stop waiting for them.
    child.on("exit", () => {
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, 5000).unref();
    });
    child.on("close", (status, signal) => {
      clearTimeout(timer);
      clearTimeout(hardKill);
      // Whatever the script left behind in its group (a server it forgot) goes with it.
      killGroup(child.pid as number, "SIGKILL");
      current = undefined;
      resolve({ status, signal, timedOut, stdout, stderr });
    });
  });
}

/** Puts the scale note under a section's first heading (or on top when it has none). */
function withNote(out: string, note: string): string {
  if (!note) return out;
  const [first, ...rest] = out.split("\n");
  return first?.startsWith("#") ? `${first}\n\n${note}\n${rest.join("\n")}` : `${note}\n\n${out}`;
}

const mode = quick
  ? `--quick${scaleArg !== undefined ? ` --scale=${scaleArg}` : ""}`
  : scaleArg !== undefined
    ? `--scale=${scaleArg}`
    : "";
const timeoutMs = timeoutArg !== undefined ? timeoutArg * 1000 : quick ? QUICK_TIMEOUT_MS : FULL_TIMEOUT_MS;
const sections: string[] = [];
const summary: { script: string; result: string; secs: number }[] = [];
const tAll = Date.now();
process.stderr.write(
  `${toRun.length} script(s)${mode ? `, ${mode}` : ""}${devices !== undefined ? ` (${devices.toLocaleString("en")} devices)` : ""}, timeout ${timeoutMs / 1000} s each\n`,
);
for (const script of toRun) {
  const { set, shown } = knobsFor(script);
  if (quick && !PLANS[script])
    process.stderr.write(`note: no quick knobs for ${script}; it runs at its defaults\n`);
  process.stderr.write(`running ${script}${Object.keys(set).length ? ` (${shown.join(" ")})` : ""}\n`);
  const t0 = Date.now();
  const own = PLANS[script]?.fullTimeoutS;
  const scriptTimeoutMs = timeoutArg === undefined && !quick && own ? own * 1000 : timeoutMs;
  const r = await runScript(script, { ...process.env, ...set }, scriptTimeoutMs);
  const secs = (Date.now() - t0) / 1000;
  const note = mode
    ? `> ${quick ? "Quick run, not a recorded figure" : "Run at a chosen scale"} (\`npm run bench -- ${mode}\`)${shown.length ? `: ${shown.join(", ")}` : ", at the script's defaults"}.`
    : "";
  let result: string;
  if (r.status === 0) {
    result = "ok";
    // Some scripts run a server in-process whose warnings (pino JSON lines) reach stdout: not markdown.
    const text = r.stdout
      .split("\n")
      .filter((l) => !/^\{"level":\d+,/.test(l))
      .join("\n")
      .trim();
    sections.push(`<!-- ${script} (${secs.toFixed(0)} s) -->\n${withNote(text, note)}\n`);
  } else {
    result = r.timedOut
      ? `TIMED OUT after ${scriptTimeoutMs / 1000} s`
      : `FAILED (exit ${r.status ?? r.signal})`;
    sections.push(
      `<!-- ${script} (failed) -->\n## ${script}: ${result}\n\n${note ? `${note}\n\n` : ""}\`\`\`\n${(r.stderr || r.stdout).slice(-2000)}\n\`\`\`\n`,
    );
  }
  summary.push({ script, result, secs });
  process.stderr.write(`  ${result} in ${secs.toFixed(0)} s\n`);
}
const totalS = (Date.now() - tAll) / 1000;

const quickNote = `\`npm run bench -- --quick\` runs every script small in under 5 minutes (into BENCHMARKS.quick.md, git-ignored; \`--write\` puts it here).
\`npm run bench -- --scale=<devices>\` sets the data-set size of the inventory, SRQL and JSON:API benchmarks (default 1,000,000).`;
const machine = `Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB,
Node ${process.version}`;
const header = `# Benchmarks

Written by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}.
${machine}. Each section names the command that produced it. Figures compare
netmon against a peer measured in the same run (ratios), never against fixed times.
${quickNote}
`;
const quickHeader = `# Benchmarks: quick run

Written by \`npm run bench -- ${mode}\` on ${new Date().toISOString().slice(0, 10)}: every script at a small
scale (shown in each section), to see that the suite runs and roughly where the ratios lie. These are
not the recorded figures: those are in BENCHMARKS.md and bench/<domain>/RESULTS.md.
${machine}.
`;

const out = path.join(root, quick && !write ? "BENCHMARKS.quick.md" : "BENCHMARKS.md");
// Domain benchmarks record their full-scale runs (some need a 30-minute one-time seed) in
// bench/<domain>/RESULTS.md; BENCHMARKS.md always carries the latest of those too.
const RECORDED_MARK = "<!-- recorded domain results -->";
let recordedBlock = "";
if (path.basename(out) === "BENCHMARKS.md") {
  const recorded = fs
    .readdirSync(path.join(root, "bench"), { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(path.join(root, "bench", d.name, "RESULTS.md")))
    .map((d) => d.name)
    .sort()
    .map((name) => {
      const text = fs.readFileSync(path.join(root, "bench", name, "RESULTS.md"), "utf8").trim();
      // Demote headings one level so each domain sits under its own "##".
      return `## ${name} (recorded in bench/${name}/RESULTS.md)\n\n${text.replace(/^(#+) /gm, "#$1 ")}\n`;
    });
  // bench/SCORECARD.md: where each goal of the speed issue stands, written by hand from the
  // recorded runs; it opens the recorded block.
  const scorecardPath = path.join(root, "bench", "SCORECARD.md");
  const scorecard = fs.existsSync(scorecardPath)
    ? `${fs
        .readFileSync(scorecardPath, "utf8")
        .trim()
        .replace(/^(#+) /gm, "#$1 ")}\n\n`
    : "";
  recordedBlock = `${RECORDED_MARK}\n# Recorded domain benchmark runs\n\n${scorecard}${recorded.join("\n")}`;
}

if ((filters.length > 0 || recordedOnly) && fs.existsSync(out)) {
  // Partial run (or --recorded): replace only the sections that were re-run.
  let text = fs.readFileSync(out, "utf8").split(RECORDED_MARK)[0] as string;
  for (const s of sections) {
    const marker = /<!-- (\S+) /.exec(s)?.[1];
    const re = new RegExp(`<!-- ${marker?.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} [\\s\\S]*?(?=<!-- |$)`);
    text = re.test(text) ? text.replace(re, `${s}\n`) : `${text}\n${s}`;
  }
  fs.writeFileSync(out, `${text.trimEnd()}\n${recordedBlock ? `\n${recordedBlock}` : ""}`);
} else {
  fs.writeFileSync(
    out,
    `${quick && !write ? quickHeader : header}\n${sections.join("\n")}${recordedBlock ? `\n${recordedBlock}` : ""}`,
  );
}

const width = Math.max(...summary.map((s) => s.script.length));
process.stderr.write(`\n${"script".padEnd(width)}  ${"seconds".padStart(7)}  result\n`);
for (const s of summary)
  process.stderr.write(`${s.script.padEnd(width)}  ${s.secs.toFixed(0).padStart(7)}  ${s.result}\n`);
process.stderr.write(
  `${"total".padEnd(width)}  ${totalS.toFixed(0).padStart(7)}  load average now ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(", ")}\n`,
);
if (quick && totalS > QUICK_BUDGET_S)
  process.stderr.write(`quick run took ${totalS.toFixed(0)} s, over its ${QUICK_BUDGET_S} s budget\n`);
process.stderr.write(`wrote ${out}\n`);
process.exit(summary.every((s) => s.result === "ok") ? 0 : 1);
