import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decide, ruleKind, satisfies } from "../../src/access/rule.ts";
import { importDevicesFile } from "../../src/inventory/import.ts";
import { parseDeepQuery } from "../../src/jsonapi/engine/query.ts";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * Issue 10 item 1: request data must never reach Object.prototype, and access rules must never
 * be decided through the prototype chain. Item 9: unknown body members are refused.
 */

const names = () => Object.getOwnPropertyNames(Object.prototype).sort().join(",");
const DUMMY = "00000000-0000-4000-8000-000000000000";

describe("prototype pollution through every parser", () => {
  let server: TestServer;
  let viewer: Record<string, string>;
  let operator: Record<string, string>;
  const before = names();

  beforeAll(async () => {
    server = await startTestServer();
    viewer = authHeaders(await tokenFor(server, "viewer"));
    operator = authHeaders(await tokenFor(server, "operator"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("refuses prototype keys in bracket query strings, anonymously and signed in", async () => {
    for (const q of [
      "filter[__proto__][optional]=1",
      "filter[constructor][prototype][public]=1",
      "__proto__[optional]=1",
      "page[prototype]=1",
    ]) {
      for (const headers of [{}, viewer]) {
        const res = await server.fetch(`/api/v2/event-rules?${q}`, { headers });
        expect(res.status, q).toBe(400);
        const body = (await res.json()) as { errors: { source?: { parameter?: string } }[] };
        expect(body.errors[0]?.source?.parameter).toBeTruthy();
      }
    }
    expect(names()).toBe(before);
    expect(({} as Record<string, unknown>).optional).toBeUndefined();
  });

  it("keeps access unchanged after pollution attempts", async () => {
    await server.fetch("/api/v2/event-rules?filter[__proto__][optional]=1");
    await server.fetch("/api/v2/event-rules?filter[__proto__][public]=1");
    const del = await server.fetch(`/api/v2/event-rules/${DUMMY}`, { method: "DELETE", headers: viewer });
    expect(del.status).toBe(403);
    const anon = await server.fetch("/api/v2/devices");
    expect(anon.status).toBe(401);
    const gw = await server.fetch("/api/v2/gateways", { headers: viewer });
    expect(gw.status).not.toBe(401);
  });

  it("refuses __proto__ and constructor.prototype in JSON and JSON:API bodies", async () => {
    const bodies = [
      '{"__proto__":{"optional":1},"query":"in:devices"}',
      '{"query":"in:devices","constructor":{"prototype":{"public":1}}}',
    ];
    for (const body of bodies) {
      const res = await server.fetch("/api/query", {
        method: "POST",
        headers: { ...operator, "content-type": "application/json" },
        body,
      });
      expect(res.status, body).toBe(400);
    }
    for (const body of [
      '{"data":{"type":"device-groups","attributes":{"name":"g","__proto__":{"public":1}}}}',
      '{"data":{"type":"device-groups","attributes":{"name":"g","metadata":{"constructor":{"prototype":{"x":1}}}}}}',
    ]) {
      const res = await server.fetch("/api/v2/device-groups", {
        method: "POST",
        headers: { ...operator, "content-type": "application/vnd.api+json" },
        body,
      });
      expect(res.status, body).toBe(400);
      expect(res.headers.get("content-type")).toContain("application/vnd.api+json");
    }
    expect(names()).toBe(before);
  });

  it("treats attribute names that exist on Object.prototype as unknown (filter, sort, fields)", async () => {
    for (const q of [
      "sort=toString",
      "sort=-hasOwnProperty",
      "filter[valueOf]=1",
      "fields[devices]=toString",
    ]) {
      const res = await server.fetch(`/api/v2/devices?${q}`, { headers: viewer });
      expect(res.status, q).toBe(400);
    }
  });

  it("refuses unknown body members on plain writes and names them", async () => {
    const res = await server.fetch("/api/v1/api-credentials", {
      method: "POST",
      headers: { ...operator, "content-type": "application/json" },
      body: JSON.stringify({ name: "ci", ttl: "30d" }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; message: string };
    expect(body.message).toContain("ttl");
    const ok = await server.fetch("/api/v1/api-credentials", {
      method: "POST",
      headers: { ...operator, "content-type": "application/json" },
      body: JSON.stringify({ name: "ci", expires_in: "30d" }),
    });
    expect(ok.status).toBe(201);
  });

  it("drops a CSV column named __proto__ on import instead of setting a prototype", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-proto-"));
    const file = path.join(dir, "devices.csv");
    fs.writeFileSync(file, "ip,hostname,__proto__,constructor\n10.9.8.7,h1,polluted,polluted\n");
    try {
      await importDevicesFile(server.ctx, file, { source: "csv-test" });
      const row = await server.db.one<{ metadata: Record<string, unknown> }>(
        sql`SELECT metadata FROM devices WHERE ip = ${"10.9.8.7"}`,
      );
      expect(row).not.toBeNull();
      expect(Object.keys(row?.metadata ?? {})).not.toContain("__proto__");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(names()).toBe(before);
  });
});

describe("access rules are read from own properties only", () => {
  it("ignores rule kinds inherited through a polluted prototype", () => {
    const proto = Object.prototype as Record<string, unknown>;
    proto.optional = true;
    proto.public = true;
    try {
      const rule = { permission: "alerts.acknowledge" };
      expect(ruleKind(rule)).toBe("permission");
      expect(decide(rule, null)).not.toBeNull();
      expect(satisfies(rule, null)).toBe(false);
    } finally {
      delete proto.optional;
      delete proto.public;
    }
  });

  it("builds query objects without prototypes", () => {
    const q = parseDeepQuery("filter[hostname]=a&page[size]=1");
    expect(Object.getPrototypeOf(q)).toBeNull();
    expect(Object.getPrototypeOf(q.filter)).toBeNull();
    expect(() => parseDeepQuery("filter[__proto__][x]=1")).toThrow(/reserved/);
  });
});
