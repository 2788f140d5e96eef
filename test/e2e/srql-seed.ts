import { randomUUID } from "node:crypto";
import type { Db } from "../../src/storage/db.ts";
import {
  insertCapacityForecasts,
  insertCpuMetrics,
  insertDiskMetrics,
  insertEvents,
  insertLogs,
  insertMemoryMetrics,
  insertMetricPoints,
  insertOtelMetrics,
  insertProcessMetrics,
  insertServiceStatus,
  insertSpans,
  insertTimeseries,
} from "../../src/telemetry/write.ts";

/** Seed data for the SRQL end-to-end tests: a few rows in every entity's table. */
export interface Seed {
  now: number;
  deviceUids: string[];
}

export const minutesAgo = (now: number, m: number) => new Date(now - m * 60_000);

export async function seedAll(db: Db): Promise<Seed> {
  const now = Date.now();
  const uids = Array.from({ length: 6 }, () => `sr:${randomUUID()}`);
  const devices = [
    {
      host: "cam-lobby",
      ip: "10.0.0.11",
      vendor: "Axis",
      type: "Camera",
      avail: true,
      src: ["sweep", "armis"],
      part: "default",
      os: "AxisOS",
    },
    {
      host: "cam-garage",
      ip: "10.0.0.60",
      vendor: "Axis",
      type: "Camera",
      avail: false,
      src: ["sweep"],
      part: "default",
      os: "AxisOS",
    },
    {
      host: "core-sw1",
      ip: "10.1.0.1",
      vendor: "Cisco",
      type: "Switch",
      avail: true,
      src: ["armis"],
      part: "default",
      os: "IOS",
    },
    {
      host: "edge-rtr",
      ip: "192.168.1.1",
      vendor: "Cisco",
      type: "Router",
      avail: true,
      src: ["sweep", "armis"],
      part: "p2",
      os: "IOS-XE",
    },
    {
      host: "test-box",
      ip: "10.0.0.30",
      vendor: "Dell",
      type: "Server",
      avail: false,
      src: ["agent"],
      part: "default",
      os: "Linux",
    },
    {
      host: "deleted-box",
      ip: "10.0.0.31",
      vendor: "Dell",
      type: "Server",
      avail: true,
      src: ["agent"],
      part: "default",
      os: "Linux",
    },
  ];
  for (const [i, d] of devices.entries()) {
    await db.query(
      `INSERT INTO devices (uid, hostname, ip, mac, type, vendor_name, is_available, discovery_sources, os, tags,
         metadata, last_seen_time, first_seen_time, partition, deleted_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text[], $9::jsonb, $10::jsonb, $11::jsonb, $12, $13, $14, $15)`,
      [
        uids[i],
        d.host,
        d.ip,
        `AA:BB:CC:DD:EE:${String(i).padStart(2, "0")}`,
        d.type,
        d.vendor,
        d.avail,
        d.src,
        JSON.stringify({ name: d.os }),
        JSON.stringify({ role: i % 2 === 0 ? "edge" : "core" }),
        JSON.stringify({ site: i < 3 ? "dfw-edge" : "nyc" }),
        minutesAgo(now, 10 * (i + 1)),
        minutesAgo(now, 60 * 24 * (i + 1)),
        d.part,
        d.host === "deleted-box" ? new Date(now) : null,
      ],
    );
  }
  for (const [i, uid] of uids.slice(0, 3).entries()) {
    await db.query(
      `INSERT INTO interfaces (uid, device_id, interface_uid, if_name, if_index, if_oper_status, ip_addresses, "timestamp", partition, if_phys_address)
       VALUES ($1, $2, $3, $4, $5, $6, $7::text[], $8, 'default', $9)`,
      [
        `${uid}/eth${i}`,
        uid,
        `eth${i}`,
        `eth${i}`,
        i + 1,
        i === 2 ? 2 : 1,
        [`10.9.0.${i + 1}`],
        minutesAgo(now, i + 1),
        `00:11:22:33:44:${String(i).padStart(2, "0")}`,
      ],
    );
  }
  await db.query(
    `INSERT INTO gateways (gateway_id, status, is_healthy, agent_count, last_seen) VALUES
       ('gw-a', 'healthy', true, 5, $1), ('gw-b', 'degraded', false, 1, $2), ('gw-c', 'healthy', true, 9, $3)`,
    [minutesAgo(now, 1), minutesAgo(now, 2), minutesAgo(now, 3)],
  );
  await db.query(
    `INSERT INTO agents (uid, name, status, capabilities, host, gateway_id, last_seen_time) VALUES
       ('agent-1', 'a1', 'connected', '["icmp","snmp","tcp"]'::jsonb, '10.0.0.5', 'gw-a', $1),
       ('agent-2', 'a2', 'degraded', '["icmp"]'::jsonb, '10.0.0.6', 'gw-b', $2)`,
    [minutesAgo(now, 1), minutesAgo(now, 2)],
  );
  await db.query(
    `INSERT INTO alerts (title, severity, status, source_type, device_uid, triggered_at) VALUES
       ('CPU high', 'critical', 'pending', 'device', $1, $3),
       ('Disk full', 'warning', 'acknowledged', 'device', $2, $4),
       ('System check', 'info', 'pending', 'system', NULL, $5)`,
    [uids[0], uids[3], minutesAgo(now, 5), minutesAgo(now, 6), minutesAgo(now, 7)],
  );
  const sched = await db.one<{ id: string }>(
    `INSERT INTO polling_schedules (name, interval_seconds) VALUES ('every-minute', 60) RETURNING id`,
  );
  await db.query(
    `INSERT INTO poll_jobs (schedule_id, schedule_name, status, agent_id, inserted_at) VALUES
       ($1, 'every-minute', 'completed', 'agent-1', $2), ($1, 'every-minute', 'failed', 'agent-2', $3),
       ($1, 'every-minute', 'pending', NULL, $4)`,
    [sched?.id, minutesAgo(now, 3), minutesAgo(now, 2), minutesAgo(now, 1)],
  );

  const severities = ["ERROR", "WARN", "INFO", "INFO", "DEBUG"];
  await insertLogs(
    db,
    Array.from({ length: 25 }, (_, i) => ({
      timestamp: minutesAgo(now, i + 1),
      severity_text: severities[i % 5],
      severity_number: [17, 13, 9, 9, 5][i % 5],
      body: i === 3 ? "connection refused by upstream" : `message number ${i}`,
      service_name: i % 2 === 0 ? "core" : "poller",
      device_id: uids[i % 3],
      attributes: { "http.method": i % 2 === 0 ? "GET" : "POST" },
      partition: i === 24 ? "p2" : "default",
    })),
  );
  await insertEvents(db, [
    {
      time: minutesAgo(now, 1),
      severity: "Critical",
      severity_id: 5,
      message: "link down on eth0",
      device_uid: uids[0],
      log_level: "ERROR",
    },
    {
      time: minutesAgo(now, 2),
      severity: "High",
      severity_id: 4,
      message: "fan speed",
      device_uid: uids[1],
      log_level: "WARN",
    },
    {
      time: minutesAgo(now, 3),
      severity: "Low",
      severity_id: 2,
      message: "config saved",
      device_uid: uids[2],
      log_level: "INFO",
    },
  ]);
  await insertSpans(db, [
    {
      timestamp: minutesAgo(now, 2),
      trace_id: "t1",
      span_id: "s1",
      name: "GET /api",
      service_name: "web",
      kind: 2,
      status_code: 1,
      duration_ms: 40,
      start_time_unix_nano: 1_000_000,
      end_time_unix_nano: 41_000_000,
    },
    {
      timestamp: minutesAgo(now, 2),
      trace_id: "t1",
      span_id: "s2",
      parent_span_id: "s1",
      name: "SELECT",
      service_name: "db",
      kind: 3,
      status_code: 2,
      duration_ms: 30,
      start_time_unix_nano: 5_000_000,
      end_time_unix_nano: 35_000_000,
    },
    {
      timestamp: minutesAgo(now, 3),
      trace_id: "t2",
      span_id: "s3",
      name: "POST /x",
      service_name: "web",
      kind: 2,
      status_code: 0,
      duration_ms: 5,
      start_time_unix_nano: 1,
      end_time_unix_nano: 5_000_001,
    },
  ]);
  await insertOtelMetrics(db, [
    {
      timestamp: minutesAgo(now, 1),
      service_name: "web",
      span_name: "GET /api",
      duration_ms: 900,
      is_slow: true,
      metric_type: "span",
    },
    {
      timestamp: minutesAgo(now, 2),
      service_name: "web",
      span_name: "GET /x",
      duration_ms: 10,
      is_slow: false,
      metric_type: "span",
    },
  ]);
  await insertMetricPoints(db, [
    {
      timestamp: minutesAgo(now, 1),
      metric_name: "http.requests",
      metric_type: "sum",
      value: 10,
      service_name: "web",
    },
    {
      timestamp: minutesAgo(now, 2),
      metric_name: "http.requests",
      metric_type: "sum",
      value: 20,
      service_name: "web",
    },
  ]);
  await insertTimeseries(
    db,
    Array.from({ length: 12 }, (_, i) => ({
      timestamp: minutesAgo(now, i * 5 + 1),
      metric_name: i % 2 === 0 ? "icmp_rtt_ms" : "if_in_octets",
      metric_type: i % 2 === 0 ? "icmp" : "snmp",
      device_id: uids[0],
      value: i * 10,
      target_device_ip: "10.0.0.11",
    })),
  );
  await insertCpuMetrics(
    db,
    Array.from({ length: 6 }, (_, i) => ({
      timestamp: minutesAgo(now, i + 1),
      device_id: uids[i % 2],
      host_id: `h${i % 2}`,
      core_id: i % 3,
      usage_percent: [88.2, 10, 50, 88.25, 99, 1][i],
    })),
  );
  await insertMemoryMetrics(db, [
    {
      timestamp: minutesAgo(now, 1),
      device_id: uids[0],
      usage_percent: 50,
      used_bytes: 500,
      total_bytes: 1000,
    },
    {
      timestamp: minutesAgo(now, 2),
      device_id: uids[0],
      usage_percent: 70,
      used_bytes: 700,
      total_bytes: 1000,
    },
  ]);
  await insertDiskMetrics(db, [
    {
      timestamp: minutesAgo(now, 1),
      device_id: uids[0],
      mount_point: "/",
      usage_percent: 91,
      used_bytes: 91,
      total_bytes: 100,
    },
    {
      timestamp: minutesAgo(now, 1),
      device_id: uids[0],
      mount_point: "/var",
      usage_percent: 20,
      used_bytes: 20,
      total_bytes: 100,
    },
  ]);
  await insertProcessMetrics(db, [
    {
      timestamp: minutesAgo(now, 1),
      device_id: uids[0],
      name: "postgres",
      pid: 10,
      cpu_usage: 12.5,
      memory_usage: 1000,
      status: "running",
    },
    {
      timestamp: minutesAgo(now, 1),
      device_id: uids[0],
      name: "nginx",
      pid: 11,
      cpu_usage: 1.5,
      memory_usage: 100,
      status: "sleeping",
    },
  ]);
  await insertServiceStatus(db, [
    {
      timestamp: minutesAgo(now, 1),
      service_name: "ssh",
      service_type: "ssh",
      available: true,
      status: "ok",
      device_uid: uids[0],
      response_time_ms: 3,
    },
    {
      timestamp: minutesAgo(now, 2),
      service_name: "sftp",
      service_type: "sftp",
      available: false,
      status: "failed",
      device_uid: uids[1],
      response_time_ms: 3000,
    },
    {
      timestamp: minutesAgo(now, 3),
      service_name: "web",
      service_type: "http",
      available: true,
      status: "ok",
      device_uid: uids[2],
      response_time_ms: 12,
    },
  ]);
  await insertCapacityForecasts(db, [
    {
      forecasted_at: minutesAgo(now, 5),
      resource_key: "disk:/",
      metric_name: "disk_usage",
      horizon_seconds: 86400,
      resource_label: "root disk",
      projected_exhaustion_at: minutesAgo(now, -600),
    },
    {
      forecasted_at: minutesAgo(now, 5),
      resource_key: "mem",
      metric_name: "memory_usage",
      horizon_seconds: 86400,
      resource_label: "memory",
      status: "skipped",
      skip_reason: "too few points",
    },
  ]);
  return { now, deviceUids: uids };
}
