/**
 * Syslog over TLS (RFC 5425, issue 15): a real TLS client with a certificate made by openssl
 * sends octet-counted RFC 5424 frames; they are stored with transport `tls`. A plain-TCP sender
 * on the TLS port gets nothing stored and does not disturb the listener.
 */
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { receiversOf } from "../../src/telemetry/feature.ts";
import { selfSignedCert } from "../helpers/certs.ts";
import { freeTcpUdpPort } from "../helpers/ports.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

let server: TestServer;
let cert = "";
let dir = "";

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-syslog-tls-"));
  const pair = selfSignedCert("localhost", { ipSan: "127.0.0.1" });
  cert = pair.cert;
  fs.writeFileSync(path.join(dir, "cert.pem"), pair.cert);
  fs.writeFileSync(path.join(dir, "key.pem"), pair.key, { mode: 0o600 });
  const port = await freeTcpUdpPort();
  const tlsPort = await freeTcpUdpPort();
  server = await startTestServer({
    env: {
      NETMON_SYSLOG_PORT: String(port),
      NETMON_SYSLOG_TLS_PORT: String(tlsPort),
      NETMON_SYSLOG_TLS_CERT_FILE: path.join(dir, "cert.pem"),
      NETMON_SYSLOG_TLS_KEY_FILE: path.join(dir, "key.pem"),
      NETMON_INGEST_HOST: "127.0.0.1",
    },
  });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const frame = (msg: string) => `${Buffer.byteLength(msg)} ${msg}`;

describe("syslog over TLS (RFC 5425)", () => {
  it("stores octet-counted frames sent over a verified TLS connection", async () => {
    const port = receiversOf(server.ctx).syslog?.tlsPort as number;
    expect(port).toBeGreaterThan(0);
    const sock = tls.connect({ host: "127.0.0.1", port, ca: cert, servername: "localhost" });
    await new Promise<void>((resolve, reject) => {
      sock.once("secureConnect", () => resolve());
      sock.once("error", reject);
    });
    expect(sock.authorized).toBe(true);
    expect(["TLSv1.2", "TLSv1.3"]).toContain(sock.getProtocol());
    const stamp = new Date().toISOString();
    sock.write(
      frame(`<11>1 ${stamp} fw01 firewall 77 DROP - packet dropped from 10.0.0.9`) +
        frame(`<14>1 ${stamp} fw01 firewall 77 INFO - rule reloaded`),
    );
    await new Promise<void>((r) => sock.end(() => r()));
    const rows = await waitFor(async () => {
      await receiversOf(server.ctx).syslog?.flush();
      const r = await server.db.many<{
        body: string;
        severity_text: string;
        attributes: Record<string, unknown>;
      }>("SELECT body, severity_text, attributes FROM logs WHERE service_name = 'firewall' ORDER BY body");
      return r.length >= 2 ? r : null;
    }, "the TLS frames to be stored");
    expect(rows.map((r) => r.body)).toEqual(["packet dropped from 10.0.0.9", "rule reloaded"]);
    expect(rows[0]?.severity_text).toBe("ERROR");
    expect(rows[0]?.attributes["syslog.transport"]).toBe("tls");
  });

  it("a plain-TCP sender on the TLS port stores nothing and the listener keeps serving", async () => {
    const port = receiversOf(server.ctx).syslog?.tlsPort as number;
    const plain = net.connect(port, "127.0.0.1");
    await new Promise<void>((r) => plain.once("connect", () => r()));
    plain.write(frame("<11>1 - plainhost plaintext - - - not encrypted"));
    await new Promise<void>((r) => plain.once("close", () => r()));
    await receiversOf(server.ctx).syslog?.flush();
    expect(await server.db.many("SELECT 1 FROM logs WHERE service_name = 'plaintext'")).toEqual([]);

    const again = tls.connect({ host: "127.0.0.1", port, ca: cert, servername: "localhost" });
    await new Promise<void>((resolve, reject) => {
      again.once("secureConnect", () => resolve());
      again.once("error", reject);
    });
    again.end(frame(`<13>1 ${new Date().toISOString()} fw02 after 1 - - still listening`));
    await waitFor(async () => {
      await receiversOf(server.ctx).syslog?.flush();
      return (await server.db.many("SELECT 1 FROM logs WHERE service_name = 'after'")).length === 1;
    }, "the frame after the plain-TCP attempt");
  });
});
