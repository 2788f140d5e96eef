/**
 * JSON:API v2 conformance: media types, filters (every operator on every attribute type,
 * and/or/not), rejected keys/operators/values, sort, offset and keyset pagination under
 * concurrent inserts, include, sparse fieldsets, body validation, authorization.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/storage/sql.ts";
import { tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { type Answer, Client, des, expectError, ids, J, qs } from "./jsonapi-helpers.ts";

interface Seed {
  uid: string;
  name: string | null;
  port: number | null;
  is_healthy: boolean;
  status: string;
  created_time: string;
  metadata: Record<string, unknown>;
  gateway_id: string | null;
}

const NAMES = ["alpha", "bravo", "charlie", "delta", "echo", null, "foxtrot", "golf", "hotel", null];
const STATUSES = ["connecting", "connected", "degraded", "disconnected", "unavailable"];

describe("JSON:API v2 conformance", () => {
  let server: TestServer;
  let admin: Client;
  let viewer: Client;
  let anon: Client;
  const seeds: Seed[] = [];

  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" } });
    admin = new Client(server, await tokenFor(server, "admin"));
    viewer = new Client(server, await tokenFor(server, "viewer"));
    anon = new Client(server, null);
    for (const g of ["gw-a", "gw-b"]) {
      const r = await admin.req("POST", "/gateways", {
        data: { type: "gateway", id: g, attributes: { component_id: `c-${g}` } },
      });
      expect(r.status, JSON.stringify(r.doc)).toBe(201);
    }
    for (let i = 0; i < NAMES.length; i++) {
      const uid = `agent-${String(i).padStart(2, "0")}`;
      const attrs: Record<string, unknown> = {
        uid,
        name: NAMES[i],
        port: i % 4 === 3 ? null : 1000 + (i % 5) * 10,
        metadata: { rack: i % 2 === 0 ? "r1" : "r2" },
        gateway_id: i % 3 === 0 ? null : i % 3 === 1 ? "gw-a" : "gw-b",
      };
      const r = await admin.create("agent", "/agents", attrs);
      expect(r.status, JSON.stringify(r.doc)).toBe(201);
      // Fixture: spread states, health and creation times directly in the table.
      const status = STATUSES[i % STATUSES.length] as string;
      const created = new Date(Date.UTC(2026, 0, 1 + i)).toISOString();
      const healthy = i % 2 === 0;
      await server.db.query(
        sql`UPDATE agents SET status = ${status}, is_healthy = ${healthy}, created_time = ${created} WHERE uid = ${uid}`,
      );
      seeds.push({
        uid,
        name: NAMES[i] ?? null,
        port: attrs.port as number | null,
        is_healthy: healthy,
        status,
        created_time: created,
        metadata: attrs.metadata as Record<string, unknown>,
        gateway_id: attrs.gateway_id as string | null,
      });
    }
  });
  afterAll(async () => {
    await server?.stop();
  });

  const agentIds = async (filter: Record<string, unknown>): Promise<string[]> =>
    ids(await admin.get("/agents", { filter, page: { limit: 1000 } })).sort();

  const expected = (pred: (s: Seed) => boolean) =>
    seeds
      .filter(pred)
      .map((s) => s.uid)
      .sort();

  describe("media types", () => {
    it("answers with the JSON:API media type", async () => {
      const r = await admin.get("/gateways");
      expect(r.status).toBe(200);
      expect(r.type).toMatch(/^application\/vnd\.api\+json/);
      expect((r.doc as { jsonapi?: { version: string } }).jsonapi).toEqual({ version: "1.1" });
    });

    it("415 for a body without the JSON:API media type", async () => {
      const body = { data: { type: "gateway", id: "gw-415", attributes: {} } };
      const r = await admin.req("POST", "/gateways", body, { "content-type": "application/json" });
      expectError(r, 415);
    });

    it("415 for media type parameters other than ext/profile, and for ext", async () => {
      const body = { data: { type: "gateway", id: "gw-415b", attributes: {} } };
      expectError(await admin.req("POST", "/gateways", body, { "content-type": `${J}; charset=utf-8` }), 415);
      expectError(
        await admin.req("POST", "/gateways", body, { "content-type": `${J}; ext="https://x.test/ext"` }),
        415,
      );
      const ok = await admin.req("POST", "/gateways", body, {
        "content-type": `${J}; profile="https://x.test/p"`,
      });
      expect(ok.status).toBe(201);
    });

    it("406 when Accept only allows parameterised JSON:API forms", async () => {
      const res = await admin.server.fetch("/api/v2/gateways", {
        headers: { ...admin.headers(), accept: `${J}; charset=utf-8` },
      });
      expect(res.status).toBe(406);
      expect(res.headers.get("content-type")).toMatch(/^application\/vnd\.api\+json/);
      const both = await admin.server.fetch("/api/v2/gateways", {
        headers: { ...admin.headers(), accept: `${J}; charset=utf-8, ${J}` },
      });
      expect(both.status).toBe(200);
      const any = await admin.server.fetch("/api/v2/gateways", {
        headers: { ...admin.headers(), accept: "*/*" },
      });
      expect(any.status).toBe(200);
    });
  });

  describe("filters", () => {
    it("string attribute: every operator", async () => {
      const n = (s: Seed) => s.name;
      expect(await agentIds({ name: { eq: "delta" } })).toEqual(expected((s) => n(s) === "delta"));
      expect(await agentIds({ name: { not_eq: "delta" } })).toEqual(
        expected((s) => n(s) !== null && n(s) !== "delta"),
      );
      expect(await agentIds({ name: { greater_than: "delta" } })).toEqual(
        expected((s) => n(s) !== null && (n(s) as string) > "delta"),
      );
      expect(await agentIds({ name: { greater_than_or_equal: "delta" } })).toEqual(
        expected((s) => n(s) !== null && (n(s) as string) >= "delta"),
      );
      expect(await agentIds({ name: { less_than: "delta" } })).toEqual(
        expected((s) => n(s) !== null && (n(s) as string) < "delta"),
      );
      expect(await agentIds({ name: { less_than_or_equal: "delta" } })).toEqual(
        expected((s) => n(s) !== null && (n(s) as string) <= "delta"),
      );
      expect(await agentIds({ name: { in: ["alpha", "golf", "zulu"] } })).toEqual(
        expected((s) => ["alpha", "golf"].includes(n(s) ?? "")),
      );
      expect(await agentIds({ name: { is_nil: true } })).toEqual(expected((s) => n(s) === null));
      expect(await agentIds({ name: { is_nil: false } })).toEqual(expected((s) => n(s) !== null));
      expect(await agentIds({ name: { is_distinct_from: "echo" } })).toEqual(
        expected((s) => n(s) !== "echo"),
      );
      expect(await agentIds({ name: { is_not_distinct_from: "echo" } })).toEqual(
        expected((s) => n(s) === "echo"),
      );
      expect(await agentIds({ name: { contains: "ot" } })).toEqual(
        expected((s) => (n(s) ?? "").includes("ot")),
      );
      expect(await agentIds({ name: { like: "%l%" } })).toEqual(expected((s) => (n(s) ?? "").includes("l")));
      expect(await agentIds({ name: { ilike: "%L%" } })).toEqual(expected((s) => (n(s) ?? "").includes("l")));
    });

    it("integer attribute: every operator", async () => {
      const p = (s: Seed) => s.port;
      const nn = (s: Seed) => p(s) !== null;
      expect(await agentIds({ port: { eq: "1010" } })).toEqual(expected((s) => p(s) === 1010));
      expect(await agentIds({ port: { not_eq: "1010" } })).toEqual(expected((s) => nn(s) && p(s) !== 1010));
      expect(await agentIds({ port: { greater_than: "1010" } })).toEqual(
        expected((s) => nn(s) && (p(s) as number) > 1010),
      );
      expect(await agentIds({ port: { greater_than_or_equal: "1010" } })).toEqual(
        expected((s) => nn(s) && (p(s) as number) >= 1010),
      );
      expect(await agentIds({ port: { less_than: "1020" } })).toEqual(
        expected((s) => nn(s) && (p(s) as number) < 1020),
      );
      expect(await agentIds({ port: { less_than_or_equal: "1020" } })).toEqual(
        expected((s) => nn(s) && (p(s) as number) <= 1020),
      );
      expect(await agentIds({ port: { in: ["1000", "1040"] } })).toEqual(
        expected((s) => p(s) === 1000 || p(s) === 1040),
      );
      expect(await agentIds({ port: { is_nil: true } })).toEqual(expected((s) => p(s) === null));
      expect(await agentIds({ port: { is_distinct_from: "1000" } })).toEqual(expected((s) => p(s) !== 1000));
      expect(await agentIds({ port: { is_not_distinct_from: "1000" } })).toEqual(
        expected((s) => p(s) === 1000),
      );
    });

    it("boolean attribute: every operator", async () => {
      const h = (s: Seed) => s.is_healthy;
      expect(await agentIds({ is_healthy: { eq: "true" } })).toEqual(expected(h));
      expect(await agentIds({ is_healthy: { not_eq: "true" } })).toEqual(expected((s) => !h(s)));
      expect(await agentIds({ is_healthy: { greater_than: "false" } })).toEqual(expected(h));
      expect(await agentIds({ is_healthy: { greater_than_or_equal: "false" } })).toEqual(
        expected(() => true),
      );
      expect(await agentIds({ is_healthy: { less_than: "true" } })).toEqual(expected((s) => !h(s)));
      expect(await agentIds({ is_healthy: { less_than_or_equal: "true" } })).toEqual(expected(() => true));
      expect(await agentIds({ is_healthy: { in: ["false"] } })).toEqual(expected((s) => !h(s)));
      expect(await agentIds({ is_healthy: { is_nil: true } })).toEqual([]);
      expect(await agentIds({ is_healthy: { is_distinct_from: "true" } })).toEqual(expected((s) => !h(s)));
      expect(await agentIds({ is_healthy: { is_not_distinct_from: "true" } })).toEqual(expected(h));
    });

    it("datetime attribute: every operator", async () => {
      const t = (s: Seed) => Date.parse(s.created_time);
      const pivot = "2026-01-05T00:00:00Z";
      const pv = Date.parse(pivot);
      expect(await agentIds({ created_time: { eq: pivot } })).toEqual(expected((s) => t(s) === pv));
      expect(await agentIds({ created_time: { not_eq: pivot } })).toEqual(expected((s) => t(s) !== pv));
      expect(await agentIds({ created_time: { greater_than: pivot } })).toEqual(expected((s) => t(s) > pv));
      expect(
        await agentIds({ created_time: { greater_than_or_equal: "2026-01-05T01:00:00+01:00" } }),
      ).toEqual(expected((s) => t(s) >= pv));
      expect(await agentIds({ created_time: { less_than: pivot } })).toEqual(expected((s) => t(s) < pv));
      expect(await agentIds({ created_time: { less_than_or_equal: pivot } })).toEqual(
        expected((s) => t(s) <= pv),
      );
      expect(await agentIds({ created_time: { in: [pivot, "2026-01-01T00:00:00Z"] } })).toEqual(
        expected((s) => t(s) === pv || t(s) === Date.parse("2026-01-01T00:00:00Z")),
      );
      expect(await agentIds({ created_time: { is_nil: false } })).toEqual(expected(() => true));
      expect(await agentIds({ created_time: { is_distinct_from: pivot } })).toEqual(
        expected((s) => t(s) !== pv),
      );
      expect(await agentIds({ created_time: { is_not_distinct_from: pivot } })).toEqual(
        expected((s) => t(s) === pv),
      );
    });

    it("enum attribute: every operator", async () => {
      const st = (s: Seed) => s.status;
      expect(await agentIds({ status: { eq: "connected" } })).toEqual(expected((s) => st(s) === "connected"));
      expect(await agentIds({ status: { not_eq: "connected" } })).toEqual(
        expected((s) => st(s) !== "connected"),
      );
      expect(await agentIds({ status: { greater_than: "degraded" } })).toEqual(
        expected((s) => st(s) > "degraded"),
      );
      expect(await agentIds({ status: { greater_than_or_equal: "degraded" } })).toEqual(
        expected((s) => st(s) >= "degraded"),
      );
      expect(await agentIds({ status: { less_than: "degraded" } })).toEqual(
        expected((s) => st(s) < "degraded"),
      );
      expect(await agentIds({ status: { less_than_or_equal: "degraded" } })).toEqual(
        expected((s) => st(s) <= "degraded"),
      );
      expect(await agentIds({ status: { in: ["connecting", "unavailable"] } })).toEqual(
        expected((s) => ["connecting", "unavailable"].includes(st(s))),
      );
      expect(await agentIds({ status: { is_nil: true } })).toEqual([]);
      expect(await agentIds({ status: { is_distinct_from: "connected" } })).toEqual(
        expected((s) => st(s) !== "connected"),
      );
      expect(await agentIds({ status: { is_not_distinct_from: "connected" } })).toEqual(
        expected((s) => st(s) === "connected"),
      );
    });

    it("object attribute: every operator (JSON values)", async () => {
      const r1 = JSON.stringify({ rack: "r1" });
      const r2 = JSON.stringify({ rack: "r2" });
      const rack = (s: Seed) => s.metadata.rack;
      expect(await agentIds({ metadata: { eq: r1 } })).toEqual(expected((s) => rack(s) === "r1"));
      expect(await agentIds({ metadata: { not_eq: r1 } })).toEqual(expected((s) => rack(s) !== "r1"));
      expect(await agentIds({ metadata: { greater_than: r1 } })).toEqual(expected((s) => rack(s) === "r2"));
      expect(await agentIds({ metadata: { greater_than_or_equal: r1 } })).toEqual(expected(() => true));
      expect(await agentIds({ metadata: { less_than: r2 } })).toEqual(expected((s) => rack(s) === "r1"));
      expect(await agentIds({ metadata: { less_than_or_equal: r2 } })).toEqual(expected(() => true));
      expect(await agentIds({ metadata: { in: [r2] } })).toEqual(expected((s) => rack(s) === "r2"));
      expect(await agentIds({ metadata: { is_nil: true } })).toEqual([]);
      expect(await agentIds({ metadata: { is_distinct_from: r2 } })).toEqual(
        expected((s) => rack(s) !== "r2"),
      );
      expect(await agentIds({ metadata: { is_not_distinct_from: r2 } })).toEqual(
        expected((s) => rack(s) === "r2"),
      );
    });

    it("id key and relationship filters", async () => {
      expect(await agentIds({ id: { eq: "agent-03" } })).toEqual(["agent-03"]);
      expect(await agentIds({ gateway: { id: { eq: "gw-a" } } })).toEqual(
        expected((s) => s.gateway_id === "gw-a"),
      );
      expect(await agentIds({ not: { gateway: { last_seen: { is_nil: false } } } })).toEqual(
        expected((s) => s.gateway_id === null),
      );
    });

    it("and / or / not nesting", async () => {
      const f = {
        or: [
          { and: [{ status: { eq: "connected" } }, { is_healthy: { eq: "true" } }] },
          { not: { port: { is_nil: false } } },
        ],
      };
      expect(await agentIds(f)).toEqual(
        expected((s) => (s.status === "connected" && s.is_healthy) || s.port === null),
      );
      const g = {
        and: [
          { not: { or: [{ name: { is_nil: true } }, { name: { like: "%a%" } }] } },
          { port: { less_than: "1040" } },
        ],
      };
      expect(await agentIds(g)).toEqual(
        expected((s) => !(s.name === null || s.name.includes("a")) && s.port !== null && s.port < 1040),
      );
      // several operators on one key combine with AND
      expect(await agentIds({ port: { greater_than: "1000", less_than: "1030" } })).toEqual(
        expected((s) => s.port !== null && s.port > 1000 && s.port < 1030),
      );
    });

    it("rejects unknown keys, wrong operators and badly typed values, naming the parameter", async () => {
      const bad = async (q: string, parameter: string) => {
        const e = expectError(await admin.get("/agents", q), 400, parameter);
        expect(e.detail.length).toBeGreaterThan(0);
      };
      await bad("filter[nope][eq]=1", "filter[nope]");
      await bad("filter[port][contains]=1", "filter[port][contains]");
      await bad("filter[status][like]=x", "filter[status][like]");
      await bad("filter[name][between]=a", "filter[name][between]");
      await bad("filter[port][eq]=abc", "filter[port][eq]");
      await bad("filter[port][eq]=1.5", "filter[port][eq]");
      await bad("filter[status][eq]=sleeping", "filter[status][eq]");
      await bad("filter[is_healthy][eq]=yes", "filter[is_healthy][eq]");
      await bad("filter[created_time][gt]=2026-01-01", "filter[created_time][gt]");
      await bad("filter[created_time][greater_than]=2026-01-01", "filter[created_time][greater_than]");
      await bad("filter[metadata][eq]=%7Bbad", "filter[metadata][eq]");
      await bad("filter[status][in]=connected", "filter[status][in]");
      await bad("filter[status][in][]=connected&filter[status][in][]=zzz", "filter[status][in][1]");
      await bad("filter[name][is_nil]=maybe", "filter[name][is_nil]");
      // A bare value is equality (issue 20: one-level deepObject serialisers), still typed.
      await bad("filter[port]=x", "filter[port][eq]");
      await bad("filter[capabilities][eq]=%5B%5D", "filter[capabilities]");
      await bad("filter[and][0][nope][eq]=1", "filter[and][0][nope]");
      await bad("filter[not][port][eq]=x", "filter[not][port][eq]");
      await bad("filter[gateway][nope][eq]=1", "filter[gateway][nope]");
      await bad("filter=abc", "filter");
      await bad("bogus=1", "bogus");
      // uuid format (telemetry service_status.service_check_id)
      expectError(
        await admin.get("/service_status", "filter[service_check_id][eq]=not-a-uuid"),
        400,
        "filter[service_check_id][eq]",
      );
    });
  });

  describe("sort", () => {
    it("sorts by several keys, '-' for descending; id breaks ties", async () => {
      const r = await admin.get("/agents", { sort: "-port,name", page: { limit: 100 } });
      const got = ids(r);
      const cmpNullsFirst = <T>(a: T | null | undefined, b: T | null | undefined, desc: boolean): number => {
        if (a === b) return 0;
        // null sorts as the largest value: ASC NULLS LAST / DESC NULLS FIRST
        if (a === null || a === undefined) return desc ? -1 : 1;
        if (b === null || b === undefined) return desc ? 1 : -1;
        return (a < b ? -1 : 1) * (desc ? -1 : 1);
      };
      const exp = [...seeds]
        .sort(
          (a, b) =>
            cmpNullsFirst(a.port, b.port, true) ||
            cmpNullsFirst(a.name, b.name, false) ||
            (a.uid < b.uid ? -1 : 1),
        )
        .map((s) => s.uid);
      expect(got).toEqual(exp);
    });

    it("rejects unknown and unsortable fields with source.parameter sort", async () => {
      expectError(await admin.get("/agents", "sort=nope"), 400, "sort");
      expectError(await admin.get("/agents", "sort=-metadata"), 400, "sort");
      expectError(await admin.get("/agents", "sort=type_name"), 400, "sort");
    });
  });

  describe("pagination", () => {
    it("offset pages follow links.next with no gaps or repeats while rows are inserted", async () => {
      const before = ids(await admin.get("/agents", { page: { limit: 1000 } }));
      const seen: string[] = [];
      let next: string | null = `/agents?${qs({ page: { limit: 3, offset: 0 } })}`;
      let k = 0;
      while (next) {
        const [r]: [Answer, Answer] = await Promise.all([
          admin.get(next.replace(/^.*\/api\/v2/, "")),
          admin.create("agent", "/agents", { uid: `offset-new-${k++}`, name: "zz-new" }),
        ]);
        seen.push(...ids(r));
        next = (r.doc.links?.next as string | null) ?? null;
        expect(r.doc.links?.self).toBeTruthy();
        if (k > 40) break;
      }
      const original = seen.filter((id) => before.includes(id));
      expect(original).toEqual(before);
      expect(new Set(seen).size).toBe(seen.length);
    });

    it("keyset pages (after/before) with no gaps or repeats while rows are inserted mid-order", async () => {
      const sort = "name";
      const before = ids(await admin.get("/agents", { sort, page: { limit: 1000 } }));
      const seen: string[] = [];
      let next: string | null = `/agents?${qs({ sort, page: { limit: 4 } })}`;
      let k = 0;
      let pages = 0;
      let lastPage: Answer | null = null;
      while (next) {
        const [r]: [Answer, Answer] = await Promise.all([
          admin.get(next.replace(/^.*\/api\/v2/, "")),
          // names that sort into the middle of the walk
          admin.create("agent", "/agents", { uid: `keyset-new-${k}`, name: `d${k++}` }),
        ]);
        seen.push(...ids(r));
        pages++;
        lastPage = r;
        next = (r.doc.links?.next as string | null) ?? null;
        if (pages > 60) break;
      }
      expect(new Set(seen).size).toBe(seen.length);
      const original = seen.filter((id) => before.includes(id));
      expect(original).toEqual(before);
      // walk back with links.prev from the last page: the previous page is exactly the one before it
      const prev = lastPage?.doc.links?.prev as string;
      expect(prev).toContain("page[before]=");
      const back = ids(await admin.get(prev.replace(/^.*\/api\/v2/, "")));
      expect(back.length).toBe(4);
      const firstOfLast = ids(lastPage as Answer)[0] as string;
      const all = ids(await admin.get("/agents", { sort, page: { limit: 1000 } }));
      const idx = all.indexOf(firstOfLast);
      expect(back).toEqual(all.slice(idx - 4, idx));
    });

    it("keyset walks forward and backward match the full ordering for mixed directions and nulls", async () => {
      for (const sort of ["-port,name", "port,-name", "-is_healthy,-name", "name,-port", "-created_time"]) {
        const all = ids(await admin.get("/agents", { sort, page: { limit: 1000 } }));
        const forward: string[] = [];
        let next: string | null = `/agents?${qs({ sort, page: { limit: 3 } })}`;
        let last: Answer | null = null;
        for (let i = 0; next && i < 100; i++) {
          const r = await admin.get(next.replace(/^.*\/api\/v2/, ""));
          forward.push(...ids(r));
          last = r;
          next = (r.doc.links?.next as string | null) ?? null;
        }
        expect(forward, sort).toEqual(all);
        const backward: string[] = [];
        let prev = (last as Answer).doc.links?.prev as string | null;
        backward.unshift(...ids(last as Answer));
        for (let i = 0; prev && i < 100; i++) {
          const r = await admin.get(prev.replace(/^.*\/api\/v2/, ""));
          backward.unshift(...ids(r));
          prev = (r.doc.links?.prev as string | null) ?? null;
        }
        expect(backward, sort).toEqual(all);
      }
    });

    it("validates page parameters and documents the maximum", async () => {
      expectError(await admin.get("/agents", "page[limit]=1001"), 400, "page[limit]");
      expectError(await admin.get("/agents", "page[limit]=0"), 400, "page[limit]");
      expectError(await admin.get("/agents", "page[offset]=-1"), 400, "page[offset]");
      expectError(await admin.get("/agents", "page[after]=garbage"), 400, "page[after]");
      expectError(await admin.get("/agents", "page[size]=3"), 400, "page[size]");
      const r = await admin.get("/agents", "page[limit]=2&page[count]=true");
      const pageMeta = r.doc.meta?.page as { total: number; max_limit: number };
      expect(pageMeta.max_limit).toBe(1000);
      expect(pageMeta.total).toBeGreaterThanOrEqual(seeds.length);
    });

    it("a cursor issued for one sort is rejected for another", async () => {
      const r = await admin.get("/agents", { sort: "name", page: { limit: 2 } });
      const next = r.doc.links?.next as string;
      const after = new URL(next).searchParams.get("page[after]") as string;
      expectError(await admin.get("/agents", { sort: "-port", page: { after } }), 400, "page[after]");
    });
  });

  describe("include and sparse fieldsets", () => {
    it("include=gateway adds the related gateway to included, linked by kitsu-core", async () => {
      const r = await admin.get("/agents", { filter: { id: { eq: "agent-01" } }, include: "gateway" });
      expect(r.status).toBe(200);
      expect(r.doc.included?.map((i) => `${i.type}:${i.id}`)).toEqual(["gateway:gw-a"]);
      const d = des(r.doc).data as Record<string, unknown>[];
      const gw = d[0]?.gateway as { data: { component_id: string } };
      expect(gw.data.component_id).toBe("c-gw-a");
    });

    it("include on a detail read and nested include paths", async () => {
      const r = await admin.get("/gateways/gw-a", "include=agents.gateway");
      expect(r.status).toBe(200);
      const agents = (r.doc.data as { relationships: { agents: { data: { id: string }[] } } }).relationships
        .agents.data;
      expect(agents.map((a) => a.id).sort()).toEqual(expected((s) => s.gateway_id === "gw-a"));
      // the primary gateway is not repeated in included
      expect(r.doc.included?.some((i) => i.type === "gateway")).toBe(false);
      expectError(await admin.get("/agents", "include=nope"), 400, "include");
      expectError(await admin.get("/agents", "include=gateway.nope"), 400, "include");
    });

    it("fields[type] restricts attributes of primary and included resources", async () => {
      const r = await admin.get(
        "/agents",
        "filter[id][eq]=agent-02&include=gateway&fields[agent]=name,port,gateway&fields[gateway]=status",
      );
      expect(r.status).toBe(200);
      const a = (
        r.doc.data as { attributes: Record<string, unknown>; relationships: Record<string, unknown> }[]
      )[0];
      expect(Object.keys(a?.attributes ?? {}).sort()).toEqual(["name", "port"]);
      expect(Object.keys(a?.relationships ?? {})).toEqual(["gateway"]);
      expect(Object.keys(r.doc.included?.[0]?.attributes ?? {})).toEqual(["status"]);
      expectError(await admin.get("/agents", "fields[agent]=nope"), 400, "fields[agent]");
      expectError(await admin.get("/agents", "fields[nosuchtype]=a"), 400, "fields[nosuchtype]");
    });
  });

  describe("request documents", () => {
    it("rejects unknown attributes and relationships (additionalProperties false) with a pointer", async () => {
      const r = await admin.req("POST", "/agents", {
        data: { type: "agent", attributes: { uid: "x-1", bogus: 1 } },
      });
      const e = expectError(r, 400);
      expect(e.source?.pointer).toBe("/data/attributes/bogus");
      const r2 = await admin.req("POST", "/agents", {
        data: { type: "agent", attributes: { uid: "x-2" }, relationships: { nope: { data: null } } },
      });
      expect(expectError(r2, 400).source?.pointer).toBe("/data/relationships/nope");
      const r3 = await admin.req("POST", "/agents", {
        data: { type: "agent", attributes: { name: "no uid" } },
      });
      expect(expectError(r3, 400).source?.pointer).toBe("/data/attributes/uid");
      const r4 = await admin.req("POST", "/agents", {
        data: { type: "agent", attributes: { uid: "x-3", port: "80" } },
      });
      expect(expectError(r4, 400).source?.pointer).toBe("/data/attributes/port");
    });

    it("409 for a type or id that does not match the endpoint", async () => {
      expectError(
        await admin.req("POST", "/agents", { data: { type: "gateway", attributes: { uid: "x" } } }),
        409,
      );
      expectError(
        await admin.req("PATCH", "/agents/agent-01", {
          data: { type: "agent", id: "agent-02", attributes: {} },
        }),
        409,
      );
    });

    it("409 for a duplicate id; 400 for malformed JSON; update round-trips through kitsu-core", async () => {
      expectError(await admin.create("agent", "/agents", { uid: "agent-01" }), 409);
      expectError(await admin.req("POST", "/agents", "{not json"), 400);
      const r = await admin.patch("/agents/agent-01", "agent", { name: "renamed", port: 2222 }, "agent-01");
      expect(r.status, JSON.stringify(r.doc)).toBe(200);
      const d = des(r.doc).data as Record<string, unknown>;
      expect(d.name).toBe("renamed");
      expect(d.port).toBe(2222);
      const s = seeds.find((x) => x.uid === "agent-01") as Seed;
      s.name = "renamed";
      s.port = 2222;
    });
  });

  describe("authorization", () => {
    it("401 without credentials, 403 for a viewer mutation, 200 for viewer reads", async () => {
      expectError(await anon.get("/gateways"), 401);
      expect((await viewer.get("/gateways")).status).toBe(200);
      expectError(
        await viewer.req("POST", "/gateways", { data: { type: "gateway", id: "v-gw", attributes: {} } }),
        403,
      );
      expectError(await viewer.req("PATCH", "/gateways/gw-a/heartbeat"), 403);
    });
  });
});
