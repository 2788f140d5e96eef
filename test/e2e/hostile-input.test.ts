import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** Issue 10 item 5: every 5xx that request data could cause is a 4xx in the documented shape. */

const JSONAPI = "application/vnd.api+json";

describe("hostile input answers 4xx in the documented shape", () => {
  let server: TestServer;
  let operator: Record<string, string>;
  let admin: Record<string, string>;

  beforeAll(async () => {
    server = await startTestServer();
    operator = authHeaders(await tokenFor(server, "operator"));
    admin = authHeaders(await tokenFor(server, "admin"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function v2(path: string, init: RequestInit = {}) {
    const res = await server.fetch(path, {
      ...init,
      headers: { ...operator, "content-type": JSONAPI, ...(init.headers as Record<string, string>) },
    });
    const body = (await res.json()) as { errors?: { status: string; code: string; source?: unknown }[] };
    return { status: res.status, type: res.headers.get("content-type") ?? "", body };
  }

  it("refuses NUL and lone surrogates in filters, attributes and searches, naming the member", async () => {
    const cases: [string, RequestInit?][] = [
      ["/api/v2/devices?filter[hostname]=a%00b"],
      ["/api/v2/devices?filter[hostname][eq]=%00"],
      [
        "/api/v2/device-groups",
        { method: "POST", body: '{"data":{"type":"device-groups","attributes":{"name":"a\\u0000b"}}}' },
      ],
      [
        "/api/v2/device-groups",
        { method: "POST", body: '{"data":{"type":"device-groups","attributes":{"name":"x\\ud800"}}}' },
      ],
    ];
    for (const [path, init] of cases) {
      const r = await v2(path, init);
      expect(r.status, path).toBe(400);
      expect(r.type).toContain(JSONAPI);
      expect(r.body.errors?.[0]?.code).toBe("invalid_character");
      expect(r.body.errors?.[0]?.source).toBeTruthy();
    }
    const srql = await server.fetch("/api/query", {
      method: "POST",
      headers: { ...operator, "content-type": "application/json" },
      body: JSON.stringify({ query: "in:devices hostname:a\u0000" }),
    });
    expect(srql.status).toBe(400);
    expect(((await srql.json()) as { code: string }).code).toBe("invalid_character");
    const search = await server.fetch("/api/devices?search=%00", { headers: operator });
    expect(search.status).toBe(400);
  });

  it("refuses integers beyond int8 and out-of-range dates with 400", async () => {
    for (const path of [
      "/api/v2/devices?filter[risk_score]=9223372036854775808",
      "/api/v2/devices?filter[last_seen_time][gt]=99999-01-01T00:00:00Z",
      "/api/v2/devices?page[size]=9223372036854775808",
    ]) {
      const r = await v2(path);
      expect(r.status, path).toBeGreaterThanOrEqual(400);
      expect(r.status, path).toBeLessThan(500);
      expect(r.type).toContain(JSONAPI);
    }
    const big = await v2("/api/v2/stateful-alert-rules", {
      method: "POST",
      body: '{"data":{"type":"stateful-alert-rules","attributes":{"name":"r","priority":9223372036854775808}}}',
    });
    expect(big.status).toBeGreaterThanOrEqual(400);
    expect(big.status).toBeLessThan(500);
  });

  it("refuses integers JSON.parse would round instead of storing a different number", async () => {
    const res = await server.fetch("/api/query", {
      method: "POST",
      headers: { ...operator, "content-type": "application/json" },
      body: '{"query":"in:devices","limit":9007199254740993}',
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe("unsafe_integer");
    const v2res = await v2("/api/v2/stateful-alert-rules", {
      method: "POST",
      body: '{"data":{"type":"stateful-alert-rule","attributes":{"name":"r","priority":9007199254740993}}}',
    });
    expect(v2res.status).toBe(400);
    expect(v2res.body.errors?.[0]?.code).toBe("unsafe_integer");
  });

  it("refuses a huge expires_in on admin API keys and control credentials with 400", async () => {
    for (const [path, body] of [
      ["/api/admin/api-keys", { name: "k", expires_in: 1e308 }],
      ["/api/admin/api-keys", { name: "k", expires_in: "99999999999999d" }],
      ["/api/admin/control-credentials", { kind: "gateway", name: "g", expires_in: 1e308 }],
    ] as const) {
      const res = await server.fetch(path, {
        method: "POST",
        headers: { ...admin, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(400);
    }
  });

  it("refuses a JSON body nested thousands of levels deep", async () => {
    const deep = `{"query":${"[".repeat(10_000)}${"]".repeat(10_000)}}`;
    const res = await server.fetch("/api/query", {
      method: "POST",
      headers: { ...operator, "content-type": "application/json" },
      body: deep,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe("too_deep");
  });

  it("refuses tampered and foreign v2 cursors", async () => {
    const seeded = await server.fetch("/api/v1/device-updates", {
      method: "POST",
      headers: { ...operator, "content-type": "application/json" },
      body: JSON.stringify({
        updates: [1, 2, 3].map((i) => ({ ip: `10.77.0.${i}`, hostname: `cursor-${i}`, source: "s" })),
      }),
    });
    expect(seeded.status).toBe(200);
    const first = await server.fetch("/api/v2/devices?page[limit]=1", { headers: operator });
    const doc = (await first.json()) as { links: { next: string | null } };
    expect(doc.links.next).toBeTruthy();
    const next = new URL(doc.links.next as string);
    const cursor = next.searchParams.get("page[after]") as string;
    expect(cursor).toContain(".");
    const ok = await server.fetch(`${next.pathname}${next.search}`, { headers: operator });
    expect(ok.status).toBe(200);

    const [body, sig] = cursor.split(".") as [string, string];
    const payload = JSON.parse(Buffer.from(body, "base64url").toString()) as { v: unknown[] };
    payload.v = payload.v.map(() => "not-a-value");
    const forged = `${Buffer.from(JSON.stringify(payload)).toString("base64url")}.${sig}`;
    const tampered = await v2(`/api/v2/devices?page[limit]=1&page[after]=${forged}`);
    expect(tampered.status).toBe(400);
    expect(tampered.body.errors?.[0]?.code).toBe("invalid_cursor");
    const foreign = await v2(
      `/api/v2/devices?page[limit]=1&filter[hostname][eq]=cursor-2&page[after]=${cursor}`,
    );
    expect(foreign.status).toBe(400);
    expect(foreign.body.errors?.[0]?.code).toBe("invalid_cursor");
  });

  it("answers an over-long request line under /api/v2 with a JSON:API 431, and bad URLs with JSON:API 400", async () => {
    const answer = await new Promise<string>((resolve) => {
      const sock = net.connect(Number(new URL(server.url).port), "127.0.0.1");
      let out = "";
      sock.on("data", (d) => {
        out += d.toString("latin1");
      });
      sock.on("close", () => resolve(out));
      sock.on("error", () => resolve(out));
      sock.write(
        `GET /api/v2/devices?${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      );
    });
    expect(answer).toMatch(/^HTTP\/1\.1 431/);
    expect(answer.toLowerCase()).toContain(`content-type: ${JSONAPI}`);
    const json = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { errors: { status: string }[] };
    expect(json.errors[0]?.status).toBe("431");

    const bad = await v2("/api/v2/devices/a%ED%A0%80b");
    expect(bad.status).toBe(400);
    expect(bad.type).toContain(JSONAPI);
    const long = await v2(`/api/v2/devices/${"A".repeat(2000)}`);
    expect(long.status).toBe(414);
    expect(long.type).toContain(JSONAPI);
  });
});
