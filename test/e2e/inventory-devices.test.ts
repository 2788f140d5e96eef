import fs from "node:fs";
import Ajv2020Module from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

// biome-ignore lint/suspicious/noExplicitAny: decoded JSON response bodies, asserted field by field
type Json = any;
let server: TestServer;
let operator: string;
let viewer: string;

beforeAll(async () => {
  server = await startTestServer();
  operator = await tokenFor(server, "operator");
  viewer = await tokenFor(server, "viewer");
});
afterAll(async () => {
  await server?.stop();
});

async function call(method: string, path: string, token: string | null, body?: unknown) {
  const headers: Record<string, string> = token ? authHeaders(token) : {};
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await server.fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null } as { status: number; body: Json };
}

const ingest = (updates: unknown[], token = operator) =>
  call("POST", "/api/v1/device-updates", token, { updates });

describe("POST /api/v1/device-updates", () => {
  it("needs authentication and devices.ingest", async () => {
    expect((await ingest([{ ip: "10.10.0.1", source: "s" }], null as unknown as string)).status).toBe(401);
    expect((await ingest([{ ip: "10.10.0.1", source: "s" }], viewer)).status).toBe(403);
  });

  it("creates and merges devices; answers per-item errors and writes nothing on a bad batch", async () => {
    const ok = await ingest([
      { ip: "10.10.0.1", mac: "00:aa:bb:cc:dd:01", hostname: "edge-1", source: "sweep", type: "Router" },
      { ip: "10.10.0.2", source: "sweep", is_available: true },
    ]);
    expect(ok.status).toBe(200);
    expect(ok.body.data.created).toBe(2);
    const uid = ok.body.data.results[0].uid as string;
    expect(uid).toMatch(/^sr:[0-9a-f-]{36}$/);

    const bad = await ingest([
      { ip: "10.10.0.3", source: "sweep" },
      { ip: "10.10.0.999", source: "sweep" },
    ]);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe("invalid_updates");
    expect(bad.body.errors).toEqual([
      { index: 1, field: "ip", error: "invalid_ip", message: "ip is not a valid address" },
    ]);
    const list = await call("GET", "/api/devices?search=10.10.0.3", viewer);
    expect(list.body.data).toEqual([]);

    const merged = await ingest([{ ip: "10.10.0.1", source: "snmp", vendor_name: "Juniper" }]);
    expect(merged.body.data.results[0].uid).toBe(uid);
    const dev = await call("GET", `/api/devices/${uid}`, viewer);
    expect(dev.status).toBe(200);
    expect(dev.body.data).toMatchObject({
      uid,
      ip: "10.10.0.1",
      mac: "00:AA:BB:CC:DD:01",
      hostname: "edge-1",
      type: "Router",
      type_id: 12,
      vendor_name: "Juniper",
      discovery_sources: ["sweep", "snmp"],
    });
    expect(typeof dev.body.data.first_seen).toBe("string");
    expect(dev.body.data.first_seen_time).toBe(dev.body.data.first_seen);
  });

  it("reports fields it does not know instead of dropping them silently", async () => {
    const r = await ingest([
      { ip: "10.10.9.1", source: "sweep", hostnme: "typo", site: "dc1" },
      { ip: "10.10.9.2", source: "sweep", hostnme: "typo2" },
    ]);
    expect(r.status).toBe(200);
    expect(r.body.data.unknown_fields).toEqual({ hostnme: 2, site: 1 });
    const clean = await ingest([{ ip: "10.10.9.3", source: "sweep" }]);
    expect(clean.body.data.unknown_fields).toBeUndefined();
  });

  it("rejects more than 1000 updates", async () => {
    const big = Array.from({ length: 1001 }, (_, i) => ({ ip: `10.11.${i >> 8}.${i & 255}`, source: "s" }));
    const res = await ingest(big);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("too_many_updates");
  });
});

describe("identity resolution over HTTP", () => {
  let a: string;
  let b: string;
  beforeAll(async () => {
    const r = await ingest([
      { ip: "172.16.0.1", mac: "00:00:5e:00:53:01", source: "s" },
      { ip: "172.16.0.2", mac: "00:00:5e:00:53:02", source: "s" },
    ]);
    [a, b] = r.body.data.results.map((x: { uid: string }) => x.uid);
  });

  it("single form: data, and the reference error bodies", async () => {
    expect(await call("GET", "/api/v1/identity/resolve?ip=172.16.0.1", viewer)).toEqual({
      status: 200,
      body: { data: { ip: "172.16.0.1", partition: "default", uid: a } },
    });
    const missing = await call("GET", "/api/v1/identity/resolve", viewer);
    expect(missing).toMatchObject({
      status: 400,
      body: { error: "missing_ip", message: "an ip is required" },
    });
    const invalid = await call("GET", "/api/v1/identity/resolve?ip=1.2.3", viewer);
    expect(invalid).toMatchObject({ status: 400, body: { error: "invalid_ip" } });
    const nf = await call("GET", "/api/v1/identity/resolve?ip=172.16.0.99", viewer);
    expect(nf).toMatchObject({
      status: 404,
      body: { error: "not_found", message: "no device found at that address" },
    });
    const conflict = await call(
      "GET",
      "/api/v1/identity/resolve?ip=172.16.0.1&mac=00:00:5e:00:53:02",
      viewer,
    );
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ error: "mac_ip_conflict", ip_uid: a, mac_uid: b });
    const unknownMac = await call(
      "GET",
      "/api/v1/identity/resolve?ip=172.16.0.1&mac=00:00:5e:00:53:77",
      viewer,
    );
    expect(unknownMac.body.data.uid).toBe(a);
  });

  it("batch form: 200 with per-entry results; 129 entries → 400", async () => {
    const res = await call("POST", "/api/v1/identity/resolve", viewer, {
      devices: [{ ip: "172.16.0.2" }, { ip: "nope" }, { ip: "172.16.0.1", mac: "00:00:5e:00:53:02" }],
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([
      { ip: "172.16.0.2", partition: "default", uid: b },
      { ip: "nope", partition: "default", error: "invalid_ip" },
      { ip: "172.16.0.1", partition: "default", error: "mac_ip_conflict", ip_uid: a, mac_uid: b },
    ]);
    const tooMany = await call("POST", "/api/v1/identity/resolve", viewer, {
      devices: Array.from({ length: 129 }, (_, i) => ({ ip: `10.0.0.${i}` })),
    });
    expect(tooMany).toMatchObject({ status: 400, body: { error: "too_many_devices" } });
    const empty = await call("POST", "/api/v1/identity/resolve", viewer, { devices: [] });
    expect(empty).toMatchObject({ status: 400, body: { error: "empty_devices" } });
  });
});

describe("GET /api/devices", () => {
  beforeAll(async () => {
    await ingest(
      Array.from({ length: 60 }, (_, i) => ({
        ip: `10.20.0.${i}`,
        hostname: `list-host-${i}`,
        source: "seed",
        gateway_id: i % 2 ? "gw-odd" : "gw-even",
        is_available: i % 3 === 0,
        type: i % 4 === 0 ? "Switch" : "Server",
      })),
    );
  });

  it("validates parameters and names the bad one", async () => {
    for (const [q, param] of [
      ["limit=abc", "limit"],
      ["limit=0", "limit"],
      ["limit=-5", "limit"],
      ["offset=x", "offset"],
      ["offset=100001", "offset"],
      ["status=sideways", "status"],
      ["page=0", "page"],
    ] as const) {
      const res = await call("GET", `/api/devices?${q}`, viewer);
      expect(res.status, q).toBe(400);
      expect(JSON.stringify(res.body), q).toContain(param);
    }
  });

  it("defaults to 100 and clamps limit above 500 to 500", async () => {
    const def = await call("GET", "/api/devices", viewer);
    expect(def.body.pagination.limit).toBe(100);
    const big = await call("GET", "/api/devices?limit=100000", viewer);
    expect(big.status).toBe(200);
    expect(big.body.pagination.limit).toBe(500);
  });

  it("filters by search (hostname, IP, MAC, uid), status, gateway_id and device_type", async () => {
    const byHost = await call("GET", "/api/devices?search=list-host-1&limit=500", viewer);
    expect(byHost.body.data.map((d: { hostname: string }) => d.hostname).sort()).toEqual(
      ["list-host-1", ...Array.from({ length: 10 }, (_, i) => `list-host-1${i}`)].sort(),
    );
    const byIp = await call("GET", "/api/devices?search=10.20.0.59", viewer);
    expect(byIp.body.data).toHaveLength(1);
    const uid = byIp.body.data[0].uid;
    const byUid = await call("GET", `/api/devices?search=${uid.slice(3, 15)}`, viewer);
    expect(byUid.body.data.map((d: { uid: string }) => d.uid)).toContain(uid);
    const byMac = await call("GET", "/api/devices?search=00:AA:BB:CC:DD", viewer);
    expect(byMac.body.data.every((d: { mac: string }) => d.mac.startsWith("00:AA:BB:CC:DD"))).toBe(true);
    // LIKE metacharacters match literally.
    expect((await call("GET", "/api/devices?search=%25", viewer)).body.data).toEqual([]);
    const online = await call("GET", "/api/devices?search=list-host&status=online&limit=500", viewer);
    expect(online.body.data).toHaveLength(20);
    expect(online.body.data.every((d: { is_available: boolean }) => d.is_available)).toBe(true);
    const offline = await call("GET", "/api/devices?search=list-host&status=OFFLINE&limit=500", viewer);
    expect(offline.body.data).toHaveLength(40);
    const gw = await call("GET", "/api/devices?gateway_id=gw-odd&limit=500", viewer);
    expect(gw.body.data).toHaveLength(30);
    const sw = await call("GET", "/api/devices?device_type=Switch&search=list-host&limit=500", viewer);
    expect(sw.body.data).toHaveLength(15);
  });

  it("pages without gaps or duplicates while devices are inserted concurrently", async () => {
    const before = new Set<string>();
    for (let off = 0; ; off += 500) {
      const r = await call("GET", `/api/devices?limit=500&offset=${off}`, viewer);
      for (const d of r.body.data) before.add(d.uid);
      if (r.body.pagination.next_offset === null) break;
    }
    const seen: string[] = [];
    let offset: number | null = 0;
    let k = 0;
    while (offset !== null) {
      const [pageRes] = await Promise.all([
        call("GET", `/api/devices?limit=7&offset=${offset}`, viewer),
        ingest([{ ip: `10.30.${k >> 8}.${k & 255}`, source: "concurrent" }]),
      ]);
      const page = pageRes as { status: number; body: Json };
      k++;
      expect(page.body.pagination.offset).toBe(offset);
      for (const d of page.body.data) seen.push(d.uid);
      offset = page.body.pagination.next_offset;
      if (k > 200) throw new Error("paging did not end");
    }
    expect(new Set(seen).size).toBe(seen.length);
    for (const uid of before) expect(seen).toContain(uid);
  });

  it("GET /api/devices/{uid}: 404 for unknown and soft-deleted, 400 for malformed", async () => {
    expect(await call("GET", "/api/devices/sr:00000000-0000-4000-8000-000000000000", viewer)).toMatchObject({
      status: 404,
    });
    expect((await call("GET", "/api/devices/%20bad%20uid", viewer)).status).toBe(400);
    const r = await ingest([{ ip: "10.40.0.1", source: "s" }]);
    const uid = r.body.data.results[0].uid;
    expect((await call("DELETE", `/api/devices/${uid}`, viewer)).status).toBe(403);
    expect((await call("DELETE", `/api/devices/${uid}`, operator)).status).toBe(200);
    expect((await call("GET", `/api/devices/${uid}`, viewer)).status).toBe(404);
    expect((await call("GET", "/api/devices?search=10.40.0.1", viewer)).body.data).toEqual([]);
  });
});

describe("GET /api/devices/ocsf/export", () => {
  const schema = JSON.parse(
    fs.readFileSync(new URL("../../src/inventory/ocsf/device-1.7.0.schema.json", import.meta.url), "utf8"),
  );
  const Ajv2020 = Ajv2020Module as unknown as typeof Ajv2020Module.default;
  const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false });
  const validateDevice = ajv.compile(schema);

  it("returns OCSF 1.7.0 class 5001 devices that validate against the schema", async () => {
    await ingest([
      {
        ip: "10.60.0.1",
        mac: "00:11:22:aa:bb:01",
        hostname: "ocsf-1",
        source: "s",
        type: "Server",
        os: { name: "Ubuntu Linux", version: "24.04" },
        owner: { name: "ops" },
        vendor_name: "Dell",
        model: "R650",
        risk_score: 10,
        is_managed: true,
      },
      {
        ip: "2001:db8::60",
        source: "s",
        type: "a custom thing",
        os: { version: "no name" },
        owner: { team: "x" },
      },
      { ip: "10.60.0.3", source: "s" },
    ]);
    const res = await call("GET", "/api/devices/ocsf/export?limit=1000", viewer);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      ocsf_version: "1.7.0",
      class_uid: 5001,
      class_name: "Device Inventory Info",
    });
    expect(res.body.count).toBe(res.body.devices.length);
    expect(res.body.devices.length).toBeGreaterThan(3);
    for (const d of res.body.devices) {
      const ok = validateDevice(d);
      expect(ok, `${JSON.stringify(d)}: ${ajv.errorsText(validateDevice.errors)}`).toBe(true);
    }
    const one = res.body.devices.find((d: { hostname?: string }) => d.hostname === "ocsf-1");
    expect(one).toMatchObject({
      type_id: 1,
      type: "Server",
      os: { name: "Ubuntu Linux", type_id: 200 },
      mac: "00:11:22:AA:BB:01",
    });
    expect(typeof one.first_seen_time).toBe("number");
    expect(one).not.toHaveProperty("discovery_sources");
    const custom = res.body.devices.find((d: { ip?: string }) => d.ip === "2001:db8::60");
    expect(custom).toMatchObject({ type_id: 99, type: "a custom thing" });
    expect(custom).not.toHaveProperty("os");

    // Wrapped as a class 5001 event the device also validates.
    const validateEvent = ajv.getSchema(`${schema.$id}#/$defs/inventory_info`);
    const event = {
      class_uid: 5001,
      category_uid: 5,
      activity_id: 2,
      type_uid: 500102,
      severity_id: 1,
      time: Date.now(),
      metadata: { version: "1.7.0", product: { name: "netmon" } },
      device: one,
    };
    expect(validateEvent?.(event)).toBe(true);
  });

  it("filters and validates parameters", async () => {
    const servers = await call("GET", "/api/devices/ocsf/export?type_id=1&limit=1000", viewer);
    expect(servers.body.devices.length).toBeGreaterThan(0);
    expect(servers.body.devices.every((d: { type_id: number }) => d.type_id === 1)).toBe(true);
    const future = await call("GET", "/api/devices/ocsf/export?last_seen_after=2999-01-01T00:00:00Z", viewer);
    expect(future.body.devices).toEqual([]);
    const past = await call(
      "GET",
      "/api/devices/ocsf/export?first_seen_after=2000-01-01T00:00:00Z&limit=2",
      viewer,
    );
    expect(past.body.devices).toHaveLength(2);
    expect(past.body.pagination).toEqual({ limit: 2, offset: 0, next_offset: 2 });
    expect((await call("GET", "/api/devices/ocsf/export?limit=5000", viewer)).body.pagination.limit).toBe(
      1000,
    );
    expect((await call("GET", "/api/devices/ocsf/export?type_id=abc", viewer)).status).toBe(400);
    expect((await call("GET", "/api/devices/ocsf/export?first_seen_after=yesterday", viewer)).status).toBe(
      400,
    );
  });
});
