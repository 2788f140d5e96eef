import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Composite checks end to end: two real checks (HTTP and TCP against loopback servers this test
 * starts and stops) feed one composite; its verdict follows them, its results are SRQL
 * `composite_results` (rows, honoured `stats:`, the reference's error messages) and the device
 * carries it as `composite.<slug>`.
 */
const J = "application/vnd.api+json";
let server: TestServer;
let admin: string;
let viewer: string;
let web: http.Server;
let tcp: net.Server | null = null;
let webPort = 0;
let tcpPort = 0;
let webHealthy = true;

async function call(method: string, path: string, body?: unknown, token = admin, type = "application/json") {
  const res = await server.fetch(path, {
    method,
    headers: { ...authHeaders(token), accept: type, ...(body ? { "content-type": type } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

const query = (q: string, token = admin) => call("POST", "/api/query", { query: q }, token);

async function listenTcp(port: number): Promise<net.Server> {
  const s = net.createServer((socket) => socket.end());
  await new Promise<void>((r) => s.listen(port, "127.0.0.1", r));
  return s;
}

beforeAll(async () => {
  web = http.createServer((_req, res) => res.writeHead(webHealthy ? 200 : 503).end());
  await new Promise<void>((r) => web.listen(0, "127.0.0.1", r));
  webPort = (web.address() as { port: number }).port;
  tcp = await listenTcp(0);
  tcpPort = (tcp.address() as { port: number }).port;
  server = await startTestServer({
    env: { NETMON_EMBEDDED_AGENT: "true", NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" },
  });
  admin = await tokenFor(server, "admin");
  viewer = await tokenFor(server, "viewer");
});
afterAll(async () => {
  await server?.stop();
  await new Promise((r) => web?.close(r));
  await new Promise((r) => (tcp ? tcp.close(r) : r(undefined)));
});

describe("composite checks", () => {
  let uid = "";
  let compositeId = "";

  async function evaluate(): Promise<{ last_verdict: string }> {
    const r = await call("POST", `/api/v2/composite-checks/${compositeId}/evaluate`, undefined, admin, J);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.data.attributes;
  }
  const verdictBecomes = (verdict: string) =>
    waitFor(
      async () => ((await evaluate()).last_verdict === verdict ? true : null),
      `verdict ${verdict}`,
      60_000,
      500,
    );

  it("follows its inputs: healthy, degraded when a non-critical input is down, down when a critical one is", async () => {
    const added = await call("POST", "/api/v1/device-updates", {
      updates: [{ ip: "127.0.0.1", hostname: "core-router", source: "manual" }],
    });
    uid = added.body.data.results[0].uid as string;
    const create = async (attributes: Record<string, unknown>) => {
      const r = await call(
        "POST",
        "/api/v2/service-checks",
        { data: { type: "service-check", attributes } },
        admin,
        J,
      );
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.data.id as string;
    };
    await create({
      name: "core web",
      check_type: "http",
      target: `http://127.0.0.1:${webPort}/`,
      device_uid: uid,
      interval_seconds: 1,
      timeout_seconds: 2,
    });
    const tcpId = await create({
      name: "core tcp",
      check_type: "tcp",
      target: "127.0.0.1",
      port: tcpPort,
      interval_seconds: 1,
      timeout_seconds: 2,
    });

    const inputs = [
      { key: "web", kind: "check", check_name: "core web", critical: true },
      { key: "tcp", kind: "check", check_id: tcpId },
    ];
    const denied = await call(
      "POST",
      "/api/v2/composite-checks",
      { data: { type: "composite-check", attributes: { slug: "core-path", name: "Core path", inputs } } },
      viewer,
      J,
    );
    expect(denied.status).toBe(403);
    const created = await call(
      "POST",
      "/api/v2/composite-checks",
      {
        data: {
          type: "composite-check",
          attributes: { slug: "core-path", name: "Core path", device_uid: uid, inputs, interval_seconds: 5 },
        },
      },
      admin,
      J,
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    compositeId = created.body.data.id;
    // Names resolve to ids, so a rename of the check does not break the composite.
    expect(created.body.data.attributes.inputs[0]).toMatchObject({ key: "web", check_name: "core web" });
    expect(created.body.data.attributes.inputs[0].check_id).toMatch(/^[0-9a-f-]{36}$/);

    await verdictBecomes("healthy");

    // The TCP service goes away: connection refused → that (non-critical) input is down.
    await new Promise((r) => tcp?.close(r));
    tcp = null;
    await verdictBecomes("degraded");

    // The critical input fails too.
    webHealthy = false;
    await verdictBecomes("down");
  }, 180_000);

  it("rejects a duplicate slug, a bad input and an unknown check with 4xx naming the member", async () => {
    const post = (attributes: Record<string, unknown>) =>
      call("POST", "/api/v2/composite-checks", { data: { type: "composite-check", attributes } }, admin, J);
    const dup = await post({
      slug: "core-path",
      name: "again",
      inputs: [{ key: "a", kind: "check", check_name: "core web" }],
    });
    expect(dup.status).toBe(409);
    expect(dup.body.errors[0]).toMatchObject({
      code: "slug_taken",
      source: { pointer: "/data/attributes/slug" },
    });
    const bad = await post({
      slug: "x1",
      name: "x",
      inputs: [{ key: "a", kind: "metric", metric: "m", op: "=~", threshold: 1 }],
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors[0].source.pointer).toBe("/data/attributes/inputs/0/op");
    const ghost = await post({
      slug: "x2",
      name: "x",
      inputs: [{ key: "a", kind: "check", check_name: "nope" }],
    });
    expect(ghost.status).toBe(422);
    expect(ghost.body.errors[0].detail).toContain("no service check is named 'nope'");
    const proto = await server.fetch("/api/v2/composite-checks", {
      method: "POST",
      headers: { ...authHeaders(admin), "content-type": J, accept: J },
      body: '{"data":{"type":"composite-check","attributes":{"slug":"x3","name":"x","inputs":[{"key":"a","kind":"check","check_name":"core web","__proto__":{"critical":true}}]}}}',
    });
    expect([400, 422]).toContain(proto.status);
    const bogus = JSON.parse(
      '{"data":{"type":"composite-check","attributes":{"slug":"x4","name":"x","inputs":[{"key":"a","kind":"check","check_name":"core web","constructor":1}]}}}',
    );
    const evil = await call("POST", "/api/v2/composite-checks", bogus, admin, J);
    expect(evil.status).toBe(422);
    expect(evil.body.errors[0].detail).toContain("unknown member 'constructor'");
  });

  it("its results are SRQL composite_results, newest first, for viewers with services.view", async () => {
    const rows = await query("in:composite_results check:core-path limit:500", viewer);
    expect(rows.status, JSON.stringify(rows.body)).toBe(200);
    const results = rows.body.results as {
      verdict: string;
      check_slug: string;
      device_uid: string;
      evaluated_at: string;
    }[];
    expect(results[0]).toMatchObject({
      verdict: "down",
      check_slug: "core-path",
      device_uid: uid,
      check_name: "Core path",
    });
    const verdicts = new Set(results.map((r) => r.verdict));
    for (const v of ["healthy", "degraded", "down"]) expect(verdicts).toContain(v);
    const times = results.map((r) => Date.parse(r.evaluated_at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
  });

  it('honours stats:"count() as <alias> by <fields>" as the complete grouping, largest group first', async () => {
    const all = await query("in:composite_results check:core-path limit:1000");
    const expected = new Map<string, number>();
    for (const r of all.body.results as { verdict: string }[])
      expected.set(r.verdict, (expected.get(r.verdict) ?? 0) + 1);

    const stats = await query('in:composite_results check:core-path stats:"count() as n by verdict"');
    expect(stats.status, JSON.stringify(stats.body)).toBe(200);
    const groups = stats.body.results as { verdict: string; n: number }[];
    expect(new Map(groups.map((g) => [g.verdict, Number(g.n)]))).toEqual(expected);
    for (const g of groups) expect(Object.keys(g).sort()).toEqual(["n", "verdict"]);
    const counts = groups.map((g) => Number(g.n));
    expect([...counts].sort((a, b) => b - a)).toEqual(counts);
    expect(stats.body.pagination.next_cursor).toBeNull();

    // Grouping by an input field counts inputs: two per result here.
    const byInput = await query(
      'in:composite_results check:core-path stats:"count() as inputs by input_key"',
    );
    expect(byInput.status).toBe(200);
    const total = [...expected.values()].reduce((a, b) => a + b, 0);
    expect(byInput.body.results).toHaveLength(2);
    for (const g of byInput.body.results as { input_key: string; inputs: number }[]) {
      expect(["web", "tcp"]).toContain(g.input_key);
      expect(Number(g.inputs)).toBe(total);
    }
  });

  it("answers the reference's message for each unsupported stats form", async () => {
    const cases: [string, string][] = [
      ['stats:"count()"', "composite_results stats must be of the form 'count() as alias'"],
      ['stats:"avg(stale_inputs) as n"', "composite_results stats only support count()"],
      ['stats:"count() as n!"', "stats alias must be alphanumeric"],
      ['stats:"count() as n verdict"', "expected 'by <field>' after stats alias"],
      [
        'stats:"count() as n by message"',
        "unsupported stats group field 'message'. Supported fields: check, check_slug, check_name, verdict, status, input_key, input_value, input_stale",
      ],
      ["bogus:1", "unsupported filter field 'bogus' for composite results"],
    ];
    for (const [q, message] of cases) {
      const r = await query(`in:composite_results ${q}`);
      expect(r.status, q).toBe(400);
      expect(String(r.body.error).startsWith(message), `${q} → ${r.body.error}`).toBe(true);
    }
  });

  it("the device carries the latest verdict as composite.<slug> and composite.<slug>.status", async () => {
    const uids = async (q: string) => ((await query(q)).body.results as { uid: string }[]).map((r) => r.uid);
    expect(await uids("in:devices composite.core-path:down")).toEqual([uid]);
    expect(await uids("in:devices composite.core-path.status:(down,degraded)")).toEqual([uid]);
    expect(await uids("in:devices composite.core-path:healthy")).toEqual([]);
    expect(await uids("in:devices !composite.core-path:healthy")).toContain(uid);
    expect(await uids("in:devices composite.other-path:down")).toEqual([]);
    const bad = await query("in:devices composite.core-path:broken");
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain("invalid composite verdict 'broken'");
  });

  it("a stale input makes the verdict unknown while the status keeps its last state", async () => {
    // Recover both services, then stop the TCP check so its result ages past max_age_seconds.
    webHealthy = true;
    tcp = await listenTcp(tcpPort);
    await verdictBecomes("healthy");
    const tcpCheck = await call("GET", "/api/v2/service-checks?filter[name]=core tcp", undefined, admin, J);
    const tcpId = tcpCheck.body.data[0].id as string;
    const off = await call(
      "PATCH",
      `/api/v2/service-checks/${tcpId}`,
      { data: { type: "service-check", id: tcpId, attributes: { enabled: false } } },
      admin,
      J,
    );
    expect(off.status).toBe(200);
    const patched = await call(
      "PATCH",
      `/api/v2/composite-checks/${compositeId}`,
      {
        data: {
          type: "composite-check",
          id: compositeId,
          attributes: {
            inputs: [
              { key: "web", kind: "check", check_name: "core web", critical: true },
              { key: "tcp", kind: "check", check_id: tcpId, max_age_seconds: 2 },
            ],
          },
        },
      },
      admin,
      J,
    );
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await verdictBecomes("unknown");
    const latest = await query("in:composite_results check:core-path limit:1");
    const row = latest.body.results[0] as {
      verdict: string;
      status: string;
      message: string;
      stale_inputs: number;
    };
    expect(row).toMatchObject({ verdict: "unknown", status: "healthy", stale_inputs: 1 });
    expect(row.message).toContain("stale input tcp counted as unknown");
    expect(
      (
        (await query("in:devices composite.core-path:unknown composite.core-path.status:healthy")).body
          .results as { uid: string }[]
      ).map((r) => r.uid),
    ).toEqual([uid]);
  }, 120_000);
});
