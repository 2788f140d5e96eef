/**
 * Host metrics (sysmon): CPU per core, memory, disks and the busiest processes, read from
 * `os` and /proc by the agent, stored by the core in cpu_metrics / memory_metrics /
 * disk_metrics / process_metrics (the SRQL engineer's tables; rollups are theirs).
 */
import fs from "node:fs";
import { isIP } from "node:net";
import os from "node:os";
import { SYSTEM_ACTOR } from "../access/actor.ts";
import { ingestSightings } from "../inventory/ingest.ts";
import type { AppContext } from "../kernel/context.ts";
import { join, sql } from "../storage/sql.ts";

export interface HostMetricsSample {
  timestamp: string;
  host_id: string;
  /** The host's primary address (first non-internal IPv4, else loopback): its device's IP. */
  host_ip?: string;
  cpus: { core_id: number; usage_percent: number; frequency_hz: number }[];
  memory: { total_bytes: number; used_bytes: number; available_bytes: number; usage_percent: number };
  disks: {
    mount_point: string;
    device_name: string;
    total_bytes: number;
    used_bytes: number;
    available_bytes: number;
    usage_percent: number;
  }[];
  processes: {
    pid: number;
    name: string;
    command_line: string;
    status: string;
    cpu_usage: number;
    memory_usage: number;
    start_time: string;
  }[];
}

type CpuTimes = { idle: number; total: number }[];
const REAL_FS = new Set([
  "ext2",
  "ext3",
  "ext4",
  "xfs",
  "btrfs",
  "zfs",
  "vfat",
  "ntfs",
  "overlay",
  "tmpfs",
  "f2fs",
]);

function cpuTimes(): CpuTimes {
  return os.cpus().map((c) => {
    const t = c.times;
    return { idle: t.idle, total: t.user + t.nice + t.sys + t.idle + t.irq };
  });
}

function memAvailable(): number {
  try {
    const m = /MemAvailable:\s+(\d+) kB/.exec(fs.readFileSync("/proc/meminfo", "utf8"));
    if (m) return Number(m[1]) * 1024;
  } catch {}
  return os.freemem();
}

function disks(): HostMetricsSample["disks"] {
  let mounts: string[] = [];
  try {
    mounts = fs.readFileSync("/proc/mounts", "utf8").split("\n");
  } catch {
    return [];
  }
  const out: HostMetricsSample["disks"] = [];
  const seen = new Set<string>();
  for (const line of mounts) {
    const [dev, mount, type] = line.split(" ");
    if (
      !dev ||
      !mount ||
      !type ||
      !REAL_FS.has(type) ||
      seen.has(mount) ||
      mount.startsWith("/proc") ||
      mount.startsWith("/sys")
    )
      continue;
    if (type === "tmpfs" && mount !== "/tmp" && mount !== "/dev/shm") continue;
    seen.add(mount);
    try {
      const s = fs.statfsSync(mount);
      const total = s.blocks * s.bsize;
      if (total === 0) continue;
      const avail = s.bavail * s.bsize;
      const used = total - s.bfree * s.bsize;
      out.push({
        mount_point: mount,
        device_name: dev,
        total_bytes: total,
        used_bytes: used,
        available_bytes: avail,
        usage_percent: round((used / total) * 100),
      });
    } catch {}
    if (out.length >= 32) break;
  }
  return out;
}

const CLK_TCK = 100;
const PAGE = 4096;

function processes(
  limit: number,
  prev: Map<number, number>,
  elapsedSec: number,
): HostMetricsSample["processes"] {
  let pids: number[] = [];
  try {
    pids = fs
      .readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .map(Number);
  } catch {
    return [];
  }
  const bootTime = Date.now() / 1000 - os.uptime();
  const rows: (HostMetricsSample["processes"][number] & { ticks: number })[] = [];
  for (const pid of pids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const name = stat.slice(stat.indexOf("(") + 1, close);
      const f = stat.slice(close + 2).split(" ");
      const ticks = Number(f[11]) + Number(f[12]);
      const rss = Number(f[21]) * PAGE;
      const started = bootTime + Number(f[19]) / CLK_TCK;
      const before = prev.get(pid);
      const cpu =
        before === undefined || elapsedSec <= 0 ? 0 : ((ticks - before) / CLK_TCK / elapsedSec) * 100;
      let cmd = "";
      try {
        cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0+/g, " ").trim().slice(0, 512);
      } catch {}
      rows.push({
        pid,
        name,
        command_line: cmd,
        status: f[0] ?? "?",
        cpu_usage: round(cpu),
        memory_usage: rss,
        start_time: new Date(started * 1000).toISOString(),
        ticks,
      });
    } catch {}
  }
  prev.clear();
  for (const r of rows) prev.set(r.pid, r.ticks);
  rows.sort((a, b) => b.cpu_usage - a.cpu_usage || b.memory_usage - a.memory_usage);
  return rows.slice(0, limit).map(({ ticks: _t, ...r }) => r);
}

/** The first non-internal IPv4 address (interfaces in name order), else 127.0.0.1. */
export function primaryIpv4(): string {
  const ifs = os.networkInterfaces();
  for (const name of Object.keys(ifs).sort()) {
    for (const a of ifs[name] ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  }
  return "127.0.0.1";
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

/** Keeps the previous CPU counters so each sample reports usage over the last period. */
export class HostMetricsCollector {
  private cpuPrev: CpuTimes = cpuTimes();
  private procPrev = new Map<number, number>();
  private last = Date.now();

  constructor(private readonly processLimit = 20) {
    processes(0, this.procPrev, 0);
  }

  sample(): HostMetricsSample {
    const now = Date.now();
    const cur = cpuTimes();
    const cpus = cur.map((c, i) => {
      const p = this.cpuPrev[i] ?? { idle: 0, total: 0 };
      const dt = c.total - p.total;
      const usage = dt > 0 ? (1 - (c.idle - p.idle) / dt) * 100 : 0;
      return {
        core_id: i,
        usage_percent: round(Math.max(0, Math.min(100, usage))),
        frequency_hz: (os.cpus()[i]?.speed ?? 0) * 1e6,
      };
    });
    this.cpuPrev = cur;
    const total = os.totalmem();
    const avail = memAvailable();
    const elapsed = (now - this.last) / 1000;
    this.last = now;
    return {
      timestamp: new Date(now).toISOString(),
      host_id: os.hostname(),
      host_ip: primaryIpv4(),
      cpus,
      memory: {
        total_bytes: total,
        used_bytes: total - avail,
        available_bytes: avail,
        usage_percent: round(((total - avail) / total) * 100),
      },
      disks: disks(),
      processes: processes(this.processLimit, this.procPrev, elapsed),
    };
  }
}

function parseSample(raw: unknown): HostMetricsSample {
  const s = raw as HostMetricsSample;
  if (
    !s ||
    typeof s !== "object" ||
    !Array.isArray(s.cpus) ||
    !s.memory ||
    !Array.isArray(s.disks) ||
    !Array.isArray(s.processes)
  ) {
    throw new Error("invalid host metrics sample");
  }
  return s;
}

const HOST_DEVICES = new WeakMap<AppContext, Map<string, string>>();

/**
 * The device an agent's host metrics belong to (issue 13): the host the agent runs on is a
 * device like any other (source "agent", identified by the agent id and its address), linked
 * from `agents.device_uid`. Resolved once per agent and process, then cached.
 */
export async function hostDeviceOf(
  ctx: AppContext,
  agentId: string,
  sample: HostMetricsSample,
): Promise<string | null> {
  let cache = HOST_DEVICES.get(ctx);
  if (!cache) {
    cache = new Map();
    HOST_DEVICES.set(ctx, cache);
  }
  const known = cache.get(agentId);
  if (known) return known;
  const linked = await ctx.db.one<{ device_uid: string | null }>(
    sql`SELECT a.device_uid FROM agents a JOIN devices d ON d.uid = a.device_uid AND d.deleted_at IS NULL
         WHERE a.uid = ${agentId}`,
  );
  let uid = linked?.device_uid ?? null;
  if (!uid) {
    const ip = typeof sample.host_ip === "string" && isIP(sample.host_ip) ? sample.host_ip : "127.0.0.1";
    const r = await ingestSightings(ctx, SYSTEM_ACTOR, [
      {
        ip,
        hostname: String(sample.host_id).slice(0, 255),
        source: "agent",
        agent_id: agentId,
        metadata: { netmon_agent: agentId },
      },
    ]);
    uid = r.results[0]?.uid ?? null;
    if (!uid) return null;
    await ctx.db.query(sql`UPDATE agents SET device_uid = ${uid} WHERE uid = ${agentId}`);
  }
  cache.set(agentId, uid);
  return uid;
}

/** Store one agent sample in the sysmon tables, keyed by agent and by the host's device. */
export async function recordHostMetrics(
  ctx: AppContext,
  body: { agentId: string; gatewayId: string | null; deviceId?: string | null; sample: unknown },
): Promise<void> {
  const s = parseSample(body.sample);
  const ts = Number.isNaN(Date.parse(s.timestamp)) ? ctx.now() : new Date(s.timestamp);
  let deviceId = body.deviceId ?? null;
  if (!deviceId) {
    try {
      deviceId = await hostDeviceOf(ctx, body.agentId, s);
    } catch (err) {
      // The samples still count; the link to a device is retried with the next sample.
      ctx.log.warn({ err, agent_id: body.agentId }, "could not resolve the agent's host device");
    }
  }
  const common = (extra: ReturnType<typeof sql>) =>
    sql`(${ts}, ${body.gatewayId}, ${body.agentId}, ${String(s.host_id).slice(0, 255)}, ${deviceId}, ${extra})`;
  await ctx.db.transaction(async (tx) => {
    if (s.cpus.length > 0) {
      await tx.query(sql`INSERT INTO cpu_metrics ("timestamp", gateway_id, agent_id, host_id, device_id, core_id, label, usage_percent, frequency_hz)
        VALUES ${join(s.cpus.slice(0, 1024).map((c) => common(sql`${Number(c.core_id)}, ${`cpu${c.core_id}`}, ${Number(c.usage_percent)}, ${Number(c.frequency_hz)}`)))}`);
    }
    const m = s.memory;
    await tx.query(sql`INSERT INTO memory_metrics ("timestamp", gateway_id, agent_id, host_id, device_id, usage_percent, total_bytes, used_bytes, available_bytes)
      VALUES ${common(sql`${Number(m.usage_percent)}, ${Math.round(m.total_bytes)}, ${Math.round(m.used_bytes)}, ${Math.round(m.available_bytes)}`)}`);
    if (s.disks.length > 0) {
      await tx.query(sql`INSERT INTO disk_metrics ("timestamp", gateway_id, agent_id, host_id, device_id, mount_point, device_name, usage_percent, total_bytes, used_bytes, available_bytes)
        VALUES ${join(s.disks.slice(0, 256).map((d) => common(sql`${String(d.mount_point)}, ${String(d.device_name)}, ${Number(d.usage_percent)}, ${Math.round(d.total_bytes)}, ${Math.round(d.used_bytes)}, ${Math.round(d.available_bytes)}`)))}`);
    }
    if (s.processes.length > 0) {
      await tx.query(sql`INSERT INTO process_metrics ("timestamp", gateway_id, agent_id, host_id, device_id, pid, name, command_line, status, cpu_usage, memory_usage, start_time)
        VALUES ${join(s.processes.slice(0, 200).map((p) => common(sql`${Number(p.pid)}, ${String(p.name).slice(0, 255)}, ${String(p.command_line).slice(0, 1024)}, ${String(p.status)}, ${Number(p.cpu_usage)}, ${Math.round(p.memory_usage)}, ${String(p.start_time)}`)))}`);
    }
  });
}
