/**
 * Ping sweep of N loopback addresses (127.0.x.y): netmon's ICMP path (`echo()` from icmp.ts: the
 * raw-socket echo engine as root, else the fping fallback) against Debian's fping at its fastest
 * settings (-i 0, one probe each) on the same targets, side by side in the same run (rounds
 * alternate netmon / fping). netmon is asked for the same pacing as fping -i 0 (ratePerSecond 0,
 * which is also its default for loopback targets).
 *   NETMON_BENCH_TARGETS=1024 NETMON_BENCH_ROUNDS=7 node --import tsx bench/monitoring/ping-sweep.ts
 */
import { spawnSync } from "node:child_process";
import os from "node:os";
import { echo, icmpBackend } from "../../src/monitoring/checks/icmp.ts";

const N = Number(process.env.NETMON_BENCH_TARGETS ?? 1024);
const ROUNDS = Number(process.env.NETMON_BENCH_ROUNDS ?? 7);

const targets: string[] = [];
for (let i = 0; targets.length < N; i++) {
  const x = Math.floor(i / 254);
  const y = (i % 254) + 1;
  targets.push(`127.0.${x}.${y}`);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

let cpuUser = 0;
let cpuSystem = 0;
/** `sendMs`: until echo() returns its promise — the raw engine sends (and drains) synchronously. */
async function netmonRound(): Promise<{ ms: number; sendMs: number; alive: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const pending = echo(targets, { count: 1, timeoutMs: 1000, ratePerSecond: 0 });
  const sendMs = performance.now() - t0;
  const res = await pending;
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  cpuUser += c.user / 1000;
  cpuSystem += c.system / 1000;
  let alive = 0;
  for (const r of res.values()) if (r[0]?.alive) alive++;
  return { ms, sendMs, alive };
}

function fpingRound(): { ms: number; alive: number } {
  const t0 = performance.now();
  const r = spawnSync("fping", ["-q", "-a", "-i", "0", "-r", "0", "-t", "1000", ...targets], {
    encoding: "utf8",
  });
  const ms = performance.now() - t0;
  const alive = r.stdout.split("\n").filter(Boolean).length;
  return { ms, alive };
}

/** fping's fixed cost: process creation and exit, no probes (`fping -v`). */
function spawnRound(): number {
  const t0 = performance.now();
  spawnSync("fping", ["-v"], { encoding: "utf8" });
  return performance.now() - t0;
}

const load0 = os.loadavg();
await netmonRound(); // warm-up (socket creation, JIT)
fpingRound();
cpuUser = cpuSystem = 0;
const ours: number[] = [];
const theirs: number[] = [];
const spawns: number[] = [];
const sends: number[] = [];
let aliveOurs = 0;
let aliveTheirs = 0;
for (let i = 0; i < ROUNDS; i++) {
  const a = await netmonRound();
  const b = fpingRound();
  spawns.push(spawnRound());
  ours.push(a.ms);
  sends.push(a.sendMs);
  theirs.push(b.ms);
  aliveOurs = a.alive;
  aliveTheirs = b.alive;
}
const mo = median(ours);
const mf = median(theirs);
const ms = median(spawns);
const load1 = os.loadavg();
const la = (l: number[]) => l.map((x) => x.toFixed(2)).join(", ");
console.log(`## Ping sweep of ${N} loopback addresses (${ROUNDS} rounds, median wall time)

| implementation | median | min | max | alive |
|---|---|---|---|---|
| netmon (${icmpBackend()}) | ${mo.toFixed(1)} ms | ${Math.min(...ours).toFixed(1)} ms | ${Math.max(...ours).toFixed(1)} ms | ${aliveOurs}/${N} |
| fping -i 0 -r 0 | ${mf.toFixed(1)} ms | ${Math.min(...theirs).toFixed(1)} ms | ${Math.max(...theirs).toFixed(1)} ms | ${aliveTheirs}/${N} |
| (fping -v: process start/exit only) | ${ms.toFixed(1)} ms | ${Math.min(...spawns).toFixed(1)} ms | ${Math.max(...spawns).toFixed(1)} ms | – |

netmon: median ${median(sends).toFixed(1)} ms of each round is the synchronous send loop (sendto per target, socket drained every 32);
CPU per round ${(cpuUser / ROUNDS).toFixed(1)} ms user (JavaScript + addon), ${(cpuSystem / ROUNDS).toFixed(1)} ms system (kernel: sendto, loopback delivery, echo reply, recvfrom).

Ratio netmon / fping: **${(mo / mf).toFixed(2)}×** (goal ≤ 1.5×); against fping without its process start
(median fping − median fping -v): ${(mo / Math.max(0.001, mf - ms)).toFixed(2)}×.
Load average (1, 5, 15 min) before: ${la(load0)}; after: ${la(load1)}.
`);
process.exit(0);
