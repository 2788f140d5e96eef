import { execFileSync } from "node:child_process";
import dgram from "node:dgram";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEventRule } from "../../src/alerting/event-rules.ts";
import { testActor } from "../../src/alerting/test-context.ts";
import { receiversOf } from "../../src/telemetry/feature.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { freeTcpUdpPort } from "../helpers/ports.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** The syslog receiver over real loopback UDP datagrams and TCP streams, read back via v2/SRQL. */
describe("syslog receiver (UDP and TCP, RFC 5424 and RFC 3164)", () => {
  let server: TestServer;
  let port: number;
  let token: string;
  const DEVICE_UID = "sr:5e5106e0-0000-4000-8000-000000000001";

  beforeAll(async () => {
    port = await freeTcpUdpPort();
    server = await startTestServer({
      env: { NETMON_SYSLOG_PORT: String(port), NETMON_INGEST_HOST: "127.0.0.1" },
    });
    token = await tokenFor(server, "viewer");
    await server.db.query(
      `INSERT INTO devices (uid, hostname, ip, partition, first_seen_time, last_seen_time)
       VALUES ($1, 'loopback-box', '127.0.0.1', 'default', now(), now())`,
      [DEVICE_UID],
    );
  });
  afterAll(async () => {
    await server?.stop();
  });

  const flush = () => receiversOf(server.ctx).syslog?.flush();

  function sendUdp(message: string): Promise<void> {
    const sock = dgram.createSocket("udp4");
    return new Promise((resolve, reject) =>
      sock.send(Buffer.from(message), port, "127.0.0.1", (err) => {
        sock.close();
        if (err) reject(err);
        else resolve();
      }),
    );
  }

  async function sendTcp(chunks: (string | Buffer)[]): Promise<void> {
    const sock = net.connect(port, "127.0.0.1");
    await new Promise<void>((r) => sock.once("connect", () => r()));
    for (const c of chunks) {
      sock.write(c);
      await new Promise((r) => setTimeout(r, 20));
    }
    await new Promise<void>((r) => sock.end(() => r()));
  }

  /** Datagrams arrive asynchronously: poll until `want` rows are there (or 5 s passed). */
  async function logs(query: string, want = 1): Promise<Record<string, unknown>[]> {
    let rows: Record<string, unknown>[] = [];
    for (let i = 0; i < 100; i++) {
      await flush();
      rows = await logsNow(query);
      if (rows.length >= want) return rows;
      await new Promise((r) => setTimeout(r, 50));
    }
    return rows;
  }

  async function logsNow(query: string): Promise<Record<string, unknown>[]> {
    const res = await server.fetch(`/api/v2/logs?${query}&sort=timestamp`, { headers: authHeaders(token) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { data: { attributes: Record<string, unknown> }[] }).data.map(
      (d) => d.attributes,
    );
  }

  it("stores an RFC 5424 datagram with facility, severity, app, host, structured data and the device", async () => {
    await sendUdp(
      '<165>1 2026-11-24T10:14:15.003Z mymachine.example.com evntslog 42 ID47 [exampleSDID@32473 iut="3" eventSource="Application"] An application event',
    );
    await flush();
    const [log] = await logs("filter[service_name]=evntslog");
    expect(log).toMatchObject({
      body: "An application event",
      host: "mymachine.example.com",
      facility: "local4",
      severity_text: "INFO",
      severity_number: 10,
      source: "syslog",
      source_ip: "127.0.0.1",
      device_id: DEVICE_UID,
      timestamp: "2026-11-24T10:14:15.003Z",
    });
    expect(log?.attributes).toMatchObject({
      "syslog.format": "rfc5424",
      "syslog.severity_name": "notice",
      "syslog.procid": "42",
      "syslog.msgid": "ID47",
      "syslog.transport": "udp",
      "syslog.structured_data": { "exampleSDID@32473": { iut: "3", eventSource: "Application" } },
    });
  });

  it("stores an RFC 3164 datagram", async () => {
    await sendUdp("<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8");
    await flush();
    const [log] = await logs("filter[service_name]=su");
    expect(log).toMatchObject({
      body: "'su root' failed for lonvick on /dev/pts/8",
      host: "mymachine",
      facility: "auth",
      severity_text: "FATAL",
      device_id: DEVICE_UID,
    });
    expect(log?.attributes).toMatchObject({ "syslog.format": "rfc3164", "syslog.severity_name": "critical" });
  });

  it("frames TCP streams by octet counting (split across writes) and by newlines", async () => {
    const a = "<13>1 2026-11-24T10:00:00Z h1 tcpapp - - - first framed";
    const b = "<13>1 2026-11-24T10:00:01Z h1 tcpapp - - - second framed, with\nan embedded newline";
    const counted = `${Buffer.byteLength(a)} ${a}${Buffer.byteLength(b)} ${b}`;
    await sendTcp([counted.slice(0, 30), counted.slice(30, 70), counted.slice(70)]);
    await sendTcp([
      "<14>Nov 24 10:00:02 h2 lineapp[7]: line one\n<14>Nov 24 10:00:03 h2 lineapp[7]: line",
      " two\r\n",
    ]);
    await flush();
    const framed = await logs("filter[service_name]=tcpapp", 2);
    expect(framed.map((l) => l.body)).toEqual(["first framed", "second framed, with\nan embedded newline"]);
    expect(framed[0]?.attributes).toMatchObject({ "syslog.transport": "tcp" });
    const lines = await logs("filter[service_name]=lineapp", 2);
    expect(lines.map((l) => l.body)).toEqual(["line one", "line two"]);
  });

  it("keeps junk as the body, bounds long lines, and an event rule promotes syslog messages", async () => {
    await createEventRule(server.ctx, testActor("admin", ["observability.rules.create"]), {
      name: "link down",
      match: { body_contains: "link down" },
      event: { alert: { title: "Link down (syslog)", severity: "warning" } },
    });
    await sendUdp("no priority at all: link down on ge-0/0/1");
    await sendTcp([
      `<14>1 - - longapp - - - ${"x".repeat(70_000)}\n<14>1 - - afterlong - - - still framed\n`,
    ]);
    await logs("filter[service_name]=afterlong");
    await logs("filter[source]=syslog&filter[body]=no priority at all: link down on ge-0/0/1");
    const res = await server.fetch("/api/query", {
      method: "POST",
      headers: { ...authHeaders(await tokenFor(server, "admin")), "content-type": "application/json" },
      body: JSON.stringify({ query: "in:logs source:syslog body:%ge-0/0/1%" }),
    });
    const junk = ((await res.json()) as { results: Record<string, unknown>[] }).results;
    expect(junk.map((l) => l.body)).toEqual(["no priority at all: link down on ge-0/0/1"]);
    const alerts = await server.db.many("SELECT 1 FROM alerts WHERE title = 'Link down (syslog)'");
    expect(alerts).toHaveLength(1);
    const [long] = await logs("filter[service_name]=longapp");
    expect(String(long?.body).length).toBeLessThan(8200);
    expect(long?.attributes).toMatchObject({ "syslog.truncated": true });
    expect(await logs("filter[service_name]=afterlong")).toHaveLength(1);
    expect(receiversOf(server.ctx).syslog?.stats.dropped).toBe(0);
  });

  it("takes messages from util-linux logger over UDP (RFC 5424) and TCP (RFC 3164, octet counting)", async () => {
    const logger = (...args: string[]) =>
      execFileSync("logger", ["--server", "127.0.0.1", "--port", String(port), ...args], { timeout: 10_000 });
    logger("--udp", "--rfc5424", "-t", "logger-udp", "-p", "local0.err", "disk almost full on /var");
    logger(
      "--tcp",
      "--rfc3164",
      "--octet-count",
      "-t",
      "logger-tcp",
      "-p",
      "daemon.warning",
      "fan speed low",
    );
    const [udp] = await logs("filter[service_name]=logger-udp");
    expect(udp).toMatchObject({
      body: "disk almost full on /var",
      facility: "local0",
      severity_text: "ERROR",
      device_id: DEVICE_UID,
    });
    expect(udp?.attributes).toMatchObject({ "syslog.format": "rfc5424", "syslog.transport": "udp" });
    const [tcp] = await logs("filter[service_name]=logger-tcp");
    expect(tcp).toMatchObject({ body: "fan speed low", facility: "daemon", severity_text: "WARN" });
    expect(tcp?.attributes).toMatchObject({ "syslog.format": "rfc3164", "syslog.transport": "tcp" });
  });

  it("keeps messages received while storage refuses writes and stores them once it recovers", async () => {
    await server.db.query("ALTER TABLE logs RENAME TO logs_offline");
    try {
      await sendUdp("<14>1 - - outage-udp - - - during the outage (udp)");
      await sendTcp(["<14>1 - - outage-tcp - - - during the outage (tcp)\n"]);
      await new Promise((r) => setTimeout(r, 600)); // a few failed write attempts
    } finally {
      await server.db.query("ALTER TABLE logs_offline RENAME TO logs");
    }
    expect((await logs("filter[service_name]=outage-udp"))[0]?.body).toBe("during the outage (udp)");
    expect((await logs("filter[service_name]=outage-tcp"))[0]?.body).toBe("during the outage (tcp)");
  });

  it("closes a TCP stream with a malformed octet count instead of buffering it", async () => {
    const sock = net.connect(port, "127.0.0.1");
    await new Promise<void>((r) => sock.once("connect", () => r()));
    sock.write("99999999 <14>1 - - - - - - x");
    await new Promise<void>((r) => sock.once("close", () => r()));
    expect(sock.destroyed).toBe(true);
  });
});

describe("a receiver port already taken", () => {
  it("leaves that receiver off with an error logged; the server and the HTTP API run", async () => {
    const port = await freeTcpUdpPort();
    const squatter = net.createServer();
    await new Promise<void>((r) => squatter.listen(port, "127.0.0.1", () => r()));
    const server = await startTestServer({
      env: {
        NETMON_SYSLOG_PORT: String(port),
        NETMON_OTLP_GRPC_PORT: String(port),
        NETMON_INGEST_HOST: "127.0.0.1",
      },
    });
    try {
      expect(receiversOf(server.ctx).otlpGrpc).toBeNull();
      expect(receiversOf(server.ctx).syslog).toBeNull();
      expect(server.logs.filter((l) => l.includes("receiver could not start")).length).toBe(2);
      expect((await server.fetch("/health")).status).toBe(200);
    } finally {
      await server.stop();
      await new Promise<void>((r) => squatter.close(() => r()));
    }
  });
});
