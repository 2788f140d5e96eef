import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** API additions the console relies on: run-now, device list sort/filters, OCSF by uid, instance info. */
let server: TestServer;
let admin: string;
let operator: string;
const J = "application/vnd.api+json";

async function call(token: string, method: string, path: string, body?: unknown, type = "application/json") {
  const res = await server.fetch(path, {
    method,
    headers: { ...authHeaders(token), accept: type, ...(body ? { "content-type": type } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

beforeAll(async () => {
  server = await startTestServer();
  admin = await tokenFor(server, "admin");
  operator = await tokenFor(server, "operator");
  const seed = await call(admin, "POST", "/api/v1/device-updates", {
    updates: [
      { ip: "192.0.2.1", hostname: "bravo", source: "manual" },
      { ip: "192.0.2.2", hostname: "alpha", source: "sweep" },
      { ip: "192.0.2.3", hostname: "charlie", source: "manual" },
    ],
  });
  expect(seed.status).toBe(200);
});
afterAll(async () => {
  await server?.stop();
});

describe("console API additions", () => {
  it("sorts and filters the device list, and refuses unknown sorts and bad group ids", async () => {
    const asc = await call(operator, "GET", "/api/devices?sort=hostname");
    expect(asc.body.data.map((d: { hostname: string }) => d.hostname)).toEqual(["alpha", "bravo", "charlie"]);
    const desc = await call(operator, "GET", "/api/devices?sort=-hostname&limit=2");
    expect(desc.body.data.map((d: { hostname: string }) => d.hostname)).toEqual(["charlie", "bravo"]);
    expect(desc.body.pagination.next_offset).toBe(2);
    const manual = await call(operator, "GET", "/api/devices?source=manual&sort=hostname");
    expect(manual.body.data.map((d: { hostname: string }) => d.hostname)).toEqual(["bravo", "charlie"]);
    const bad = await call(operator, "GET", "/api/devices?sort=password_hash");
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe("invalid_sort");
    const group = await call(operator, "GET", "/api/devices?group_id=not-a-uuid");
    expect(group.status).toBe(400);
  });

  it("exports one device's OCSF object by uid", async () => {
    const list = await call(operator, "GET", "/api/devices?search=alpha");
    const uid = list.body.data[0].uid as string;
    const one = await call(admin, "GET", `/api/devices/ocsf/export?uid=${encodeURIComponent(uid)}`);
    expect(one.status).toBe(200);
    expect(one.body.devices).toHaveLength(1);
    expect(one.body.devices[0].hostname).toBe("alpha");
    const bad = await call(admin, "GET", "/api/devices/ocsf/export?uid=%00");
    expect(bad.status).toBe(400);
  });

  it("runs a check now, and refuses to run a disabled one", async () => {
    const created = await call(
      operator,
      "POST",
      "/api/v2/service-checks",
      {
        data: {
          type: "service-check",
          attributes: {
            name: "later",
            check_type: "tcp",
            target: "127.0.0.1",
            port: 9,
            interval_seconds: 3600,
          },
        },
      },
      J,
    );
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    const before = Date.parse(created.body.data.attributes.next_check_at);
    const ran = await call(
      operator,
      "PATCH",
      `/api/v2/service-checks/${id}/run`,
      { data: { type: "service-check", id } },
      J,
    );
    expect(ran.status).toBe(200);
    const due = Date.parse(ran.body.data.attributes.next_check_at);
    expect(due).toBeLessThanOrEqual(Date.now());
    expect(due).toBeLessThan(before + 1);
    const off = await call(
      operator,
      "PATCH",
      `/api/v2/service-checks/${id}`,
      { data: { type: "service-check", id, attributes: { enabled: false } } },
      J,
    );
    expect(off.status).toBe(200);
    const refused = await call(
      operator,
      "PATCH",
      `/api/v2/service-checks/${id}/run`,
      { data: { type: "service-check", id } },
      J,
    );
    expect(refused.status).toBe(409);
    expect(refused.body.errors[0].code).toBe("check_disabled");
    const viewer = await tokenFor(server, "viewer");
    const forbidden = await call(
      viewer,
      "PATCH",
      `/api/v2/service-checks/${id}/run`,
      { data: { type: "service-check", id } },
      J,
    );
    expect(forbidden.status).toBe(403);
  });

  it("refuses a check linked to a device that does not exist", async () => {
    const bad = await call(
      operator,
      "POST",
      "/api/v2/service-checks",
      {
        data: {
          type: "service-check",
          attributes: {
            name: "ghost link",
            check_type: "ping",
            target: "127.0.0.1",
            device_uid: "sr:no-such-device",
          },
        },
      },
      J,
    );
    expect(bad.status).toBe(422);
    expect(bad.body.errors[0].source.pointer).toBe("/data/attributes/device_uid");
  });

  it("tells an admin about the instance, and nobody else", async () => {
    const info = await call(admin, "GET", "/api/admin/instance");
    expect(info.status).toBe(200);
    expect(info.body.database_backend).toBe(server.db.kind);
    expect(info.body.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(JSON.stringify(info.body)).not.toContain("postgres://");
    expect((await call(operator, "GET", "/api/admin/instance")).status).toBe(403);
  });
});
