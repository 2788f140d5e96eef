/**
 * Real loopback servers that checks run against in tests and benchmarks: HTTP, TCP, DNS (UDP,
 * dns-packet), gRPC health, and a private Debian snmpd. Each returns its port and a stop().
 */
import { type ChildProcess, spawn } from "node:child_process";
import dgram from "node:dgram";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import dnsPacket from "dns-packet";
import { HealthImplementation, type ServingStatus } from "grpc-health-check";

export interface Target {
  port: number;
  stop(): Promise<void>;
}

export async function startHttpTarget(): Promise<Target & { hits: number }> {
  const state = { hits: 0 };
  const server = http.createServer((req, res) => {
    state.hits++;
    const url = req.url ?? "/";
    if (url.startsWith("/ok")) {
      res.writeHead(200, { "content-type": "text/plain" }).end("hello netmon");
    } else if (url.startsWith("/fail")) {
      res.writeHead(500).end("broken");
    } else if (url.startsWith("/slow")) {
      setTimeout(() => res.writeHead(200).end("slow"), 3000).unref();
    } else if (url.startsWith("/redirect")) {
      res.writeHead(302, { location: "/ok" }).end();
    } else if (url.startsWith("/loop")) {
      res.writeHead(302, { location: "/loop" }).end();
    } else if (url.startsWith("/metadata")) {
      res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
    } else {
      res.writeHead(404).end("not found");
    }
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    get hits() {
      return state.hits;
    },
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export async function startTcpTarget(banner?: string): Promise<Target> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
    if (banner) s.write(banner);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    stop: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A TCP port on 127.0.0.1 that nothing listens on (bound, then released). */
export async function closedTcpPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

export async function freeUdpPort(): Promise<number> {
  const s = dgram.createSocket("udp4");
  await new Promise<void>((r) => s.bind(0, "127.0.0.1", r));
  const port = s.address().port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Authoritative for `*.netmon.test`: A records from `records`, NXDOMAIN for everything else. */
export async function startDnsTarget(
  records: Record<string, string> = { "ok.netmon.test": "10.1.2.3" },
): Promise<Target> {
  const sock = dgram.createSocket("udp4");
  sock.on("message", (msg, rinfo) => {
    let q: dnsPacket.Packet;
    try {
      q = dnsPacket.decode(msg);
    } catch {
      return;
    }
    const question = q.questions?.[0];
    const ip = question && question.type === "A" ? records[question.name.toLowerCase()] : undefined;
    const reply = dnsPacket.encode({
      id: q.id,
      type: "response",
      flags:
        dnsPacket.AUTHORITATIVE_ANSWER | (ip || (question && records[question.name.toLowerCase()]) ? 0 : 3),
      questions: q.questions,
      answers: ip && question ? [{ type: "A", name: question.name, ttl: 60, class: "IN", data: ip }] : [],
    });
    sock.send(reply, rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => sock.bind(0, "127.0.0.1", r));
  return {
    port: sock.address().port,
    stop: () => new Promise<void>((r) => sock.close(() => r())),
  };
}

export async function startGrpcTarget(
  statuses: Record<string, ServingStatus> = { "": "SERVING", "netmon.Down": "NOT_SERVING" },
): Promise<Target & { setStatus(service: string, s: ServingStatus): void }> {
  const health = new HealthImplementation(statuses);
  const server = new grpc.Server();
  health.addToServer(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  return {
    port,
    setStatus: (s, st) => health.setStatus(s, st),
    stop: () =>
      new Promise<void>((r) => {
        server.tryShutdown(() => r());
        setTimeout(() => {
          server.forceShutdown();
          r();
        }, 1000).unref();
      }),
  };
}

export const SNMP_COMMUNITY = "netmontest";
export const SNMP_V3_USER = {
  name: "netmonv3",
  auth_protocol: "sha",
  auth_key: "authpass123",
  priv_protocol: "aes",
  priv_key: "privpass123",
};
export const SNMP_SYS_DESCR = "netmon-test-snmpd";

/** A private Debian snmpd on 127.0.0.1:<free port> with a v2c community and a v3 authPriv user. */
export async function startSnmpd(): Promise<Target> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-snmpd-"));
  const port = await freeUdpPort();
  fs.writeFileSync(
    path.join(dir, "snmpd.conf"),
    [
      `agentAddress udp:127.0.0.1:${port}`,
      `rocommunity ${SNMP_COMMUNITY} 127.0.0.1`,
      `createUser ${SNMP_V3_USER.name} SHA ${SNMP_V3_USER.auth_key} AES ${SNMP_V3_USER.priv_key}`,
      `rouser ${SNMP_V3_USER.name} priv`,
      `sysDescr ${SNMP_SYS_DESCR}`,
      "sysName netmon-snmp",
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn(
    "snmpd",
    [
      "-f",
      "-Lo",
      "-C",
      "-c",
      path.join(dir, "snmpd.conf"),
      "-M",
      "/dev/null",
      "-m",
      "",
      "-p",
      path.join(dir, "pid"),
    ],
    { env: { ...process.env, SNMP_PERSISTENT_DIR: dir, MIBS: "" }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let log = "";
  child.stdout?.on("data", (d) => {
    log += d.toString();
  });
  child.stderr?.on("data", (d) => {
    log += d.toString();
  });
  // Ready when it answers a v2c get.
  const { default: snmp } = await import("net-snmp");
  for (let i = 0; i < 50; i++) {
    if (child.exitCode !== null) throw new Error(`snmpd exited: ${log}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = snmp.createSession("127.0.0.1", SNMP_COMMUNITY, {
        port,
        timeout: 200,
        retries: 0,
        version: snmp.Version2c,
      });
      s.get(["1.3.6.1.2.1.1.1.0"], (err) => {
        s.close();
        resolve(!err);
      });
    });
    if (ok) break;
    if (i === 49) throw new Error(`snmpd did not answer on ${port}: ${log}`);
  }
  return {
    port,
    stop: async () => {
      child.kill("SIGTERM");
      await new Promise((r) => (child.exitCode !== null ? r(null) : child.once("exit", r)));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
