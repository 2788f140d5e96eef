/**
 * Time-partitioned telemetry (decision 0320) through a running server: the leader job creates
 * the coming days' partitions at start, and rows far outside every daily partition land in
 * DEFAULT, stay readable through SRQL and JSON:API v2, and are purged by retention.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/storage/sql.ts";
import { listPartitions, PARTITION_DAYS_AHEAD } from "../../src/telemetry/partitions.ts";
import { purgeExpiredTelemetry } from "../../src/telemetry/retention.ts";
import { insertLogs } from "../../src/telemetry/write.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";
import { Client } from "./jsonapi-helpers.ts";

const DAY = 86_400_000;

describe("partitioned telemetry through the server", () => {
  let server: TestServer;
  let token: string;
  let v2: Client;

  beforeAll(async () => {
    server = await startTestServer();
    token = await tokenFor(server, "admin");
    v2 = new Client(server, token);
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function srql(query: string): Promise<{ body: string }[]> {
    const res = await server.fetch("/api/query", {
      method: "POST",
      headers: { ...authHeaders(token), "content-type": "application/json" },
      body: JSON.stringify({ query }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    return ((await res.json()) as { results: { body: string }[] }).results;
  }
  const bodies = async (time: string) =>
    (await srql(`in:logs service_name:partition-probe ${time} sort:timestamp:asc`)).map((r) => r.body);

  it("creates partitions ahead at start (beyond the migration's two days)", async () => {
    // Days are counted from a minute ago: had UTC midnight passed since the server started, the
    // new day's furthest partition would wait for the leader's next run (not a failure).
    const furthest = new Date(server.ctx.now().getTime() - 60_000 + PARTITION_DAYS_AHEAD * DAY);
    const name = `logs_p${furthest.toISOString().slice(0, 10).replaceAll("-", "")}`;
    await waitFor(
      async () => (await listPartitions(server.db, "logs")).some((p) => p.name === name),
      `partition ${name}`,
    );
  });

  it("keeps rows years away in DEFAULT, readable by SRQL and v2, and purges the old one", async () => {
    const [ancient, now, future] = (await insertLogs(server.db, [
      { timestamp: new Date("2019-03-01T10:00:00Z"), body: "ancient", service_name: "partition-probe" },
      { timestamp: server.ctx.now(), body: "now", service_name: "partition-probe" },
      { timestamp: new Date("2090-03-01T10:00:00Z"), body: "far future", service_name: "partition-probe" },
    ])) as [string, string, string];
    const homes = await server.db.many<{ body: string; p: string }>(sql`
      SELECT body, tableoid::regclass::text AS p FROM logs WHERE service_name = 'partition-probe' ORDER BY "timestamp"`);
    expect(homes.map((h) => [h.body, h.p === "logs_default"])).toEqual([
      ["ancient", true],
      ["now", false],
      ["far future", true],
    ]);

    // SRQL ranges are at most 90 days: one window around each row.
    expect(await bodies("time:[2019-02-01T00:00:00Z,2019-04-01T00:00:00Z]")).toEqual(["ancient"]);
    const hour = (h: number) => new Date(server.ctx.now().getTime() + h * 3_600_000).toISOString();
    expect(await bodies(`time:[${hour(-1)},${hour(1)}]`)).toEqual(["now"]);
    expect(await bodies("time:[2090-02-01T00:00:00Z,2090-04-01T00:00:00Z]")).toEqual(["far future"]);
    // v2 serves telemetry as collections (no read-by-id route): filter by id.
    const byId = async (id: string) => {
      const r = await v2.get("/logs", `filter[id][eq]=${id}`);
      expect(r.status).toBe(200);
      return (r.doc.data as { attributes: { body: string } }[]).map((d) => d.attributes.body);
    };
    expect(await byId(ancient)).toEqual(["ancient"]);
    expect(await byId(now)).toEqual(["now"]);
    expect(await byId(future)).toEqual(["far future"]);

    const purged = await purgeExpiredTelemetry(server.db, server.ctx.now(), {
      metricsDays: 7,
      rollupDays: 90,
      logDays: 30,
    });
    expect(purged.logs).toBe(1);
    expect(await byId(ancient)).toEqual([]);
    expect(await byId(future)).toEqual(["far future"]);
    expect(await bodies("time:[2019-02-01T00:00:00Z,2019-04-01T00:00:00Z]")).toEqual([]);
    expect(await bodies("time:[2090-02-01T00:00:00Z,2090-04-01T00:00:00Z]")).toEqual(["far future"]);
  });
});
