import http from "node:http";
import type { AddressInfo } from "node:net";
import { threadId } from "node:worker_threads";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileUserPattern, matchesUserPattern } from "../../src/kernel/user-pattern.ts";
import { monitoringRuntime } from "../../src/monitoring/feature.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * Issue 10 item 3: user regular expressions run on a linear-time engine, and the embedded
 * agent's checks run off the core's event loop.
 */

const J = "application/vnd.api+json";
const EVIL = "^(a+)+$";

describe("user patterns are linear-time", () => {
  it("evaluates a catastrophic-backtracking pattern correctly (V8 would take seconds)", () => {
    expect(matchesUserPattern(EVIL, `${"a".repeat(40)}!`)).toBe(false);
    expect(matchesUserPattern(EVIL, "a".repeat(40))).toBe(true);
  });

  it("refuses backreferences and lookaround with a 400-class error naming the field", () => {
    for (const p of ["(a)\\1", "a(?=b)", "(?<!x)y"]) {
      expect(() => compileUserPattern(p, "/data/attributes/config/body_match")).toThrow(/RE2/);
    }
  });
});

describe("the embedded agent cannot stall the API", () => {
  let server: TestServer;
  let token: string;
  let target: http.Server;
  let port: number;

  beforeAll(async () => {
    target = http.createServer((_req, res) => res.end(`${"a".repeat(40)}!`));
    await new Promise<void>((r) => target.listen(0, "127.0.0.1", () => r()));
    port = (target.address() as AddressInfo).port;
    server = await startTestServer({
      env: { NETMON_EMBEDDED_AGENT: "true", NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" },
    });
    token = await tokenFor(server, "admin");
  });
  afterAll(async () => {
    await server?.stop();
    target?.close();
  });

  async function api(method: string, path: string, body?: unknown) {
    const res = await server.fetch(`/api/v2${path}`, {
      method,
      headers: { ...authHeaders(token), ...(body ? { "content-type": J } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, doc: text ? JSON.parse(text) : null };
  }

  it("refuses a pattern RE2 cannot run when the check is saved", async () => {
    const r = await api("POST", "/service-checks", {
      data: {
        type: "service-check",
        attributes: {
          name: "backref",
          check_type: "http",
          target: `http://127.0.0.1:${port}/`,
          config: { body_match: "(a)\\1" },
        },
      },
    });
    expect(r.status).toBe(422);
    expect(r.doc.errors[0].source.pointer).toBe("/data/attributes/config/body_match");
  });

  it("runs a body_match of ^(a+)+$ to a correct result while the API keeps answering", async () => {
    const created = await api("POST", "/service-checks", {
      data: {
        type: "service-check",
        attributes: {
          name: "redos",
          check_type: "http",
          target: `http://127.0.0.1:${port}/`,
          interval_seconds: 1,
          config: { body_match: EVIL },
        },
      },
    });
    expect(created.status).toBe(201);
    const id = created.doc.data.id as string;
    let healthy = 0;
    const deadline = Date.now() + 25_000;
    let attrs: Record<string, unknown> | null = null;
    while (Date.now() < deadline) {
      const h = await server.fetch("/health");
      if (h.status === 200) healthy++;
      const r = await api("GET", `/service-checks/${id}`);
      if (r.doc.data.attributes.last_result) {
        attrs = r.doc.data.attributes;
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(attrs?.last_result).toBe("critical");
    expect(String(attrs?.last_error ?? attrs?.last_message ?? "")).toMatch(/does not match/);
    expect(healthy).toBeGreaterThan(0);
  });

  it("runs checks in a worker thread: a check that blocks its thread does not block the core", async () => {
    const thread = monitoringRuntime(server.ctx)?.checkThread;
    expect(thread).toBeTruthy();
    // Start the thread if no check has yet.
    await thread?.block(1);
    expect(thread?.threadId).not.toBeNull();
    expect(thread?.threadId).not.toBe(threadId);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    let finished = false;
    const blocked = thread?.block(4000).then(() => {
      finished = true;
    });
    let served = 0;
    // While the check thread spins, the core still answers requests and runs timers.
    for (let i = 0; i < 3; i++) if ((await server.fetch("/health")).status === 200) served++;
    // Timers keep firing too (give the 5 ms interval time to run at least once).
    await new Promise((r) => setTimeout(r, 100));
    const ticksDuringBlock = ticks;
    const servedBeforeTheCheckEnded = !finished;
    await blocked;
    clearInterval(timer);
    expect(served).toBe(3);
    expect(servedBeforeTheCheckEnded).toBe(true);
    expect(ticksDuringBlock).toBeGreaterThan(0);
  });
});
