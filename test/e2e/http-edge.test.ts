import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.ts";

describe("HTTP edge", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("GET /health answers 200 when the database answers", async () => {
    const res = await server.fetch("/health");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; database: { status: string; backend: string } };
    expect(body.status).toBe("ok");
    expect(body.database.status).toBe("ok");
    expect(body.database.backend).toBe(server.db.kind);
  });

  it("GET /health/live answers 200", async () => {
    const res = await server.fetch("/health/live");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
  });

  it("unknown plain routes answer 404 {error, message}", async () => {
    const res = await server.fetch("/api/no-such-thing");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.error).toBe("not_found");
    expect(typeof body.message).toBe("string");
  });

  it("unknown /api/v2 routes answer 404 as a JSON:API errors document", async () => {
    const res = await server.fetch("/api/v2/no-such-thing");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/vnd\.api\+json/);
    const body = (await res.json()) as {
      errors: { status: string; code: string; title: string; detail: string }[];
    };
    expect(body.errors[0]?.status).toBe("404");
    expect(body.errors[0]?.code).toBe("not_found");
  });

  it("every response carries a request id, and an incoming one is echoed", async () => {
    const a = await server.fetch("/health/live");
    expect(a.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const b = await server.fetch("/health/live", { headers: { "x-request-id": "trace-abc.123" } });
    expect(b.headers.get("x-request-id")).toBe("trace-abc.123");
    const c = await server.fetch("/health/live", { headers: { "x-request-id": "bad id with spaces" } });
    expect(c.headers.get("x-request-id")).not.toBe("bad id with spaces");
  });
});
