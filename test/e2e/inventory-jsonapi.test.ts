import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/storage/sql.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

const JSONAPI = "application/vnd.api+json";
// biome-ignore lint/suspicious/noExplicitAny: decoded JSON response bodies, asserted field by field
type Json = any;
let server: TestServer;
let admin: string;
let operator: string;
let viewer: string;
let uids: string[];

beforeAll(async () => {
  server = await startTestServer();
  admin = await tokenFor(server, "admin");
  operator = await tokenFor(server, "operator");
  viewer = await tokenFor(server, "viewer");
  const res = await server.fetch("/api/v1/device-updates", {
    method: "POST",
    headers: { ...authHeaders(operator), "content-type": "application/json" },
    body: JSON.stringify({
      updates: Array.from({ length: 5 }, (_, i) => ({
        ip: `10.90.0.${i}`,
        hostname: `v2-${i}`,
        source: "s",
        is_available: i < 3,
      })),
    }),
  });
  uids = ((await res.json()) as Json).data.results.map((r: { uid: string }) => r.uid);
});
afterAll(async () => {
  await server?.stop();
});

async function v2(method: string, path: string, token: string, body?: unknown) {
  const headers: Record<string, string> = { ...authHeaders(token), accept: JSONAPI };
  if (body !== undefined) headers["content-type"] = JSONAPI;
  const res = await server.fetch(`/api/v2${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, type: res.headers.get("content-type"), body: text ? JSON.parse(text) : null };
}

describe("/api/v2/devices", () => {
  it("lists devices, hides soft-deleted ones unless include_deleted", async () => {
    const list = await v2("GET", "/devices?page[limit]=100", viewer);
    expect(list.status).toBe(200);
    expect(list.type).toContain(JSONAPI);
    expect(list.body.data.map((d: { id: string }) => d.id)).toEqual(expect.arrayContaining(uids));
    expect(list.body.data[0]).toMatchObject({ type: "device", attributes: { hostname: expect.any(String) } });
    await server.db.query(sql`UPDATE devices SET deleted_at = now() WHERE uid = ${uids[4]}`);
    const after = await v2("GET", "/devices?page[limit]=100", viewer);
    expect(after.body.data.map((d: { id: string }) => d.id)).not.toContain(uids[4]);
    const withDeleted = await v2("GET", "/devices?page[limit]=100&include_deleted=true", viewer);
    expect(withDeleted.body.data.map((d: { id: string }) => d.id)).toContain(uids[4]);
  });

  it("filters on the spec's device attributes", async () => {
    const r = await v2(
      "GET",
      "/devices?filter[is_available][eq]=true&filter[hostname][ilike]=v2-%25",
      viewer,
    );
    expect(r.status).toBe(200);
    expect(
      r.body.data.map((d: { attributes: { hostname: string } }) => d.attributes.hostname).sort(),
    ).toEqual(["v2-0", "v2-1", "v2-2"]);
  });

  it("detail read requires the uid query", async () => {
    const uid = uids[0] as string;
    const ok = await v2("GET", `/devices/${uid}?uid=${uid}`, viewer);
    expect(ok.status).toBe(200);
    expect(ok.body.data).toMatchObject({ type: "device", id: uid, attributes: { ip: "10.90.0.0" } });
    expect((await v2("GET", `/devices/${uid}`, viewer)).status).toBe(400);
    const deleted = uids[4] as string;
    expect((await v2("GET", `/devices/${deleted}?uid=${deleted}`, viewer)).status).toBe(404);
    expect((await v2("GET", `/devices/${deleted}?uid=${deleted}&include_deleted=true`, viewer)).status).toBe(
      200,
    );
  });
});

describe("/api/v2/device-groups", () => {
  it("CRUD with a parent tree, and refuses cycles", async () => {
    const root = await v2("POST", "/device-groups", operator, {
      data: { type: "device-group", attributes: { name: "HQ", type: "location" } },
    });
    expect(root.status).toBe(201);
    const rootId = root.body.data.id;
    const child = await v2("POST", "/device-groups", operator, {
      data: { type: "device-group", attributes: { name: "Floor 1", parent_id: rootId } },
    });
    expect(child.status).toBe(201);
    expect(child.body.data.attributes).toMatchObject({ name: "Floor 1", type: "custom", parent_id: rootId });
    const childId = child.body.data.id;
    const kids = await v2("GET", `/device-groups?filter[parent_id][eq]=${rootId}`, viewer);
    expect(kids.body.data.map((g: { id: string }) => g.id)).toEqual([childId]);
    const cycle = await v2("PATCH", `/device-groups/${rootId}`, operator, {
      data: { type: "device-group", id: rootId, attributes: { parent_id: childId } },
    });
    expect(cycle.status).toBe(422);
    const renamed = await v2("PATCH", `/device-groups/${childId}`, operator, {
      data: { type: "device-group", id: childId, attributes: { name: "Floor One" } },
    });
    expect(renamed.body.data.attributes.name).toBe("Floor One");
    expect(
      (
        await v2("POST", "/device-groups", viewer, {
          data: { type: "device-group", attributes: { name: "x" } },
        })
      ).status,
    ).toBe(403);
    expect((await v2("DELETE", `/device-groups/${rootId}`, operator)).status).toBe(204);
    const orphan = await v2("GET", `/device-groups/${childId}`, viewer);
    expect(orphan.body.data.attributes.parent_id).toBeNull();
  });
});

describe("/api/v2/device-cleanup-settings", () => {
  it("reads the singleton with defaults, creates/updates it (admin), and the values drive the purge", async () => {
    const get = await v2("GET", "/device-cleanup-settings", viewer);
    expect(get.status).toBe(200);
    expect(get.body.data).toMatchObject({
      type: "device_cleanup_settings",
      attributes: { retention_days: 30, cleanup_interval_minutes: 1440, batch_size: 1000 },
    });
    const id = get.body.data.id;
    expect(
      (
        await v2("PATCH", `/device-cleanup-settings/${id}`, operator, {
          data: { type: "device_cleanup_settings", id, attributes: { retention_days: 7 } },
        })
      ).status,
    ).toBe(403);
    const bad = await v2("PATCH", `/device-cleanup-settings/${id}`, admin, {
      data: { type: "device_cleanup_settings", id, attributes: { batch_size: 5 } },
    });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.status).toBeLessThan(500);
    const patched = await v2("PATCH", `/device-cleanup-settings/${id}`, admin, {
      data: { type: "device_cleanup_settings", id, attributes: { retention_days: 7, batch_size: 100 } },
    });
    expect(patched.status).toBe(200);
    const created = await v2("POST", "/device-cleanup-settings", admin, {
      data: { type: "device_cleanup_settings", attributes: { cleanup_interval_minutes: 60 } },
    });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      id,
      attributes: { retention_days: 7, batch_size: 100, cleanup_interval_minutes: 60 },
    });

    const { runDeviceCleanup } = await import("../../src/inventory/cleanup.ts");
    await server.db.query(
      sql`UPDATE devices SET deleted_at = now() - interval '8 days' WHERE uid = ${uids[3]}`,
    );
    const run = await runDeviceCleanup(server.ctx, { force: true });
    expect(run.purged).toBe(1);
    expect(await server.db.one(sql`SELECT uid FROM devices WHERE uid = ${uids[3]}`)).toBeUndefined();
    // uids[4] was soft-deleted just now: kept.
    expect(await server.db.one(sql`SELECT uid FROM devices WHERE uid = ${uids[4]}`)).toBeDefined();
  });
});

describe("/api/v2/interfaces and interface settings/rules", () => {
  it("lists interfaces and classification rules", async () => {
    await server.db.query(
      sql`INSERT INTO interfaces (uid, device_id, interface_uid, if_index, if_name, speed_bps, partition)
          VALUES (${`${uids[0]}/ge-0/0/1`}, ${uids[0]}, 'ge-0/0/1', 1, 'ge-0/0/1', 1000000000, 'default')`,
    );
    await server.db.query(
      sql`INSERT INTO interface_classification_rules (name, if_name_pattern, priority) VALUES ('uplinks', '^ge-', 10)`,
    );
    const ifs = await v2("GET", `/interfaces?filter[device_id][eq]=${uids[0]}&include=device`, viewer);
    expect(ifs.status).toBe(200);
    expect(ifs.body.data[0]).toMatchObject({
      type: "interface",
      attributes: { if_name: "ge-0/0/1", speed_bps: 1000000000 },
    });
    expect(ifs.body.included?.[0]).toMatchObject({ type: "device", id: uids[0] });
    const rules = await v2("GET", "/interface-classification-rules", viewer);
    expect(rules.body.data.map((r: { attributes: { name: string } }) => r.attributes.name)).toEqual([
      "uplinks",
    ]);
    const one = await v2("GET", `/interface-classification-rules/${rules.body.data[0].id}`, viewer);
    expect(one.body.data.attributes.if_name_pattern).toBe("^ge-");
  });

  it("interface settings: create-or-update POST, by-interface lookup, PATCH", async () => {
    const body = (attributes: Record<string, unknown>) => ({
      data: { type: "interface_setting", attributes },
    });
    const first = await v2(
      "POST",
      "/interface-settings",
      operator,
      body({ device_id: uids[0], interface_uid: "ge-0/0/1", favorited: true }),
    );
    expect(first.status).toBe(200);
    const id = first.body.data.id;
    expect(first.body.data.attributes).toMatchObject({
      favorited: true,
      metrics_enabled: false,
      metrics_interval_seconds: 60,
      threshold_severity: "warning",
    });
    const second = await v2(
      "POST",
      "/interface-settings",
      operator,
      body({ device_id: uids[0], interface_uid: "ge-0/0/1", metrics_enabled: true }),
    );
    expect(second.body.data).toMatchObject({ id, attributes: { favorited: true, metrics_enabled: true } });
    const lookup = await v2(
      "GET",
      `/interface-settings/by-interface/${encodeURIComponent(uids[0] as string)}/${encodeURIComponent("ge-0/0/1")}`,
      viewer,
    );
    expect(lookup.status).toBe(200);
    // One interface's settings: a single resource document, not a collection (issue 20).
    expect(lookup.body.data).toMatchObject({ type: "interface_setting", id });
    const none = await v2(
      "GET",
      `/interface-settings/by-interface/${encodeURIComponent(uids[0] as string)}/${encodeURIComponent("ge-9/9/9")}`,
      viewer,
    );
    expect(none.status).toBe(404);
    expect(none.body.errors?.[0]?.status).toBe("404");
    const patched = await v2("PATCH", `/interface-settings/${id}`, operator, {
      data: {
        type: "interface_setting",
        id,
        attributes: { threshold_enabled: true, threshold_metric: "utilization", threshold_value: 0.9 },
      },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.data.attributes).toMatchObject({
      threshold_enabled: true,
      threshold_metric: "utilization",
      threshold_value: 0.9,
    });
    const list = await v2("GET", "/interface-settings", viewer);
    expect(list.body.data).toHaveLength(1);
    expect(
      (await v2("POST", "/interface-settings", viewer, body({ device_id: "x", interface_uid: "y" }))).status,
    ).toBe(403);
  });
});
