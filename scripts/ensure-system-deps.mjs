#!/usr/bin/env node
// Test prerequisites from Debian. As root (here and on CI) missing packages are installed;
// otherwise we stop with one line naming the package and the command. Never skip silently.
import { execFileSync, spawnSync } from "node:child_process";

/** command on PATH → Debian package providing it. Extend as suites need more tools. */
const REQUIRED = [
  // monitoring: ICMP fallback, loopback SNMP agent for tests, traceroute for mtr checks
  ["fping", "fping"],
  ["ping", "iputils-ping"],
  ["snmpd", "snmpd"],
  ["snmpget", "snmp"],
  ["mtr", "mtr-tiny"],
  // telemetry ingest: real senders (util-linux logger for syslog; snmptrap comes with snmp)
  ["logger", "bsdutils"],
  // console: browser tests drive Debian's Chromium through playwright-core (no browser downloads)
  ["chromium", "chromium"],
];

const missing = REQUIRED.filter(([cmd]) => spawnSync("sh", ["-c", `command -v ${cmd}`]).status !== 0);
if (missing.length === 0) process.exit(0);

const pkgs = [...new Set(missing.map(([, pkg]) => pkg))];
if (process.getuid?.() === 0) {
  console.log(`installing test prerequisites: ${pkgs.join(" ")}`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  execFileSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...pkgs], {
    stdio: "inherit",
    env,
  });
  process.exit(0);
}
console.error(
  `missing test prerequisites: ${pkgs.join(" ")} — install with: sudo apt-get install -y ${pkgs.join(" ")}`,
);
process.exit(1);
