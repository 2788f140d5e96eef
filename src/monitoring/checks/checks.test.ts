import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TargetPolicy } from "../target-policy.ts";
import {
  closedTcpPort,
  SNMP_COMMUNITY,
  SNMP_SYS_DESCR,
  SNMP_V3_USER,
  startDnsTarget,
  startGrpcTarget,
  startHttpTarget,
  startSnmpd,
  startTcpTarget,
  type Target,
} from "../testing/targets.ts";
import { parsePerfdata } from "./custom.ts";
import { runCheck } from "./index.ts";
import type { CheckSpec } from "./types.ts";

const policy = new TargetPolicy();
const run = (spec: Omit<CheckSpec, "timeout_seconds"> & { timeout_seconds?: number }, extra = {}) =>
  runCheck({ timeout_seconds: 2, ...spec }, { policy, ...extra });

let httpT: Awaited<ReturnType<typeof startHttpTarget>>;
let tcpT: Target;
let dnsT: Target;
let grpcT: Awaited<ReturnType<typeof startGrpcTarget>>;
let snmpT: Target;
let tmp: string;

beforeAll(async () => {
  [httpT, tcpT, dnsT, grpcT, snmpT] = await Promise.all([
    startHttpTarget(),
    startTcpTarget("SSH-2.0-netmon\r\n"),
    startDnsTarget(),
    startGrpcTarget(),
    startSnmpd(),
  ]);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-custom-"));
});
afterAll(async () => {
  await Promise.all([httpT?.stop(), tcpT?.stop(), dnsT?.stop(), grpcT?.stop(), snmpT?.stop()]);
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe("tcp", () => {
  it("succeeds on a listener and measures connect time", async () => {
    const r = await run({ check_type: "tcp", target: "127.0.0.1", port: tcpT.port });
    expect(r.status).toBe("success");
    expect(r.response_time_ms).toBeGreaterThanOrEqual(0);
    expect(r.metrics?.connect_ms).toBeTypeOf("number");
  });
  it("is critical on a closed port with the refusal as the error", async () => {
    const r = await run({ check_type: "tcp", target: "127.0.0.1", port: await closedTcpPort() });
    expect(r.status).toBe("critical");
    expect(r.error).toMatch(/ECONNREFUSED/);
  });
  it("checks an expected banner", async () => {
    const ok = await run({
      check_type: "tcp",
      target: "127.0.0.1",
      port: tcpT.port,
      config: { expect: "SSH-2.0" },
    });
    expect(ok.status).toBe("success");
    const bad = await run({
      check_type: "tcp",
      target: "127.0.0.1",
      port: tcpT.port,
      timeout_seconds: 1,
      config: { expect: "HTTP/1.1" },
    });
    expect(bad.status).toBe("critical");
  });
  it("applies the critical threshold to the response time", async () => {
    const r = await run({
      check_type: "tcp",
      target: "127.0.0.1",
      port: tcpT.port,
      critical_threshold_ms: 0,
    });
    expect(r.status).toBe("critical");
    expect(r.error).toMatch(/critical threshold/);
  });
});

describe("http", () => {
  const url = (p: string) => `http://127.0.0.1:${httpT.port}${p}`;
  it("succeeds with the expected status and body", async () => {
    const r = await run({ check_type: "http", target: url("/ok"), config: { body_match: "hello" } });
    expect(r).toMatchObject({ status: "success", details: { status_code: 200 } });
    expect(r.metrics?.ttfb_ms).toBeTypeOf("number");
  });
  it("is critical on an unexpected status or body mismatch", async () => {
    expect((await run({ check_type: "http", target: url("/fail") })).error).toBe("unexpected status 500");
    const r = await run({ check_type: "http", target: url("/ok"), config: { body_contains: "goodbye" } });
    expect(r.status).toBe("critical");
    expect(r.error).toMatch(/does not contain/);
  });
  it("accepts an explicit expected status", async () => {
    const r = await run({ check_type: "http", target: url("/fail"), config: { expected_status: [500] } });
    expect(r.status).toBe("success");
  });
  it("reads expected status written as text, as the console's form sends it", async () => {
    for (const expected_status of ["500", "200, 500", "5xx"]) {
      const r = await run({ check_type: "http", target: url("/fail"), config: { expected_status } });
      expect(r.status, expected_status).toBe("success");
    }
    // "200" means 200 only, not the 200–399 default.
    const ok = await run({ check_type: "http", target: url("/ok"), config: { expected_status: "204" } });
    expect(ok.status).toBe("critical");
  });
  it("follows redirects and stops redirect loops", async () => {
    const r = await run({ check_type: "http", target: url("/redirect") });
    expect(r.status).toBe("success");
    expect(r.details?.redirects).toHaveLength(1);
    const loop = await run({ check_type: "http", target: url("/loop"), config: { max_redirects: 3 } });
    expect(loop.status).toBe("critical");
    expect(loop.error).toMatch(/more than 3 redirects/);
  });
  it("times out on a hanging endpoint without waiting for it", async () => {
    const r = await run({ check_type: "http", target: url("/slow"), timeout_seconds: 1 });
    expect(r.status).toBe("critical");
    expect(r.error).toMatch(/timed out/);
  });
  it("refuses a redirect to a link-local metadata address", async () => {
    const r = await run({ check_type: "http", target: url("/metadata") });
    expect(r.status).toBe("error");
    expect(r.error).toMatch(/link-local/);
  });
});

describe("dns", () => {
  it("resolves through the configured server and compares the answer", async () => {
    const server = `127.0.0.1:${dnsT.port}`;
    const ok = await run({
      check_type: "dns",
      target: "ok.netmon.test",
      config: { server, expected: "10.1.2.3" },
    });
    expect(ok.status).toBe("success");
    expect(ok.details?.answers).toEqual(["10.1.2.3"]);
    const wrong = await run({
      check_type: "dns",
      target: "ok.netmon.test",
      config: { server, expected: "10.9.9.9" },
    });
    expect(wrong.status).toBe("critical");
    expect(wrong.error).toMatch(/expected answer 10.9.9.9/);
    const nx = await run({ check_type: "dns", target: "missing.netmon.test", config: { server } });
    expect(nx.status).toBe("critical");
    expect(nx.error).toMatch(/ENOTFOUND/);
  });
});

describe("grpc", () => {
  it("maps the health protocol statuses", async () => {
    const base = { check_type: "grpc" as const, target: "127.0.0.1", port: grpcT.port };
    expect((await run(base)).status).toBe("success");
    const down = await run({ ...base, config: { service: "netmon.Down" } });
    expect(down.status).toBe("critical");
    expect(down.error).toMatch(/NOT_SERVING/);
    const unknown = await run({ ...base, config: { service: "no.Such" } });
    expect(unknown.status).toBe("critical");
    expect(unknown.error).toMatch(/unknown to the server/);
    const closed = await run({ ...base, port: await closedTcpPort(), timeout_seconds: 1 });
    expect(closed.status).toBe("critical");
  });
});

describe("snmp", () => {
  it("gets OIDs with v2c and v3 authPriv", async () => {
    const v2 = await run({
      check_type: "snmp",
      target: "127.0.0.1",
      port: snmpT.port,
      config: { community: SNMP_COMMUNITY },
    });
    expect(v2.status).toBe("success");
    expect(Object.values(v2.details?.values as object)).toContain(SNMP_SYS_DESCR);
    const v3 = await run({
      check_type: "snmp",
      target: "127.0.0.1",
      port: snmpT.port,
      config: {
        version: "3",
        user: SNMP_V3_USER,
        oids: [{ oid: "1.3.6.1.2.1.1.1.0", name: "sysDescr" }],
        expected: { sysDescr: SNMP_SYS_DESCR },
      },
    });
    expect(v3.status).toBe("success");
  });
  it("is critical with a wrong community (no answer) or a missing OID", async () => {
    const wrong = await run({
      check_type: "snmp",
      target: "127.0.0.1",
      port: snmpT.port,
      timeout_seconds: 1,
      config: { community: "nope" },
    });
    expect(wrong.status).toBe("critical");
    expect(wrong.error).toMatch(/no SNMP response/);
    const missing = await run({
      check_type: "snmp",
      target: "127.0.0.1",
      port: snmpT.port,
      config: { community: SNMP_COMMUNITY, oids: ["1.3.6.1.4.1.99999.1.0"] },
    });
    expect(missing.status).toBe("critical");
    expect(missing.error).toMatch(/NoSuch/i);
  });
});

describe("ping and mtr", () => {
  it("pings loopback and reports loss for an unreachable address", async () => {
    const ok = await run({ check_type: "ping", target: "127.0.0.1", config: { count: 2 } });
    expect(ok.status).toBe("success");
    expect(ok.metrics?.packet_loss).toBe(0);
    // 198.51.100.0/24 is TEST-NET-2 (documentation range): nothing answers there.
    const lost = await run({
      check_type: "ping",
      target: "198.51.100.7",
      timeout_seconds: 1,
      config: { count: 1 },
    });
    expect(lost.status).toBe("critical");
    expect(lost.metrics?.packet_loss).toBe(100);
  });
  it("traces loopback in one hop", async () => {
    const r = await run({
      check_type: "mtr",
      target: "127.0.0.1",
      timeout_seconds: 20,
      config: { count: 1 },
    });
    expect(r.status).toBe("success");
    expect(r.details?.target_reached).toBe(true);
    expect(r.details?.hops).toHaveLength(1);
  });
});

describe("custom", () => {
  it("maps Nagios exit codes and perfdata, and refuses commands off the allow-list", async () => {
    const script = path.join(tmp, "check_thing.sh");
    fs.writeFileSync(script, '#!/bin/sh\necho "THING $1 | load=$2;5;10;0 \'used mem\'=42MB"\nexit "$1"\n', {
      mode: 0o755,
    });
    const allow = { customAllowList: [script] };
    const ok = await run(
      { check_type: "custom", target: "localhost", config: { command: script, args: ["0", "1.5"] } },
      allow,
    );
    expect(ok.status).toBe("success");
    expect(ok.metrics).toMatchObject({ load: 1.5, "used mem": 42 });
    expect(
      (await run({ check_type: "custom", target: "x", config: { command: script, args: ["1", "7"] } }, allow))
        .status,
    ).toBe("warning");
    expect(
      (
        await run(
          { check_type: "custom", target: "x", config: { command: script, args: ["2", "12"] } },
          allow,
        )
      ).status,
    ).toBe("critical");
    expect(
      (await run({ check_type: "custom", target: "x", config: { command: script, args: ["3", "0"] } }, allow))
        .status,
    ).toBe("unknown");
    expect(
      (await run({ check_type: "custom", target: "x", config: { command: script, args: ["7", "0"] } }, allow))
        .status,
    ).toBe("error");
    const refused = await run(
      { check_type: "custom", target: "x", config: { command: "/bin/sh", args: ["-c", "exit 0"] } },
      allow,
    );
    expect(refused.status).toBe("error");
    expect(refused.error).toMatch(/allow-list/);
  });
  it("parses perfdata with quoted labels and thresholds", () => {
    expect(parsePerfdata("time=0.5s;1;2;0;10 'a b'=3%")).toEqual([
      { label: "time", value: 0.5, uom: "s", warn: "1", crit: "2", min: 0, max: 10 },
      { label: "a b", value: 3, uom: "%", warn: undefined, crit: undefined, min: undefined, max: undefined },
    ]);
  });
});

describe("target policy", () => {
  it("refuses link-local and the core's own endpoint unless allowed", async () => {
    const r = await run({ check_type: "tcp", target: "169.254.169.254", port: 80 });
    expect(r.status).toBe("error");
    expect(r.error).toMatch(/link-local/);
    const guarded = new TargetPolicy({ coreEndpoints: [{ host: "0.0.0.0", port: tcpT.port }] });
    const core = await runCheck(
      { check_type: "tcp", target: "127.0.0.1", port: tcpT.port, timeout_seconds: 2 },
      { policy: guarded },
    );
    expect(core.status).toBe("error");
    expect(core.error).toMatch(/netmon core/);
    const allowed = new TargetPolicy({
      allowCore: true,
      coreEndpoints: [{ host: "0.0.0.0", port: tcpT.port }],
    });
    expect(
      (await runCheck({ check_type: "tcp", target: "127.0.0.1", port: tcpT.port }, { policy: allowed }))
        .status,
    ).toBe("success");
    expect(() => policy.validateTarget("ping", "fe80::1")).toThrow(/link-local/);
    expect(() => policy.validateTarget("http", "ftp://x")).toThrow();
    expect(() => policy.validateTarget("http", "https://example.com/x")).not.toThrow();
  });
});
