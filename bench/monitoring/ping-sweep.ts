/**
 * Ping sweep of N loopback addresses (127.0.x.y): netmon's ICMP path (net-ping raw sockets as
 * root, one session, all targets concurrently) against Debian's fping at its fastest settings
 * (-i 0, one probe each) on the same targets, side by side in the same run.
 *   NETMON_BENCH_TARGETS=1024 NETMON_BENCH_ROUNDS=7 node --import tsx bench/monitoring/ping-sweep.ts
 */
import { spawnSync } from "node:child_process";
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

async function netmonRound(): Promise<{ ms: number; alive: number }> {
  const t0 = performance.now();
  const res = await echo(targets, { count: 1, timeoutMs: 1000 });
  const ms = performance.now() - t0;
  let alive = 0;
  for (const r of res.values()) if (r[0]?.alive) alive++;
  return { ms, alive };
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

await netmonRound(); // warm-up (session creation)
fpingRound();
const ours: number[] = [];
const theirs: number[] = [];
let aliveOurs = 0;
let aliveTheirs = 0;
for (let i = 0; i < ROUNDS; i++) {
  const a = await netmonRound();
  const b = fpingRound();
  ours.push(a.ms);
  theirs.push(b.ms);
  aliveOurs = a.alive;
  aliveTheirs = b.alive;
}
const mo = median(ours);
const mf = median(theirs);
console.log(`## Ping sweep of ${N} loopback addresses (${ROUNDS} rounds, median wall time)

| implementation | median | min | max | alive |
|---|---|---|---|---|
| netmon (${icmpBackend()}) | ${mo.toFixed(1)} ms | ${Math.min(...ours).toFixed(1)} ms | ${Math.max(...ours).toFixed(1)} ms | ${aliveOurs}/${N} |
| fping -i 0 -r 0 | ${mf.toFixed(1)} ms | ${Math.min(...theirs).toFixed(1)} ms | ${Math.max(...theirs).toFixed(1)} ms | ${aliveTheirs}/${N} |

Ratio netmon / fping: **${(mo / mf).toFixed(2)}×** (goal ≤ 1.5×).
`);
process.exit(0);
