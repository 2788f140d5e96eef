import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCheck } from "../../monitoring/checks/index.ts";
import { guardedRequest } from "./guarded-request.ts";
import { OutboundPolicy } from "./outbound-policy.ts";

/**
 * Issue 10 item 2: every spelling of a refused address is refused by the one guard, and a real
 * check and a real webhook request never reach a loopback listener standing in for the core.
 */

let core: http.Server;
let corePort: number;
let hits = 0;
let other: http.Server;
let otherPort: number;

function listen(handler: http.RequestListener): Promise<[http.Server, number]> {
  return new Promise((resolve) => {
    const s = http.createServer(handler);
    s.listen(0, "127.0.0.1", () => resolve([s, (s.address() as AddressInfo).port]));
  });
}

beforeAll(async () => {
  [core, corePort] = await listen((_req, res) => {
    hits++;
    res.end("core");
  });
  // An allowed listener that redirects to the core.
  [other, otherPort] = await listen((req, res) => {
    const to = new URL(req.url ?? "/", "http://x").searchParams.get("to") ?? "";
    res.writeHead(302, { location: to }).end();
  });
});
afterAll(() => {
  core?.close();
  other?.close();
});

const guard = () => new OutboundPolicy({ coreEndpoints: [{ host: "0.0.0.0", port: corePort }] });

const CORE_FORMS = [
  "127.0.0.1",
  "127.0.0.2",
  "::1",
  "[::1]",
  "::ffff:127.0.0.1",
  "[::ffff:127.0.0.1]",
  "::ffff:7f00:1",
  "[::ffff:7f00:1]",
  "0:0:0:0:0:ffff:7f00:1",
  "::127.0.0.1",
  "64:ff9b::7f00:1",
  "2130706433",
  "0x7f000001",
  "0177.0.0.1",
  "127.1",
  "localhost",
];
const ALWAYS_REFUSED = ["0.0.0.0", "0", "::", "[::]", "0.1.2.3", "::ffff:0.0.0.0"];
const METADATA = [
  "169.254.169.254",
  "::ffff:169.254.169.254",
  "[::ffff:169.254.169.254]",
  "::ffff:a9fe:a9fe",
  "64:ff9b::a9fe:a9fe",
  "2852039166",
  "0xa9fea9fe",
  "0251.0376.0251.0376",
  "fe80::1",
  "[fe80::1%25eth0]",
];

describe("the outbound guard compares addresses, not strings", () => {
  it("refuses every spelling of the core's address on the core's port", async () => {
    for (const form of CORE_FORMS) {
      await expect(guard().resolve(form, corePort), form).rejects.toThrow(/this netmon core/);
      await expect(guard().resolve(form, corePort + 1), form).resolves.toBeTruthy();
    }
  });

  it("refuses 'this host' and link-local (metadata) addresses on any port", async () => {
    for (const form of ALWAYS_REFUSED)
      await expect(guard().resolve(form, 80), form).rejects.toThrow(/this host/);
    for (const form of METADATA) await expect(guard().resolve(form, 80), form).rejects.toThrow(/link-local/);
    const allowed = new OutboundPolicy({ allowLinkLocal: true });
    await expect(allowed.resolve("::ffff:a9fe:a9fe", 80)).resolves.toBe("169.254.169.254");
  });

  it("vets at create time without DNS", () => {
    for (const t of ["http://[::ffff:169.254.169.254]/", "http://0xa9fea9fe/", "http://0.0.0.0:4000/"])
      expect(() => guard().validateTarget("http", t), t).toThrow();
    expect(() => guard().validateTarget("ping", "::ffff:a9fe:a9fe")).toThrow(/link-local/);
    expect(() => guard().validateTarget("tcp", "[::]")).toThrow(/this host/);
  });
});

describe("real checks and webhooks never reach a refused address", () => {
  it("an http check in every URL spelling of the core does not reach it", async () => {
    const before = hits;
    for (const host of [
      "127.0.0.1",
      "[::ffff:127.0.0.1]",
      "[::ffff:7f00:1]",
      "2130706433",
      "0x7f000001",
      "127.1",
    ]) {
      const r = await runCheck(
        { check_type: "http", target: `http://${host}:${corePort}/`, timeout_seconds: 2 },
        { policy: guard() },
      );
      expect(r.status, host).toBe("error");
      expect(r.error, host).toMatch(/netmon core/);
    }
    expect(hits).toBe(before);
  });

  it("an http check that is redirected to the core stops at the redirect", async () => {
    const before = hits;
    for (const to of [
      `http://127.0.0.1:${corePort}/`,
      `http://[::ffff:7f00:1]:${corePort}/`,
      "http://169.254.169.254/",
    ]) {
      const r = await runCheck(
        {
          check_type: "http",
          target: `http://127.0.0.1:${otherPort}/?to=${encodeURIComponent(to)}`,
          timeout_seconds: 2,
        },
        { policy: guard() },
      );
      expect(r.status, to).toBe("error");
    }
    expect(hits).toBe(before);
  });

  it("a webhook request to the core is refused before connecting, in every spelling", async () => {
    const before = hits;
    for (const host of ["127.0.0.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "2130706433", "localhost"]) {
      await expect(
        guardedRequest(guard(), `http://${host}:${corePort}/hook`, {
          method: "POST",
          headers: {},
          body: "{}",
          timeoutMs: 2000,
        }),
        host,
      ).rejects.toThrow(/netmon core/);
    }
    expect(hits).toBe(before);
    // The same request to an allowed listener goes through (and is not followed when redirected).
    const ok = await guardedRequest(guard(), `http://localhost:${otherPort}/?to=x`, {
      method: "POST",
      headers: {},
      body: "{}",
      timeoutMs: 2000,
    });
    expect(ok.status).toBe(302);
  });
});
