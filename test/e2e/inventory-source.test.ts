import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

// biome-ignore lint/suspicious/noExplicitAny: decoded JSON response bodies, asserted field by field
type Json = any;
let server: TestServer;
let operator: string;
let viewer: string;

let admin: string;
let operatorId: string;

const J = "application/vnd.api+json";
async function v2(method: string, path: string, token: string, attributes?: Record<string, unknown>) {
  const res = await server.fetch(`/api/v2${path}`, {
    method,
    headers: { ...authHeaders(token), accept: J, ...(attributes ? { "content-type": J } : {}) },
    body: attributes ? JSON.stringify({ data: { type: "inventory-plugin", attributes } }) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as Json };
}

/** Register (as the operator) and approve (as an admin) the plugin of a source instance. */
async function approvedPlugin(source: string, instance: string): Promise<string> {
  const created = await v2("POST", "/inventory-plugins", operator, {
    name: `${source}-${instance}`,
    source,
    source_instance: instance,
  });
  expect(created.status).toBe(201);
  expect(created.body.data.attributes).toMatchObject({ status: "pending", owner_user_id: operatorId });
  const id = created.body.data.id as string;
  const approved = await v2("PATCH", `/inventory-plugins/${id}/approve`, admin);
  expect(approved.status).toBe(200);
  expect(approved.body.data.attributes.status).toBe("approved");
  return id;
}

beforeAll(async () => {
  server = await startTestServer();
  const op = await createUser(server, { role: "operator" });
  operatorId = op.id;
  operator = await tokenFor(server, { id: op.id });
  viewer = await tokenFor(server, "viewer");
  admin = await tokenFor(server, "admin");
  await approvedPlugin("netbox", "dc1");
  await approvedPlugin("csv", "a");
});
afterAll(async () => {
  await server?.stop();
});

async function call(method: string, path: string, token: string, body?: unknown) {
  const headers: Record<string, string> = authHeaders(token);
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await server.fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

const records = (n: number, from = 0) =>
  Array.from({ length: n }, (_, k) => {
    const i = from + k;
    return {
      source_record_id: `nb-${i}`,
      ip: `10.80.0.${i}`,
      hostname: `nb-host-${i}`,
      serial_number: `SN${i}`,
      device_type: "Switch",
    };
  });

describe("source inventory", () => {
  it("upload resolves each record to a device uid and reading pages the snapshot by cursor", async () => {
    const up = await call("POST", "/api/v1/source-inventory", operator, {
      source: "NetBox",
      instance: "dc1",
      records: [...records(25), { source_record_id: "no-ip", hostname: "x" }],
    });
    expect(up.status).toBe(200);
    expect(up.body.data.source).toBe("netbox");
    expect(up.body.data.collection).toMatchObject({
      expected_present_count: 26,
      absent_count: 0,
      complete: true,
    });
    const byId = new Map(
      up.body.data.results.map((r: { source_record_id: string }) => [r.source_record_id, r]),
    );
    expect(byId.get("no-ip")).toEqual({
      source_record_id: "no-ip",
      canonical_device_uid: null,
      error: "missing_ip",
    });
    const r0 = byId.get("nb-0") as { canonical_device_uid: string };
    expect(r0.canonical_device_uid).toMatch(/^sr:/);
    // The records went through ingestion: devices exist and resolve by IP.
    const resolved = await call("GET", "/api/v1/identity/resolve?ip=10.80.0.0", viewer);
    expect(resolved.body.data.uid).toBe(r0.canonical_device_uid);
    const dev = await call("GET", `/api/devices/${r0.canonical_device_uid}`, viewer);
    expect(dev.body.data).toMatchObject({
      hostname: "nb-host-0",
      type: "Switch",
      discovery_sources: ["netbox"],
    });

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = `/api/v1/source-inventory?source=netbox&instance=dc1&limit=10${cursor ? `&cursor=${cursor}` : ""}`;
      const page = await call("GET", q, viewer);
      expect(page.status).toBe(200);
      expect(page.body).toMatchObject({
        api_version: "v1",
        source: "netbox",
        source_instance: "dc1",
        partition: "default",
      });
      for (const row of page.body.rows) {
        seen.push(row.source_object_id);
        expect(row.present).toBe(true);
        if (row.ip) expect(row.canonical).toMatchObject({ ip: row.ip, discovery_sources: ["netbox"] });
      }
      cursor = page.body.pagination.next_cursor;
      expect(page.body.pagination.has_more).toBe(cursor !== null);
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(new Set(seen)).toEqual(new Set([...records(25).map((r) => r.source_record_id), "no-ip"]));
  });

  it("a new snapshot marks missing records absent and invalidates old cursors (409)", async () => {
    const first = await call("GET", "/api/v1/source-inventory?source=netbox&instance=dc1&limit=5", viewer);
    const cursor = first.body.pagination.next_cursor as string;
    const up = await call("POST", "/api/v1/source-inventory", operator, {
      source: "netbox",
      instance: "dc1",
      records: records(20),
    });
    expect(up.body.data.collection.absent_count).toBe(6);
    // Same identities: the same devices, not new ones.
    const again = await call("GET", "/api/v1/identity/resolve?ip=10.80.0.3", viewer);
    expect(again.body.data.uid).toBe(up.body.data.results[3].canonical_device_uid);
    const stale = await call(
      "GET",
      `/api/v1/source-inventory?source=netbox&instance=dc1&limit=5&cursor=${cursor}`,
      viewer,
    );
    expect(stale).toMatchObject({ status: 409, body: { error: "source_collection_changed" } });
    const absent = await call(
      "GET",
      "/api/v1/source-inventory?source=netbox&instance=dc1&presence=absent&limit=100",
      viewer,
    );
    expect(absent.body.rows.map((r: { source_object_id: string }) => r.source_object_id).sort()).toEqual(
      ["nb-20", "nb-21", "nb-22", "nb-23", "nb-24", "no-ip"].sort(),
    );
    expect(absent.body.rows.every((r: { absent_since: string | null }) => r.absent_since !== null)).toBe(
      true,
    );
    const all = await call(
      "GET",
      "/api/v1/source-inventory?source=netbox&instance=dc1&presence=all&limit=100",
      viewer,
    );
    expect(all.body.rows).toHaveLength(26);
  });

  it("validates the query", async () => {
    const bad = async (q: string, error: string, status = 400) => {
      const r = await call("GET", `/api/v1/source-inventory?${q}`, viewer);
      expect([r.status, r.body.error], q).toEqual([status, error]);
    };
    await bad("instance=dc1", "source_required");
    await bad("source=netbox", "instance_required");
    await bad("source=Net%20Box&instance=dc1", "invalid_identifier");
    await bad("source=netbox&instance=dc1&bogus=1", "unknown_query_parameter");
    await bad("source=netbox&instance=dc1&presence=maybe", "invalid_presence");
    await bad("source=netbox&instance=dc1&limit=501", "invalid_limit");
    await bad("source=netbox&instance=dc1&cursor=!!", "invalid_cursor");
    await bad(
      `source=netbox&instance=dc1&cursor=${Buffer.from('{"v":1}').toString("base64url")}`,
      "invalid_cursor",
    );
    await bad("source=netbox&instance=dc9", "source_snapshot_not_found", 404);
    const first = await call("GET", "/api/v1/source-inventory?source=netbox&instance=dc1&limit=5", viewer);
    await bad(
      `source=netbox&instance=dc1&presence=all&cursor=${first.body.pagination.next_cursor}`,
      "cursor_query_mismatch",
    );
  });

  it("uploading needs devices.ingest and rejects duplicate record ids", async () => {
    expect(
      (await call("POST", "/api/v1/source-inventory", viewer, { source: "csv", instance: "a", records: [] }))
        .status,
    ).toBe(403);
    const dup = await call("POST", "/api/v1/source-inventory", operator, {
      source: "csv",
      instance: "a",
      records: [
        { source_record_id: "1", ip: "10.81.0.1" },
        { source_record_id: "1", ip: "10.81.0.2" },
      ],
    });
    expect([dup.status, dup.body.error]).toEqual([400, "duplicate_record"]);
  });
});

describe("inventory plugins (spec 4.4: snapshots only from an approved plugin)", () => {
  it("refuses unregistered, pending, foreign and disabled plugins, saying which step is missing", async () => {
    const upload = (token: string, source: string, instance: string) =>
      call("POST", "/api/v1/source-inventory", token, {
        source,
        instance,
        records: [{ source_record_id: "r1", ip: "10.82.0.1" }],
      });
    const none = await upload(operator, "armis", "eu");
    expect(none.status).toBe(403);
    expect(none.body.error).toBe("plugin_not_registered");
    expect(none.body.message).toContain("POST /api/v2/inventory-plugins");

    const created = await v2("POST", "/inventory-plugins", operator, {
      name: "armis-eu",
      source: "armis",
      source_instance: "eu",
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    expect((await upload(operator, "armis", "eu")).body.error).toBe("plugin_not_approved");

    // Approval is an admin's: the owner (an operator) and a viewer cannot approve.
    expect((await v2("PATCH", `/inventory-plugins/${id}/approve`, operator)).status).toBe(403);
    expect((await v2("PATCH", `/inventory-plugins/${id}/approve`, viewer)).status).toBe(403);
    expect((await v2("PATCH", `/inventory-plugins/${id}/approve`, admin)).status).toBe(200);

    // Another user holding devices.ingest may not report for this plugin.
    const other = await tokenFor(server, "operator");
    expect((await upload(other, "armis", "eu")).body.error).toBe("plugin_owner_mismatch");

    const ok = await upload(operator, "armis", "eu");
    expect(ok.status).toBe(200);
    const read = await call("GET", "/api/v1/source-inventory?source=armis&instance=eu", viewer);
    expect(read.status).toBe(200);
    expect(read.body.plugin).toEqual({ id, name: "armis-eu", status: "approved" });
    const listed = await v2("GET", `/inventory-plugins/${id}`, viewer);
    expect(listed.body.data.attributes.last_snapshot_at).toBeTruthy();

    expect((await v2("PATCH", `/inventory-plugins/${id}/disable`, admin)).status).toBe(200);
    const disabled = await upload(operator, "armis", "eu");
    expect(disabled.status).toBe(403);
    expect(disabled.body.error).toBe("plugin_disabled");
    expect((await v2("PATCH", `/inventory-plugins/${id}/enable`, admin)).status).toBe(200);
    expect((await upload(operator, "armis", "eu")).status).toBe(200);

    // One plugin per source instance.
    const dup = await v2("POST", "/inventory-plugins", operator, {
      name: "armis-eu-2",
      source: "armis",
      source_instance: "eu",
    });
    expect(dup.status).toBe(409);
    const badSource = await v2("POST", "/inventory-plugins", operator, {
      name: "bad",
      source: "Not Valid!",
      source_instance: "eu",
    });
    expect(badSource.status).toBe(422);
  });
});
