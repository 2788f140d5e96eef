import { afterEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** Issue 19: request lines are logged at debug, so the default (info) log is not one line per request. */
describe("request logs", () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  async function requestLines(level: string): Promise<Record<string, unknown>[]> {
    server = await startTestServer({ env: { NETMON_LOG_LEVEL: level } });
    for (let i = 0; i < 3; i++) await server.fetch("/api/devices");
    await server.fetch("/health");
    return server.logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === "request completed");
  }

  it("are absent at the default level (info)", async () => {
    expect(await requestLines("info")).toEqual([]);
  });

  it("appear at debug, one JSON line per request with method, route, status and time", async () => {
    const lines = await requestLines("debug");
    expect(lines.length).toBeGreaterThanOrEqual(4);
    const devices = lines.find((l) => (l.req as { url?: string }).url === "/api/devices");
    expect(devices).toMatchObject({ level: 20, req: { method: "GET" }, res: { statusCode: 401 } });
    expect(typeof devices?.responseTime).toBe("number");
  });
});
