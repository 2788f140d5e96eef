import { execFileSync } from "node:child_process";
import snmp from "net-snmp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { receiversOf } from "../../src/telemetry/feature.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { freeTcpUdpPort } from "../helpers/ports.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** SNMP traps (v2c and v3) sent with net-snmp's session.trap and snmptrap over loopback. */
describe("SNMP trap receiver", () => {
  let server: TestServer;
  let port: number;
  let token: string;
  const DEVICE_UID = "sr:5e5106e0-0000-4000-8000-0000000000aa";

  beforeAll(async () => {
    port = await freeTcpUdpPort();
    server = await startTestServer({
      env: {
        NETMON_SNMP_TRAP_PORT: String(port),
        NETMON_INGEST_HOST: "127.0.0.1",
        NETMON_SNMP_TRAP_COMMUNITIES: "traps-only",
        NETMON_SNMP_TRAP_USERS: "trapper:sha:authpass123:aes:privpass123",
      },
    });
    token = await tokenFor(server, "viewer");
    await server.db.query(
      `INSERT INTO devices (uid, hostname, ip, partition, first_seen_time, last_seen_time)
       VALUES ($1, 'switch-1', '127.0.0.1', 'default', now(), now())`,
      [DEVICE_UID],
    );
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function logs(query: string, want = 1): Promise<Record<string, unknown>[]> {
    let rows: Record<string, unknown>[] = [];
    for (let i = 0; i < 100; i++) {
      await receiversOf(server.ctx).snmpTrap?.flush();
      const res = await server.fetch(`/api/v2/logs?${query}`, { headers: authHeaders(token) });
      rows = ((await res.json()) as { data: { attributes: Record<string, unknown> }[] }).data.map(
        (d) => d.attributes,
      );
      if (rows.length >= want) return rows;
      await new Promise((r) => setTimeout(r, 50));
    }
    return rows;
  }

  function send(session: snmp.Session, oid: string, varbinds: snmp.Varbind[] = []): Promise<void> {
    return new Promise((resolve, reject) =>
      session.trap(oid, varbinds, (err: Error | null) => {
        session.close();
        if (err) reject(err);
        else resolve();
      }),
    );
  }

  it("turns a v2c linkDown trap into a log and an event linked to the device", async () => {
    const session = snmp.createSession("127.0.0.1", "traps-only", {
      version: snmp.Version2c,
      trapPort: port,
    });
    await send(session, "1.3.6.1.6.3.1.1.5.3", [
      { oid: "1.3.6.1.2.1.2.2.1.1.7", type: snmp.ObjectType.Integer, value: 7 },
      { oid: "1.3.6.1.2.1.2.2.1.2.7", type: snmp.ObjectType.OctetString, value: "ge-0/0/7" },
    ]);
    const [log] = await logs("filter[source]=snmp_trap&filter[event_name]=linkDown");
    expect(log).toMatchObject({
      severity_text: "WARN",
      source_ip: "127.0.0.1",
      device_id: DEVICE_UID,
      body: "SNMP trap linkDown (1.3.6.1.6.3.1.1.5.3) from 127.0.0.1",
    });
    expect(log?.attributes).toMatchObject({
      "snmp.version": "2c",
      "snmp.trap_oid": "1.3.6.1.6.3.1.1.5.3",
      "snmp.varbinds": { "1.3.6.1.2.1.2.2.1.1.7": 7, "1.3.6.1.2.1.2.2.1.2.7": "ge-0/0/7" },
    });
    const events = await server.db.many<{ device_uid: string; message: string; severity: string }>(
      "SELECT device_uid, message, severity FROM events WHERE source_type = 'snmp_trap'",
    );
    expect(events).toEqual([
      {
        device_uid: DEVICE_UID,
        message: "SNMP trap linkDown (1.3.6.1.6.3.1.1.5.3) from 127.0.0.1",
        severity: "Medium",
      },
    ]);
  });

  it("accepts v3 traps from a configured user (authPriv) and refuses unknown communities", async () => {
    const session = snmp.createV3Session(
      "127.0.0.1",
      {
        name: "trapper",
        level: snmp.SecurityLevel.authPriv,
        authProtocol: snmp.AuthProtocols.sha,
        authKey: "authpass123",
        privProtocol: snmp.PrivProtocols.aes,
        privKey: "privpass123",
      },
      { trapPort: port },
    );
    await send(session, "1.3.6.1.4.1.8072.2.3.0.1");
    const [v3] = await logs("filter[source]=snmp_trap&filter[event_name]=1.3.6.1.4.1.8072.2.3.0.1");
    expect(v3?.attributes).toMatchObject({ "snmp.version": "3" });

    const refusedBefore = receiversOf(server.ctx).snmpTrap?.stats.refused ?? 0;
    await send(
      snmp.createSession("127.0.0.1", "public", { version: snmp.Version2c, trapPort: port }),
      "1.3.6.1.6.3.1.1.5.1",
    );
    for (let i = 0; i < 50 && (receiversOf(server.ctx).snmpTrap?.stats.refused ?? 0) === refusedBefore; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(receiversOf(server.ctx).snmpTrap?.stats.refused).toBe(refusedBefore + 1);
    expect(await logs("filter[source]=snmp_trap&filter[event_name]=coldStart", 0)).toEqual([]);
  });

  it("takes a v2c trap from net-snmp's snmptrap command", async () => {
    execFileSync(
      "snmptrap",
      [
        "-v",
        "2c",
        "-c",
        "traps-only",
        `127.0.0.1:${port}`,
        "",
        "1.3.6.1.6.3.1.1.5.4",
        "1.3.6.1.2.1.2.2.1.1.3",
        "i",
        "3",
      ],
      { timeout: 10_000 },
    );
    const [up] = await logs("filter[source]=snmp_trap&filter[event_name]=linkUp");
    expect(up).toMatchObject({ severity_text: "INFO", device_id: DEVICE_UID });
    expect(up?.attributes).toMatchObject({ "snmp.varbinds": { "1.3.6.1.2.1.2.2.1.1.3": 3 } });
  });
});
