// The "bare" ceiling for bench/inventory/reads.ts: node:http + pg, no framework, running the SQL
// netmon ran for the same request (captured by reads.ts and passed in READS_SQL) and writing the
// same document. Static per-route shapes a hand-written server would hard-code (attribute order
// of the JSON:API device, the SRQL viz block) come in READS_SHAPES. Not part of netmon.
import { createHash, createHmac } from "node:crypto";
import http from "node:http";
import pg from "pg";

pg.types.setTypeParser(20, (v) => Number(v)); // int8 → number, as netmon's storage does
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.POOL ?? 10) });
const SQL = JSON.parse(process.env.READS_SQL ?? "{}") as Record<"list" | "search" | "srql" | "v2", string> & {
  srqlProbe?: string;
};
const SHAPES = JSON.parse(process.env.READS_SHAPES ?? "{}") as { v2Attributes: string[]; srqlViz: unknown };
const secret = Buffer.from(process.env.READS_SECRET_KEY ?? "", "base64");
const srqlKey = createHmac("sha256", secret).update("netmon-srql-cursor-v1").digest();
const v2Key = createHmac("sha256", secret).update("netmon-jsonapi-cursor-v1").digest();

type R = Record<string, unknown>;
const iso = (d: unknown) => (d instanceof Date ? d.toISOString() : null);

function deviceJson(d: R): R {
  return {
    uid: d.uid,
    partition: d.partition,
    type_id: d.type_id,
    type: d.type,
    name: d.name,
    hostname: d.hostname,
    ip: d.ip,
    mac: d.mac,
    uid_alt: d.uid_alt,
    vendor_name: d.vendor_name,
    model: d.model,
    domain: d.domain,
    zone: d.zone,
    subnet_uid: d.subnet_uid,
    vlan_uid: d.vlan_uid,
    region: d.region,
    first_seen: iso(d.first_seen_time),
    last_seen: iso(d.last_seen_time),
    first_seen_time: iso(d.first_seen_time),
    last_seen_time: iso(d.last_seen_time),
    created_time: iso(d.created_time),
    modified_time: iso(d.modified_time),
    risk_level_id: d.risk_level_id,
    risk_level: d.risk_level,
    risk_score: d.risk_score,
    is_managed: d.is_managed,
    is_compliant: d.is_compliant,
    is_trusted: d.is_trusted,
    is_available: d.is_available,
    availability_changed_at: d.availability_changed_at ?? null,
    availability_reason: d.availability_reason ?? null,
    os: d.os,
    hw_info: d.hw_info,
    network_interfaces: d.network_interfaces,
    owner: d.owner,
    org: d.org,
    groups: d.groups,
    agent_list: d.agent_list,
    gateway_id: d.gateway_id,
    agent_id: d.agent_id,
    discovery_sources: d.discovery_sources,
    metadata: d.metadata,
    deleted_at: iso(d.deleted_at),
  };
}

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

function send(res: http.ServerResponse, status: number, type: string, body: string) {
  res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
  res.end(body);
}

async function list(url: URL): Promise<string> {
  const limit = Number(url.searchParams.get("limit") ?? 100);
  const offset = Number(url.searchParams.get("offset") ?? 0);
  const search = url.searchParams.get("search")?.trim();
  const { rows } = search
    ? await pool.query(SQL.search, [`%${escapeLike(search.toLowerCase())}%`, limit, offset])
    : await pool.query(SQL.list, [limit, offset]);
  return JSON.stringify({
    data: rows.map(deviceJson),
    pagination: { limit, offset, next_offset: rows.length >= limit ? offset + limit : null },
  });
}

async function srql(body: string): Promise<string> {
  const { query } = JSON.parse(body) as { query: string };
  const m = /^in:devices hostname:(\S+) limit:(\d+)$/.exec(query.trim());
  if (!m) throw new Error("unsupported query");
  const limit = Number(m[2]);
  // netmon counts the substring's matches first (at most 2,001) and picks the plan from that.
  if (SQL.srqlProbe) await pool.query(SQL.srqlProbe, [m[1], 2001]);
  const { rows } = await pool.query(SQL.srql, [m[1], limit + 1]);
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  const digest = createHash("sha256").update(query.trim()).digest("base64url").slice(0, 22);
  const last = page[page.length - 1];
  let next: string | null = null;
  if (more && last) {
    const b = Buffer.from(JSON.stringify({ v: 1, q: digest, k: [last.__k0, last.__k1], d: "next" })).toString(
      "base64url",
    );
    next = `${b}.${createHmac("sha256", srqlKey).update(b).digest("base64url")}`;
  }
  const results = page.map((r) => {
    const { __k0, __k1, ...rest } = r;
    return rest;
  });
  return JSON.stringify({
    results,
    pagination: { next_cursor: next, prev_cursor: null, limit },
    viz: SHAPES.srqlViz,
    error: null,
  });
}

async function v2(url: URL, host: string): Promise<string> {
  const limit = Number(url.searchParams.get("page[limit]") ?? 50);
  const { rows } = await pool.query(SQL.v2, [limit + 1]);
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  const base = `http://${host}/api/v2`;
  const scope = `/devices?${JSON.stringify([])}`; // the engine binds cursors to its path and filters
  const cursor = (r: R) => {
    const b = Buffer.from(JSON.stringify({ s: "seq,uid", v: [r._k0, r._k1] })).toString("base64url");
    return `${b}.${createHmac("sha256", v2Key).update(scope).update("\n").update(b).digest("base64url")}`;
  };
  const data = page.map((r) => {
    const attributes: R = {};
    for (const a of SHAPES.v2Attributes) {
      const v = r[a];
      attributes[a] = v instanceof Date ? v.toISOString() : (v ?? null);
    }
    return {
      type: "device",
      id: r.uid,
      attributes,
      relationships: {
        group: { data: r.group_id ? { type: "group", id: r.group_id } : null },
        interfaces: { meta: { included: false } },
      },
      links: { self: `${base}/devices/${encodeURIComponent(String(r.uid))}` },
      meta: { cursor: cursor(r) },
    };
  });
  const first = page[0];
  const last = page[page.length - 1];
  const self = `${base}/devices?page[limit]=${limit}`;
  return JSON.stringify({
    data,
    links: {
      self,
      first: self,
      next: more && last ? `${self}&page[after]=${cursor(last)}` : null,
      prev: null,
    },
    meta: {
      page: {
        limit,
        style: "keyset",
        max_limit: 5000,
        first_cursor: first ? cursor(first) : null,
        last_cursor: last ? cursor(last) : null,
      },
    },
    jsonapi: { version: "1.1" },
  });
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", async () => {
    try {
      const url = new URL(req.url ?? "/", "http://x");
      if (req.method === "GET" && url.pathname === "/api/devices") {
        send(res, 200, "application/json; charset=utf-8", await list(url));
      } else if (req.method === "POST" && url.pathname === "/api/query") {
        send(res, 200, "application/json; charset=utf-8", await srql(Buffer.concat(chunks).toString("utf8")));
      } else if (req.method === "GET" && url.pathname === "/api/v2/devices") {
        send(res, 200, "application/vnd.api+json", await v2(url, req.headers.host ?? "localhost"));
      } else send(res, 404, "text/plain", "not found");
    } catch (err) {
      send(res, 500, "text/plain", String(err));
    }
  });
});
server.listen(0, "127.0.0.1", () => {
  const a = server.address();
  console.log(`baseline at http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`);
});
// A normal exit on a signal (so --cpu-prof writes its profile).
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => process.exit(0));
