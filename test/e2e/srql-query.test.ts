import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Actor } from "../../src/access/actor.ts";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { runQuery } from "../../src/srql/run.ts";
import { insertLogs } from "../../src/telemetry/write.ts";
import { authHeaders, createRoleProfile, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { minutesAgo, type Seed, seedAll } from "./srql-seed.ts";

type Row = Record<string, unknown>;
interface QueryBody {
  results: Row[];
  pagination: { next_cursor: string | null; prev_cursor: string | null; limit: number };
  viz: { columns: { name: string }[]; suggestions: { kind: string }[] } | null;
  error: null;
}

describe("SRQL POST /api/query", () => {
  let server: TestServer;
  let seed: Seed;
  let admin: string;
  let viewer: string;

  beforeAll(async () => {
    // Many requests from one IP: raise the shared api_default budget for this suite.
    // The seeded fleet is minutes old: a 60 s heartbeat timeout would mark it silent and alert.
    server = await startTestServer({
      env: { NETMON_RATE_LIMIT_API_DEFAULT: "10000/60", NETMON_HEARTBEAT_TIMEOUT: "1h" },
    });
    seed = await seedAll(server.db);
    admin = await tokenFor(server, "admin");
    viewer = await tokenFor(server, "viewer");
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function post(
    body: unknown,
    token = admin,
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await server.fetch("/api/query", {
      method: "POST",
      headers: { ...authHeaders(token), "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }

  async function q(query: string, extra: Record<string, unknown> = {}, token = admin): Promise<QueryBody> {
    const r = await post({ query, ...extra }, token);
    if (r.status !== 200) throw new Error(`${query} → ${r.status} ${JSON.stringify(r.body)}`);
    return r.body as unknown as QueryBody;
  }

  const col = (b: QueryBody, c: string) => b.results.map((r) => r[c]);

  describe("devices", () => {
    it("wildcard, sort and limit (example 1)", async () => {
      const b = await q("in:devices hostname:%cam% limit:50 sort:last_seen:desc");
      expect(col(b, "hostname")).toEqual(["cam-lobby", "cam-garage"]);
      expect(b.pagination).toEqual({ next_cursor: null, prev_cursor: null, limit: 50 });
      expect(b.error).toBeNull();
      expect(b.viz?.suggestions.map((s) => s.kind)).toContain("table");
    });
    it("wildcards are case-insensitive; negated wildcard", async () => {
      expect(col(await q("in:devices hostname:%CAM%"), "hostname")).toHaveLength(2);
      const b = await q("in:devices !hostname:%cam% sort:hostname:asc");
      expect(col(b, "hostname")).toEqual(["core-sw1", "edge-rtr", "test-box"]);
    });
    it("equality on names people type ignores case; a '_' or '%' inside a quoted value is literal", async () => {
      expect(col(await q("in:devices hostname:CAM-LOBBY"), "hostname")).toEqual(["cam-lobby"]);
      expect(col(await q("in:devices vendor_name:cisco sort:hostname:asc"), "hostname")).toEqual([
        "core-sw1",
        "edge-rtr",
      ]);
      expect(col(await q("in:devices type:(camera,SWITCH) sort:hostname:asc"), "hostname")).toEqual([
        "cam-garage",
        "cam-lobby",
        "core-sw1",
      ]);
      expect(col(await q("in:devices !vendor_name:AXIS sort:hostname:asc"), "hostname")).toEqual([
        "core-sw1",
        "edge-rtr",
        "test-box",
      ]);
      expect(col(await q('in:devices hostname:equals:"cam_lobby"'), "hostname")).toEqual([]);
      // Identifiers stay exact.
      expect(col(await q("in:devices mac:aa:bb:cc:dd:ee:00"), "hostname")).toHaveLength(1);
    });
    it("array contains-all with repeated keys and lists", async () => {
      const both = await q(
        "in:devices discovery_sources:(sweep) discovery_sources:(armis) sort:hostname:asc",
      );
      expect(col(both, "hostname")).toEqual(["cam-lobby", "edge-rtr"]);
      const list = await q("in:devices discovery_sources:(sweep,armis) sort:hostname:asc");
      expect(col(list, "hostname")).toEqual(["cam-lobby", "edge-rtr"]);
    });
    it("CIDR and IP ranges", async () => {
      expect(col(await q("in:devices ip:10.0.0.0/8 sort:hostname:asc"), "hostname")).toEqual([
        "cam-garage",
        "cam-lobby",
        "core-sw1",
        "test-box",
      ]);
      expect(col(await q("in:devices ip:10.0.0.10-10.0.0.50 sort:ip:asc"), "hostname")).toEqual([
        "cam-lobby",
        "test-box",
      ]);
      expect(col(await q("in:devices !ip:10.0.0.0/8"), "hostname")).toEqual(["edge-rtr"]);
    });
    it("JSON paths and booleans", async () => {
      expect(col(await q("in:devices os.name:%OS% is_available:true sort:hostname:asc"), "hostname")).toEqual(
        ["cam-lobby", "core-sw1", "edge-rtr"],
      );
      expect(col(await q("in:devices metadata.site:dfw-edge sort:hostname:asc"), "hostname")).toEqual([
        "cam-garage",
        "cam-lobby",
        "core-sw1",
      ]);
      expect(col(await q("in:devices tags.role:core sort:hostname:asc"), "hostname")).toEqual([
        "cam-garage",
        "edge-rtr",
      ]);
    });
    it("lists, negated lists, != and :contains / :equals", async () => {
      expect(col(await q("in:devices vendor_name:(Cisco,Dell) sort:hostname:asc"), "hostname")).toEqual([
        "core-sw1",
        "edge-rtr",
        "test-box",
      ]);
      expect(col(await q("in:devices !vendor_name:(Cisco,Dell) sort:hostname:asc"), "hostname")).toEqual([
        "cam-garage",
        "cam-lobby",
      ]);
      expect(col(await q("in:devices vendor_name!=Axis sort:hostname:asc"), "hostname")).toHaveLength(3);
      expect(col(await q("in:devices hostname:contains:rtr"), "hostname")).toEqual(["edge-rtr"]);
      expect(col(await q('in:devices hostname:equals:"cam%"'), "hostname")).toEqual([]);
    });
    it("soft-deleted devices are hidden unless include_deleted:true", async () => {
      expect(col(await q("in:devices vendor_name:Dell"), "hostname")).toEqual(["test-box"]);
      expect(
        col(await q("in:devices vendor_name:Dell include_deleted:true sort:hostname:asc"), "hostname"),
      ).toEqual(["deleted-box", "test-box"]);
    });
    it("time windows and time comparisons", async () => {
      // last_seen 10, 20, 30, 40, 50 minutes ago (deleted one excluded).
      expect(col(await q("in:devices time:last_25m"), "hostname")).toEqual(["cam-lobby", "cam-garage"]);
      const from = minutesAgo(seed.now, 35).toISOString();
      const b = await q(`in:devices time:[${from},] sort:last_seen:asc`);
      expect(col(b, "hostname")).toEqual(["core-sw1", "cam-garage", "cam-lobby"]);
      expect(col(await q(`in:devices last_seen:<${from} sort:hostname:asc`), "hostname")).toEqual([
        "edge-rtr",
        "test-box",
      ]);
    });
    it("multi-key sort", async () => {
      const b = await q("in:devices sort:vendor_name:asc,hostname:desc");
      expect(col(b, "hostname")).toEqual(["cam-lobby", "cam-garage", "edge-rtr", "core-sw1", "test-box"]);
    });
    it("stats count by field, total, and by:/group: control tokens", async () => {
      const b = await q("in:devices vendor_name:Axis stats:count() as count by type");
      expect(b.results).toEqual([{ type: "Camera", count: 2 }]);
      expect(b.pagination.next_cursor).toBeNull();
      const t = await q('in:devices stats:"count() as total"');
      expect(t.results).toEqual([{ total: 5 }]);
      const g = await q("in:devices by:vendor_name");
      expect(g.results).toEqual([
        { vendor_name: "Axis", count: 2 },
        { vendor_name: "Cisco", count: 2 },
        { vendor_name: "Dell", count: 1 },
      ]);
      const tags = await q('in:devices stats:"count() as n by tags.role"');
      expect(tags.results).toEqual([
        { "tags.role": "edge", n: 3 },
        { "tags.role": "core", n: 2 },
      ]);
    });
  });

  describe("every entity answers with its seeded rows", () => {
    const cases: [string, number][] = [
      ["in:interfaces", 3],
      ["in:interfaces if_oper_status:2", 1],
      ["in:interfaces ip_addresses:(10.9.0.1,10.9.0.2)", 2],
      ["in:interfaces mac:00:11:22:33:44:01", 1],
      // Gateway status is not asserted: the monitoring feature marks silent gateways degraded.
      ["in:gateways agent_count:>4 sort:agent_count:desc limit:10", 2],
      ["in:gateways id:(gw-a,gw-b)", 2],
      ["in:agents capabilities:(icmp,snmp)", 1],
      ["in:agents ip:10.0.0.6", 1],
      ["in:alerts status:pending time:last_7d sort:timestamp:desc", 2],
      ["in:poll_jobs status:(completed,failed)", 2],
      ['in:services service_type:(ssh,sftp) timeFrame:"14 Days" sort:timestamp:desc', 2],
      ["in:services available:false time:last_24h", 1],
      ["in:logs severity:(ERROR,error) time:last_24h sort:timestamp:desc limit:100", 5],
      ["in:logs level:warn", 0],
      ["in:logs message:%refused%", 1],
      ["in:logs attributes.http.method:GET", 13],
      ["in:events severity:(Fatal,Critical,High) time:last_24h sort:time:desc", 2],
      ["in:events log_level:(WARNING,WARN) sort:time:desc limit:100", 1],
      ["in:traces time:last_24h status_code:(1,2) kind:(2,3) sort:timestamp:desc", 2],
      ["in:otel_trace_summaries time:last_24h sort:timestamp:desc limit:100", 2],
      ["in:otel_trace_summaries error_count:>0", 1],
      ["in:otel_metrics time:last_24h is_slow:true sort:duration_ms:desc limit:25", 1],
      ["in:otel_metric_points metric_name:http.requests", 2],
      ["in:timeseries_metrics metric_type:icmp", 6],
      ["in:cpu_metrics usage_percent:>88.1 usage_percent:<88.3", 2],
      ["in:memory_metrics usage_percent:>=70", 1],
      ["in:disk_metrics mount_point:/var", 1],
      ["in:process_metrics name:postgres", 1],
      ["in:capacity_forecasts has_exhaustion:true", 1],
    ];
    for (const [query, n] of cases) {
      it(query, async () => {
        expect((await q(query)).results).toHaveLength(n);
      });
    }
    it("uid is rewritten to the device field for telemetry entities", async () => {
      const b = await q(`in:timeseries_metrics metric_type:icmp uid:"${seed.deviceUids[0]}"`);
      expect(b.results).toHaveLength(6);
    });
    it("trace summaries are computed from spans", async () => {
      const b = await q("in:otel_trace_summaries trace_id:t1");
      expect(b.results[0]).toMatchObject({
        root_span_name: "GET /api",
        span_count: 2,
        error_count: 1,
        duration_ms: 40,
      });
    });
    it("capacity forecasts default to projected_exhaustion_at ascending", async () => {
      const b = await q("in:forecasts");
      expect(col(b, "resource_label")).toEqual(["root disk", "memory"]);
    });
  });

  describe("downsampling", () => {
    it("bucket/agg/value_field/series feed a time series", async () => {
      // The seed places points a few minutes before "now", so a run near an hour or
      // midnight boundary legitimately splits them over two buckets: derive the
      // expected groups from the seeded timestamps (date_bin from 2000-01-01 UTC,
      // ascending by bucket, then by series) instead of assuming one bucket.
      const HOUR = 3_600_000;
      const DAY = 24 * HOUR;
      const at = (minutes: number) => seed.now - minutes * 60_000;
      const groups = <T>(points: { t: number; series: string; v: T }[], width: number) => {
        const out = new Map<string, { bucket: number; series: string; vs: T[] }>();
        for (const p of points) {
          const bucket = Math.floor(p.t / width);
          const key = `${bucket}|${p.series}`;
          const g = out.get(key) ?? { bucket, series: p.series, vs: [] };
          g.vs.push(p.v);
          out.set(key, g);
        }
        return [...out.values()].sort((a, b) => a.bucket - b.bucket || a.series.localeCompare(b.series));
      };

      const b = await q("in:memory_metrics time:last_7d bucket:1h agg:max value_field:used_bytes limit:10");
      const memory = groups(
        [
          { t: at(1), series: seed.deviceUids[0] as string, v: 500 },
          { t: at(2), series: seed.deviceUids[0] as string, v: 700 },
        ],
        HOUR,
      ).map((g) => Math.max(...g.vs));
      expect(b.results.map((r) => r.value)).toEqual(memory);
      expect(b.results[0]).toMatchObject({ series: seed.deviceUids[0], used_bytes: memory[0] });
      expect(b.viz?.suggestions[0]).toEqual({
        kind: "timeseries",
        x: "timestamp",
        y: "value",
        series: "series",
      });

      const ts = await q("in:timeseries_metrics time:last_7d bucket:1d agg:count series:metric_name");
      const seeded = Array.from({ length: 12 }, (_, i) => ({
        t: at(i * 5 + 1),
        series: i % 2 === 0 ? "icmp_rtt_ms" : "if_in_octets",
        v: 1,
      }));
      expect(ts.results.map((r) => [r.series, r.value])).toEqual(
        groups(seeded, DAY).map((g) => [g.series, g.vs.length]),
      );
      expect(ts.results.reduce((n, r) => n + Number(r.value), 0)).toBe(12);

      const sum = await q("in:cpu_metrics bucket:1d agg:sum series:host_id");
      const cpu = Array.from({ length: 6 }, (_, i) => ({ t: at(i + 1), series: `h${i % 2}`, v: 1 }));
      expect(sum.results.map((r) => r.host_id)).toEqual(groups(cpu, DAY).map((g) => g.series));
    });
    it("downsample errors", async () => {
      for (const [query, msg] of [
        ["in:memory_metrics agg:avg", "downsample requires bucket:<duration>"],
        ["in:cpu_metrics bucket:5m value_field:core_id", "unsupported value_field 'core_id'"],
        ["in:cpu_metrics bucket:5m series:usage_percent", "unsupported series field 'usage_percent'"],
        ["in:devices bucket:5m", "downsampling is not supported for devices"],
        ["in:cpu_metrics bucket:5x", "bucket supports only s|m|h|d suffixes"],
        ["in:cpu_metrics bucket:40d", "bucket duration must be between 1s and 31d"],
        ["in:cpu_metrics bucket:5m agg:p95", "unsupported agg 'p95'"],
      ]) {
        const r = await post({ query });
        expect(r.status, query).toBe(400);
        expect(String(r.body.error), query).toContain(msg);
      }
    });
  });

  describe("errors", () => {
    it("invalid bodies are 400 {error: <message>} (spec 7.2)", async () => {
      for (const body of [
        {},
        { query: "" },
        { query: 5 },
        { query: "in:devices", limit: -1 },
        { query: "in:devices", direction: "up" },
      ]) {
        const r = await post(body);
        expect(r.status).toBe(400);
        expect(r.body.code).toBe("invalid_request");
      }
      // Spec 4.2/7.2: the error member is the message itself.
      const r = await post({});
      expect(r.body).toEqual({ error: "missing required field: query", code: "invalid_request" });
    });
    it("parse and plan errors name the token and its position", async () => {
      const r = await post({ query: "in:logs severty:error" });
      expect(r.status).toBe(400);
      expect(r.body.error).toContain("unsupported filter field 'severty'");
      expect(r.body.error).toContain("position 9");
      expect(r.body).toMatchObject({ code: "invalid_query", token: "severty:error", position: 9 });
      const e = await post({ query: "in:nothing" });
      expect(e.body.error).toContain("unsupported entity 'nothing'");
      const s = await post({ query: "in:devices sort:nope:desc" });
      expect(s.status).toBe(400);
      expect(s.body.error).toContain("unsupported sort field 'nope'");
    });
    it("stats supports only count() and allowed group fields", async () => {
      const cases: [string, string][] = [
        [
          "in:cpu_metrics time:last_7d stats:avg(usage_percent) as avg_usage",
          "unsupported aggregation 'avg(usage_percent)'",
        ],
        ["in:devices stats:count() as count by hostname", "unsupported stats group field 'hostname'"],
        ['in:devices stats:"sum(risk_score) as s"', "unsupported aggregation 'sum(risk_score)'"],
        [
          'in:devices stats:"count() as a by type" stats:"count() as b by vendor_name"',
          "conflicting 'by' clauses",
        ],
        ["in:devices stats:count() as", "stats aliases must be of the form"],
        ['in:devices stats:"count() as bad-alias"', "stats alias must be alphanumeric"],
      ];
      for (const [query, msg] of cases) {
        const r = await post({ query });
        expect(r.status, query).toBe(400);
        expect(String(r.body.error), query).toContain(msg);
      }
    });
    it("a device uid list requires limit <= 200; lists hold at most 200 values", async () => {
      const uids = seed.deviceUids.slice(0, 2).join(",");
      const ok = await post({ query: `in:devices uid:(${uids})`, limit: 200 });
      expect(ok.status).toBe(200);
      expect((ok.body.results as Row[]).length).toBe(2);
      const over = await post({ query: `in:devices uid:(${uids})`, limit: 201 });
      expect(over.status).toBe(400);
      expect(String(over.body.error)).toContain("limit <= 200");
      const logs = await post({ query: `in:logs device_id:(${uids}) limit:500` });
      expect(logs.status).toBe(400);
      const many = Array.from({ length: 201 }, (_, i) => `h${i}`).join(",");
      const big = await post({ query: `in:devices hostname:(${many})` });
      expect(big.status).toBe(400);
      expect(String(big.body.error)).toContain("list filters support at most 200 values");
    });
    it("time ranges are bounded", async () => {
      const r = await post({ query: "in:cpu_metrics time:last_1y" });
      expect(r.status).toBe(400);
      expect(String(r.body.error)).toContain("time range cannot exceed 90 days");
      // Stats and downsampling over metrics may cover 395 days.
      const long = await post({ query: "in:cpu_metrics time:last_400d stats:count()" });
      expect(long.status).toBe(400);
      expect(String(long.body.error)).toContain("time range cannot exceed 395 days");
      const ok = await post({ query: "in:cpu_metrics time:last_1y stats:count()" });
      expect(ok.status).toBe(200);
      const logs = await post({ query: "in:logs time:last_1y stats:count()" });
      expect(logs.status).toBe(400);
    });
  });

  describe("authorization", () => {
    it("requires authentication", async () => {
      const res = await server.fetch("/api/query", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ query: "in:devices" }),
      });
      expect(res.status).toBe(401);
    });
    it("an entity the caller may not view answers 403 with the exact message", async () => {
      const profile = await createRoleProfile(server, {
        baseRole: "viewer",
        revoke: ["observability.logs.view"],
      });
      const user = await createUser(server, { role: "viewer", roleProfileId: profile.id });
      const token = await tokenFor(server, { id: user.id });
      const r = await post({ query: "in:logs" }, token);
      expect(r.status).toBe(403);
      expect(r.body).toEqual({
        error: "You do not have permission to query this entity",
        code: "forbidden",
      });
      expect((await post({ query: "in:devices" }, token)).status).toBe(200);
      expect((await post({ query: "in:devices" }, viewer)).status).toBe(200);
    });
    it("rows of partitions the actor may not see are never returned", async () => {
      const actor: Actor = {
        ...SYSTEM_ACTOR,
        kind: "user",
        id: "u",
        permissions: new Set([
          "analytics.view",
          "devices.view",
          "observability.logs.view",
          "observability.alerts.view",
        ]),
        partitions: ["default"],
      };
      const d = await runQuery(server.ctx, actor, { query: "in:devices limit:100" });
      expect(d.results.map((r) => r.hostname)).not.toContain("edge-rtr");
      expect(d.results).toHaveLength(4);
      const l = await runQuery(server.ctx, actor, { query: "in:logs limit:100" });
      expect(l.results).toHaveLength(24);
      const a = await runQuery(server.ctx, actor, { query: "in:alerts" });
      expect(a.results.map((r) => r.title).sort()).toEqual(["CPU high", "System check"]);
      const s = await runQuery(server.ctx, actor, { query: "in:devices by:partition" });
      expect(s.results).toEqual([{ partition: "default", count: 4 }]);
    });
  });

  describe("cursors", () => {
    it("pages forward then back return the same pages, without skips or repeats", async () => {
      const query = "in:logs sort:timestamp:desc";
      const all = (await q(query, { limit: 1000 })).results.map((r) => r.id);
      expect(all).toHaveLength(25);
      const pages: unknown[][] = [];
      const cursors: QueryBody["pagination"][] = [];
      let cursor: string | null = null;
      do {
        const b: QueryBody = await q(query, { limit: 7, ...(cursor ? { cursor } : {}) });
        pages.push(b.results.map((r) => r.id));
        cursors.push(b.pagination);
        cursor = b.pagination.next_cursor;
      } while (cursor);
      expect(pages.map((p) => p.length)).toEqual([7, 7, 7, 4]);
      expect(pages.flat()).toEqual(all);
      expect(cursors[0]?.prev_cursor).toBeNull();
      // Back from the last page.
      let prev = cursors[3]?.prev_cursor ?? null;
      for (let i = 2; i >= 0; i--) {
        const b: QueryBody = await q(query, { limit: 7, cursor: prev, direction: "prev" });
        expect(b.results.map((r) => r.id)).toEqual(pages[i]);
        prev = b.pagination.prev_cursor;
      }
      expect(prev).toBeNull();
    });
    it("keeps pages stable while rows are inserted, also with a nullable multi-key sort", async () => {
      for (const query of ["in:logs", "in:logs sort:service_name:asc,severity_number:desc"]) {
        const first = await q(query, { limit: 10 });
        const before = (await q(query, { limit: 1000 })).results.map((r) => r.id);
        await insertLogs(server.db, [
          { timestamp: new Date(), body: "new", service_name: "aaa" },
          { timestamp: new Date(), body: "new2" },
        ]);
        const seen = [...first.results.map((r) => r.id)];
        let cursor = first.pagination.next_cursor;
        while (cursor) {
          const b = await q(query, { limit: 10, cursor });
          seen.push(...b.results.map((r) => r.id));
          cursor = b.pagination.next_cursor;
        }
        // Everything that was after page 1 is seen exactly once; inserted rows sort before it.
        const after = before.slice(10);
        expect(seen.slice(10).filter((id) => after.includes(id))).toEqual(after);
        expect(new Set(seen).size).toBe(seen.length);
      }
    });
    it("tampered, foreign and reused cursors are 400", async () => {
      const b = await q("in:devices", { limit: 2 });
      const c = b.pagination.next_cursor as string;
      expect(c).toBeTruthy();
      const [body, sig] = c.split(".") as [string, string];
      const payload = JSON.parse(Buffer.from(body, "base64url").toString());
      payload.k[0] = "2000-01-01T00:00:00.000000Z";
      const forged = `${Buffer.from(JSON.stringify(payload)).toString("base64url")}.${sig}`;
      for (const [cursor, msg] of [
        [forged, "invalid cursor signature"],
        [`${body}.${sig.slice(0, -2)}xx`, "invalid cursor signature"],
        ["garbage", "invalid cursor"],
      ]) {
        const r = await post({ query: "in:devices", limit: 2, cursor });
        expect(r.status).toBe(400);
        expect(r.body.code).toBe("invalid_cursor");
        expect(r.body.error).toBe(msg);
      }
      const other = await post({ query: "in:devices is_available:true", limit: 2, cursor: c });
      expect(other.status).toBe(400);
      expect(other.body.error).toBe("cursor does not belong to this query");
      const onStats = await post({ query: "in:devices by:type", cursor: c });
      expect(onStats.status).toBe(400);
      const inText = await post({ query: `in:devices cursor:${c}` });
      expect(inText.status).toBe(400);
    });
  });

  describe("catalog", () => {
    it("serves the catalog with ETag and Cache-Control, and 304 on revalidation", async () => {
      const res = await server.fetch("/api/srql/catalog", { headers: authHeaders(viewer) });
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        version: string;
        control_tokens: string[];
        operators: string[];
        entities: Record<string, { label: string; fields: Record<string, string[]> }>;
      };
      expect(res.headers.get("etag")).toBe(`"${body.version}"`);
      expect(res.headers.get("cache-control")).toBe("private, max-age=300, must-revalidate");
      expect(body.version).toMatch(/^[0-9a-f]{64}$/);
      expect(body.control_tokens).toEqual(["by:", "group:", "in:", "limit:", "sort:", "time:", "where"]);
      expect(body.operators).toEqual([":", ":contains", ":equals", "!=", ">", ">=", "<", "<="]);
      expect(body.entities.logs?.label).toBe("Logs");
      expect(body.entities.logs?.fields.numeric).toContain("severity_number");
      expect(body.entities.devices?.fields.boolean).toContain("is_available");
      expect(body.entities.devices?.fields.time).toContain("last_seen_time");
      expect(body.entities.devices?.fields.text).toContain("hostname");
      const etag = res.headers.get("etag") as string;
      for (const inm of [etag, `W/${etag}`, `"nope", ${etag}`]) {
        const again = await server.fetch("/api/srql/catalog", {
          headers: { ...authHeaders(viewer), "if-none-match": inm },
        });
        expect(again.status).toBe(304);
        expect(await again.text()).toBe("");
        expect(again.headers.get("etag")).toBe(etag);
        expect(again.headers.get("cache-control")).toBe("private, max-age=300, must-revalidate");
      }
      const stale = await server.fetch("/api/srql/catalog", {
        headers: { ...authHeaders(viewer), "if-none-match": '"old"' },
      });
      expect(stale.status).toBe(200);
    });
    it("requires authentication", async () => {
      expect((await server.fetch("/api/srql/catalog")).status).toBe(401);
    });
  });
});
