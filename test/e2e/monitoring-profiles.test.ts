import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importDevicesFile } from "../../src/inventory/import.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Monitoring profiles (issue 13): import 100 devices into a group that carries a TCP check and
 * all of them are monitored with no further step; one target goes down and its device's
 * availability follows; devices leaving the group lose the check; a device's own check of the
 * same name is kept and reported as a conflict.
 */
const J = "application/vnd.api+json";
const N = 100;
const ipOf = (i: number) => `127.0.1.${i}`;

let server: TestServer;
let token: string;
let port = 0;
const listeners = new Map<string, net.Server>();
let dir: string;

async function call(method: string, p: string, body?: unknown, type = J) {
  const res = await server.fetch(p, {
    method,
    headers: { ...authHeaders(token), accept: type, ...(body ? { "content-type": type } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

function listen(host: string, p: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const s = net.createServer((sock) => sock.end());
    s.once("error", reject);
    s.listen(p, host, () => resolve(s));
  });
}

beforeAll(async () => {
  // One TCP service per device address, all on the same port (each 127.0.1.x is its own target).
  const first = await listen(ipOf(1), 0);
  port = (first.address() as net.AddressInfo).port;
  listeners.set(ipOf(1), first);
  for (let i = 2; i <= N; i++) listeners.set(ipOf(i), await listen(ipOf(i), port));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-profiles-"));
  server = await startTestServer({
    env: { NETMON_EMBEDDED_AGENT: "true", NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" },
  });
  token = await tokenFor(server, "admin");
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await Promise.all([...listeners.values()].map((s) => new Promise((r) => s.close(r))));
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe("monitoring profiles", () => {
  it("refuse templates that would never work, naming the member", async () => {
    const group = await call("POST", "/api/v2/device-groups", {
      data: { type: "device-group", attributes: { name: "validation only" } },
    });
    // Validation errors answer 422 (v2's shape); a config the check type's schema refuses, 400.
    const bad = async (attributes: Record<string, unknown>, status = 422) => {
      const r = await call("POST", "/api/v2/monitoring-profiles", {
        data: {
          type: "monitoring-profile",
          attributes: { name: "bad", group_id: group.body.data.id, ...attributes },
        },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(status);
      return r.body.errors[0];
    };
    expect((await bad({ checks: [{ name: "t", check_type: "tcp", prot: 22 }] })).source.pointer).toBe(
      "/data/attributes/checks/0/prot",
    );
    expect((await bad({ checks: [{ name: "t", check_type: "tcp" }] })).detail).toMatch(/needs a port/);
    expect(
      (await bad({ checks: [{ name: "h", check_type: "http", target: "http://example.net/" }] })).detail,
    ).toMatch(/\{ip\} or \{hostname\}/);
    expect(
      (await bad({ checks: [{ name: "h", check_type: "http", config: { expected_stauts: 200 } }] }, 400))
        .code,
    ).toBe("invalid_config");
    expect((await bad({ checks: [] })).source.pointer).toBe("/data/attributes/checks");
    const noScope = await call("POST", "/api/v2/monitoring-profiles", {
      data: {
        type: "monitoring-profile",
        attributes: { name: "nothing", checks: [{ name: "p", check_type: "ping" }] },
      },
    });
    expect(noScope.status).toBe(422);
    expect(noScope.body.errors[0].detail).toMatch(/group_id, a device_type or both/);
  });

  it("monitor 100 imported devices, follow a target down, keep a device's own check, and let leavers go", async () => {
    // One device already exists with its own check of the profile's name: it keeps it.
    const own = await call(
      "POST",
      "/api/v1/device-updates",
      { updates: [{ ip: ipOf(50), hostname: "dev-50", source: "manual" }] },
      "application/json",
    );
    const ownUid = own.body.data.results[0].uid as string;
    const ownCheck = await call("POST", "/api/v2/service-checks", {
      data: {
        type: "service-check",
        attributes: { name: "TCP service", check_type: "tcp", target: ipOf(50), port, device_uid: ownUid },
      },
    });
    expect(ownCheck.status, JSON.stringify(ownCheck.body)).toBe(201);

    const group = await call("POST", "/api/v2/device-groups", {
      data: { type: "device-group", attributes: { name: "branch-a", type: "location" } },
    });
    expect(group.status).toBe(201);
    const groupId = group.body.data.id as string;
    const profile = await call("POST", "/api/v2/monitoring-profiles", {
      data: {
        type: "monitoring-profile",
        attributes: {
          name: "branch services",
          group_id: groupId,
          checks: [{ name: "tcp service", check_type: "tcp", port, interval_seconds: 2, timeout_seconds: 2 }],
        },
      },
    });
    expect(profile.status, JSON.stringify(profile.body)).toBe(201);
    const profileId = profile.body.data.id as string;

    // The same import the CLI runs (`netmon devices import FILE --group branch-a`).
    const file = path.join(dir, "devices.jsonl");
    fs.writeFileSync(
      file,
      Array.from({ length: N }, (_, k) => JSON.stringify({ ip: ipOf(k + 1), hostname: `dev-${k + 1}` })).join(
        "\n",
      ),
    );
    const imported = await importDevicesFile(server.ctx, file, { source: "import", group: "Branch-A" });
    expect(imported).toMatchObject({ rows: N, created: N - 1, updated: 1 });
    await expect(
      importDevicesFile(server.ctx, file, { source: "import", group: "no such group" }),
    ).rejects.toThrow(/device group 'no such group' not found/);

    const applied = await waitFor(
      async () => {
        const r = await call("GET", `/api/v2/monitoring-profiles/${profileId}`);
        const a = r.body.data.attributes;
        return a.checks_managed === N - 1 ? a : null;
      },
      "the profile applied to every device",
      60_000,
    );
    expect(applied.devices_matched).toBe(N);
    expect(applied.conflicts).toEqual([{ device_uid: ownUid, check: "tcp service" }]);
    expect((await call("GET", `/api/v2/device-groups/${groupId}`)).body.data.attributes.device_count).toBe(N);

    // Every device of the group is monitored and available (its own check counts for dev-50).
    const devices = await waitFor(
      async () => {
        const r = await call(
          "GET",
          `/api/devices?group_id=${groupId}&limit=${N}`,
          undefined,
          "application/json",
        );
        const rows = r.body.data as { uid: string; ip: string; is_available: boolean | null }[];
        return rows.length === N && rows.every((d) => d.is_available === true) ? rows : null;
      },
      "all 100 devices available",
      90_000,
    );
    const victim = devices.find((d) => d.ip === ipOf(7));
    if (!victim) throw new Error("device 7 missing");

    // Its target goes down: its availability follows with the check named in the reason.
    await new Promise((r) => listeners.get(ipOf(7))?.close(r));
    listeners.delete(ipOf(7));
    const down = await waitFor(async () => {
      const r = await call(
        "GET",
        `/api/devices/${encodeURIComponent(victim.uid)}`,
        undefined,
        "application/json",
      );
      return r.body.data.is_available === false ? r.body.data : null;
    }, "device 7 unavailable");
    expect(down.availability_reason).toMatch(/^tcp service: critical/);

    // Managed checks follow the profile: structural edits and deletes are refused with the reason.
    const managed = await call(
      "GET",
      `/api/v2/service-checks?filter[device_uid]=${encodeURIComponent(victim.uid)}`,
    );
    const check = managed.body.data[0];
    expect(check.attributes.profile_id).toBe(profileId);
    const edit = await call("PATCH", `/api/v2/service-checks/${check.id}`, {
      data: { type: "service-check", id: check.id, attributes: { port: 1 } },
    });
    expect(edit.status).toBe(409);
    expect(edit.body.errors[0].code).toBe("managed_by_profile");
    expect((await call("DELETE", `/api/v2/service-checks/${check.id}`)).status).toBe(409);
    const disable = await call("PATCH", `/api/v2/service-checks/${check.id}`, {
      data: { type: "service-check", id: check.id, attributes: { enabled: false } },
    });
    expect(disable.status).toBe(200);

    // A device that leaves the group loses the profile's check.
    const moved = await call("PATCH", `/api/v2/devices/${encodeURIComponent(victim.uid)}`, {
      data: { type: "device", id: victim.uid, attributes: { group_id: null } },
    });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    await waitFor(async () => {
      const r = await call(
        "GET",
        `/api/v2/service-checks?filter[device_uid]=${encodeURIComponent(victim.uid)}`,
      );
      return r.body.data.length === 0;
    }, "the leaver's check removed");
    expect((await call("GET", `/api/v2/device-groups/${groupId}`)).body.data.attributes.device_count).toBe(
      N - 1,
    );
    const badGroup = await call("PATCH", `/api/v2/devices/${encodeURIComponent(victim.uid)}`, {
      data: {
        type: "device",
        id: victim.uid,
        attributes: { group_id: "00000000-0000-4000-8000-000000000000" },
      },
    });
    expect(badGroup.status).toBe(422);

    // Deleting the profile removes its checks; the device's own check stays.
    expect((await call("DELETE", `/api/v2/monitoring-profiles/${profileId}`)).status).toBe(204);
    await waitFor(async () => {
      const r = await call("GET", `/api/v2/service-checks?filter[profile_id]=${profileId}`);
      return r.body.data.length === 0;
    }, "the profile's checks removed");
    expect((await call("GET", `/api/v2/service-checks/${ownCheck.body.data.id}`)).status).toBe(200);
  }, 240_000);

  it("place a profile's checks on a pool of agents by label, and follow the profile when the pool changes", async () => {
    const agents = await call("GET", "/api/v2/agents");
    const embedded = (agents.body.data as { id: string }[]).find((a) => a.id.startsWith("embedded-"));
    if (!embedded) throw new Error("no embedded agent");
    const labelled = await call("PATCH", `/api/v2/agents/${encodeURIComponent(embedded.id)}`, {
      data: { type: "agent", id: embedded.id, attributes: { labels: { site: "hq", role: "poller" } } },
    });
    expect(labelled.status, JSON.stringify(labelled.body)).toBe(200);
    const group = await call("POST", "/api/v2/device-groups", {
      data: { type: "device-group", attributes: { name: "hq-servers", type: "location" } },
    });
    const groupId = group.body.data.id as string;
    const profile = await call("POST", "/api/v2/monitoring-profiles", {
      data: {
        type: "monitoring-profile",
        attributes: {
          name: "hq pool",
          group_id: groupId,
          agent_labels: { site: "hq" },
          checks: [{ name: "hq tcp", check_type: "tcp", port, interval_seconds: 2, timeout_seconds: 2 }],
        },
      },
    });
    expect(profile.status, JSON.stringify(profile.body)).toBe(201);
    const profileId = profile.body.data.id as string;
    const ingest = await call(
      "POST",
      "/api/v1/device-updates",
      { updates: [1, 2].map((k) => ({ ip: `127.0.2.${k}`, hostname: `hq-${k}`, source: "manual" })) },
      "application/json",
    );
    listeners.set("127.0.2.1", await listen("127.0.2.1", port));
    listeners.set("127.0.2.2", await listen("127.0.2.2", port));
    for (const r of ingest.body.data.results as { uid: string }[]) {
      await call("PATCH", `/api/v2/devices/${encodeURIComponent(r.uid)}`, {
        data: { type: "device", id: r.uid, attributes: { group_id: groupId } },
      });
    }
    const ran = await waitFor(
      async () => {
        const r = await call("GET", `/api/v2/service-checks?filter[profile_id]=${profileId}`);
        const rows = r.body.data as { attributes: Record<string, unknown> }[];
        return rows.length === 2 && rows.every((c) => c.attributes.last_result === "success") ? rows : null;
      },
      "the pooled checks ran on the labelled embedded agent",
      30_000,
    );
    for (const c of ran) expect(c.attributes.agent_labels).toEqual({ site: "hq" });
    const jobs = await call("GET", `/api/v2/poll-jobs?filter[status]=completed&page[limit]=200`);
    const pooledJobs = (jobs.body.data as { attributes: Record<string, unknown> }[]).filter(
      (j) => j.attributes.agent_id === embedded.id,
    );
    expect(pooledJobs.length).toBeGreaterThan(0);

    // Moving the profile to another pool moves its checks.
    const moved = await call("PATCH", `/api/v2/monitoring-profiles/${profileId}`, {
      data: { type: "monitoring-profile", id: profileId, attributes: { agent_labels: { site: "branch" } } },
    });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    await waitFor(
      async () => {
        const r = await call("GET", `/api/v2/service-checks?filter[profile_id]=${profileId}`);
        const rows = r.body.data as { attributes: Record<string, unknown> }[];
        return rows.every((c) => (c.attributes.agent_labels as { site?: string })?.site === "branch")
          ? rows
          : null;
      },
      "the profile's checks follow its pool",
      30_000,
    );
    const bad = await call("PATCH", `/api/v2/monitoring-profiles/${profileId}`, {
      data: { type: "monitoring-profile", id: profileId, attributes: { agent_labels: { "": "x" } } },
    });
    expect(bad.status).toBe(422);
  });
});
