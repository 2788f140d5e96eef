import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

/** A device's availability follows its checks (issue 13): up with a passing check, down with the reason. */
let server: TestServer;
let token: string;
let target: http.Server;
let port = 0;
let healthy = true;

async function call(method: string, path: string, body?: unknown, type = "application/json") {
  const res = await server.fetch(path, {
    method,
    headers: { ...authHeaders(token), accept: type, ...(body ? { "content-type": type } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

beforeAll(async () => {
  target = http.createServer((_req, res) => res.writeHead(healthy ? 200 : 503).end());
  await new Promise<void>((r) => target.listen(0, "127.0.0.1", r));
  port = (target.address() as { port: number }).port;
  server = await startTestServer({
    env: { NETMON_EMBEDDED_AGENT: "true", NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" },
  });
  token = await tokenFor(server, "admin");
});
afterAll(async () => {
  await server?.stop();
  await new Promise((r) => target?.close(r));
});

describe("device availability from checks", () => {
  it("goes up when its check passes and down, with the reason, when it fails", async () => {
    const added = await call("POST", "/api/v1/device-updates", {
      updates: [{ ip: "127.0.0.1", hostname: "web-box", source: "manual" }],
    });
    const uid = added.body.data.results[0].uid as string;
    expect((await call("GET", `/api/devices/${encodeURIComponent(uid)}`)).body.data.is_available).toBeNull();

    const check = await call(
      "POST",
      "/api/v2/service-checks",
      {
        data: {
          type: "service-check",
          attributes: {
            name: "web-box http",
            check_type: "http",
            target: `http://127.0.0.1:${port}/`,
            device_uid: uid,
            interval_seconds: 1,
            timeout_seconds: 2,
          },
        },
      },
      "application/vnd.api+json",
    );
    expect(check.status, JSON.stringify(check.body)).toBe(201);

    const up = await waitFor(async () => {
      const d = (await call("GET", `/api/devices/${encodeURIComponent(uid)}`)).body.data;
      return d.is_available === true ? d : null;
    }, "the device up");
    expect(up.availability_reason).toBe("all 1 checks pass");
    expect(up.availability_changed_at).toBeTruthy();

    healthy = false;
    const down = await waitFor(async () => {
      const d = (await call("GET", `/api/devices/${encodeURIComponent(uid)}`)).body.data;
      return d.is_available === false ? d : null;
    }, "the device down");
    expect(down.availability_reason).toContain("web-box http: critical");
    expect(down.availability_reason).toContain("503");
    // SRQL's own example now finds it.
    const q = await call("POST", "/api/query", { query: "in:devices is_available:false" });
    expect(q.body.results.map((r: { uid: string }) => r.uid)).toContain(uid);
    healthy = true;
  }, 90_000);
});
