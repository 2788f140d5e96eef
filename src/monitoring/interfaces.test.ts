import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../test/helpers/context.ts";
import type { AppContext } from "../kernel/context.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { runCheck } from "./checks/index.ts";
import type { SnmpInterface } from "./checks/snmp-interfaces.ts";
import { recordInterfaces } from "./interfaces.ts";
import { TargetPolicy } from "./target-policy.ts";
import { SNMP_COMMUNITY, startSnmpd, type Target } from "./testing/targets.ts";

let snmpd: Target;
let db: Db;
let ctx: AppContext;
beforeAll(async () => {
  snmpd = await startSnmpd();
  ctx = await createTestContext();
  db = ctx.db;
});
afterAll(async () => {
  await snmpd?.stop();
  await db?.close();
});

describe("SNMP interface discovery", () => {
  it("walks ifTable/ifXTable, classifies, stores interfaces and turns counters into rates", async () => {
    const spec = {
      check_type: "snmp" as const,
      target: "127.0.0.1",
      port: snmpd.port,
      timeout_seconds: 3,
      config: { community: SNMP_COMMUNITY, discover_interfaces: true },
    };
    const first = await runCheck(spec, { policy: new TargetPolicy() });
    expect(first.status).toBe("success");
    const ifaces = first.details?.interfaces as SnmpInterface[];
    const lo = ifaces.find((i) => i.if_descr === "lo" || i.if_name === "lo");
    expect(lo).toBeDefined();
    expect(lo?.if_index).toBeGreaterThan(0);
    expect(lo?.if_type).toBe(24); // softwareLoopback
    expect(lo?.counters.in_octets).toBeTypeOf("number");

    await db.query(sql`INSERT INTO interface_classification_rules (name, if_name_pattern, interface_kind, classification)
      VALUES ('loopbacks', '^lo$', 'loopback', 'internal')`);
    const t1 = new Date();
    await recordInterfaces(ctx, {
      deviceId: "dev-snmp",
      deviceIp: "127.0.0.1",
      agentId: "a",
      gatewayId: "g",
      sysDescr: null,
      interfaces: ifaces,
      at: t1,
    });
    // A second sample 10 s later with 1,250 more octets in: 1,000 bit/s.
    const later = ifaces.map((i) => ({
      ...i,
      counters: {
        ...i.counters,
        in_octets: (i.counters.in_octets ?? 0) + 1250,
        out_octets: i.counters.out_octets,
      },
    }));
    const r = await recordInterfaces(ctx, {
      deviceId: "dev-snmp",
      deviceIp: "127.0.0.1",
      agentId: "a",
      gatewayId: "g",
      sysDescr: null,
      interfaces: later,
      at: new Date(t1.getTime() + 10_000),
    });
    expect(r.rates).toBeGreaterThan(0);
    const row = await db.one<{ interface_kind: string; classification_source: string; if_index: number }>(
      sql`SELECT interface_kind, classification_source, if_index FROM interfaces WHERE device_id = 'dev-snmp' AND if_name = 'lo'`,
    );
    expect(row).toMatchObject({ interface_kind: "loopback", classification_source: "rule:loopbacks" });
    const rate = await db.one<{ value: number; unit: string }>(sql`
      SELECT value, unit FROM timeseries_metrics
      WHERE device_id = 'dev-snmp' AND metric_name = 'if_in_bps' AND if_index = ${row?.if_index}`);
    expect(rate).toEqual({ value: 1000, unit: "bit/s" });
  });
});
