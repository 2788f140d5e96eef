import fs from "node:fs";
import parsePrometheusTextFormat, { type ParsedFamily } from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, createRoleProfile, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * Self-metrics (issue 19): `GET /metrics` scraped over real HTTP and read back with a real
 * Prometheus text-format parser; counters must move after requests.
 */
let server: TestServer;
let admin: string;

beforeAll(async () => {
  server = await startTestServer();
  admin = await tokenFor(server, "admin");
});
afterAll(async () => {
  await server?.stop();
});

async function scrape(headers: Record<string, string> = authHeaders(admin)): Promise<ParsedFamily[]> {
  const res = await server.fetch("/metrics", { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheusTextFormat(await res.text());
}

function family(all: ParsedFamily[], name: string): ParsedFamily {
  const f = all.find((m) => m.name === name);
  if (!f) throw new Error(`metric ${name} not exposed`);
  return f;
}

function sample(all: ParsedFamily[], name: string, labels: Record<string, string> = {}): number {
  const f = family(all, name);
  const s = f.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return s ? Number(s.value) : 0;
}

interface DetailValue {
  labels?: Record<string, string>;
  name?: string;
  value: number;
}
interface Detail {
  status: string;
  database: { backend: string };
  metrics: Record<string, { type: string; values: DetailValue[] }>;
}

async function detail(): Promise<Detail> {
  const res = await server.fetch("/health/detail", { headers: authHeaders(admin) });
  expect(res.status).toBe(200);
  return (await res.json()) as Detail;
}

/**
 * A histogram's `_count` for one label set, read from /health/detail (prom-client's own JSON):
 * parse-prometheus-text-format merges labelled histogram series into one, so it cannot.
 */
function histogramCount(d: Detail, name: string, labels: Record<string, string>): number {
  const v = d.metrics[name]?.values.find(
    (x) => x.name === `${name}_count` && Object.entries(labels).every(([k, l]) => x.labels?.[k] === l),
  );
  return v?.value ?? 0;
}

describe("GET /metrics", () => {
  it("needs metrics.read: 401 anonymous, 403 for a viewer, 200 for an admin", async () => {
    expect((await server.fetch("/metrics")).status).toBe(401);
    const viewer = await tokenFor(server, "viewer");
    const denied = await server.fetch("/metrics", { headers: authHeaders(viewer) });
    expect(denied.status).toBe(403);
    expect(await denied.json()).toMatchObject({ error: "forbidden" });
    await scrape();
  });

  it("a user whose profile grants metrics.read scrapes with an API key (a Prometheus service account)", async () => {
    const profile = await createRoleProfile(server, { baseRole: "viewer", grant: ["metrics.read"] });
    const scraper = await createUser(server, { role: "viewer", roleProfileId: profile.id });
    const created = await server.fetch("/api/admin/api-keys", {
      method: "POST",
      headers: { ...authHeaders(admin), "content-type": "application/json" },
      body: JSON.stringify({ name: "prometheus", user_id: scraper.id }),
    });
    expect(created.status).toBe(201);
    const { key } = (await created.json()) as { key: string };
    await scrape({ "x-api-key": key });
  });

  it("counts requests by route pattern and status class, with a latency histogram", async () => {
    const before = await scrape();
    const route = { method: "GET", route: "/api/devices/:uid", status_class: "4xx" };
    const n0 = sample(before, "netmon_http_requests_total", route);
    const h0 = histogramCount(await detail(), "netmon_http_request_duration_seconds", route);
    for (let i = 0; i < 3; i++) {
      const res = await server.fetch(`/api/devices/sr:no-such-${i}`, { headers: authHeaders(admin) });
      expect(res.status).toBe(404);
    }
    await server.fetch("/no/such/route");
    const after = await scrape();
    expect(sample(after, "netmon_http_requests_total", route)).toBe(n0 + 3);
    expect(histogramCount(await detail(), "netmon_http_request_duration_seconds", route)).toBe(h0 + 3);
    expect(family(after, "netmon_http_request_duration_seconds").type).toBe("HISTOGRAM");
    // Raw URLs never become label values (bounded cardinality).
    const routes = family(after, "netmon_http_requests_total").metrics.map((m) => m.labels?.route);
    expect(routes.some((r) => r?.includes("no-such"))).toBe(false);
    expect(routes).toContain("unmatched");
    // Routes registered before the metrics feature (access's own) are counted too.
    await server.fetch("/api/v1/me", { headers: authHeaders(admin) });
    expect(
      sample(await scrape(), "netmon_http_requests_total", { route: "/api/v1/me", status_class: "2xx" }),
    ).toBeGreaterThan(0);
  });

  it("counts ingested sightings", async () => {
    const before = sample(await scrape(), "netmon_ingest_sightings_total", { outcome: "created" });
    const res = await server.fetch("/api/v1/device-updates", {
      method: "POST",
      headers: { ...authHeaders(admin), "content-type": "application/json" },
      body: JSON.stringify({
        updates: [
          { ip: "192.0.2.61", hostname: "m1", source: "manual" },
          { ip: "192.0.2.62", hostname: "m2", source: "manual" },
        ],
      }),
    });
    expect(res.status).toBe(200);
    expect(sample(await scrape(), "netmon_ingest_sightings_total", { outcome: "created" })).toBe(before + 2);
  });

  it("reports poll-job states and queue depth, scheduler lateness, the delivery log and the database", async () => {
    const sched = await server.db.one<{ id: string }>(
      `INSERT INTO polling_schedules (name, interval_seconds) VALUES ('metrics-test', 60) RETURNING id`,
    );
    await server.db.query(
      `INSERT INTO poll_jobs (schedule_id, schedule_name, status, available_at) VALUES
         ($1, 'metrics-test', 'pending', now() - interval '1 minute'),
         ($1, 'metrics-test', 'pending', now() - interval '1 minute'),
         ($1, 'metrics-test', 'running', now())`,
      [sched?.id],
    );
    const m = await scrape();
    expect(sample(m, "netmon_poll_jobs", { status: "pending" })).toBeGreaterThanOrEqual(2);
    expect(sample(m, "netmon_poll_jobs", { status: "running" })).toBeGreaterThanOrEqual(1);
    expect(sample(m, "netmon_poll_job_queue_depth")).toBeGreaterThanOrEqual(2);
    expect(family(m, "netmon_poll_jobs_finished_recent").metrics.length).toBe(4);
    expect(sample(m, "netmon_scheduler_lateness_seconds")).toBeGreaterThanOrEqual(0);
    expect(family(m, "netmon_checks_due").type).toBe("GAUGE");
    expect(family(m, "netmon_notification_deliveries").metrics.map((s) => s.labels?.status)).toContain(
      "sent",
    );
    expect(family(m, "netmon_notification_delivery_attempts_total").type).toBe("COUNTER");
    expect(sample(m, "netmon_database_up")).toBe(1);
    expect(sample(m, "netmon_db_connections_max")).toBeGreaterThanOrEqual(1);
    expect(sample(m, "netmon_db_info", { backend: server.db.kind })).toBe(1);
    expect(family(m, "netmon_db_waiting").type).toBe("GAUGE");
    // Process metrics from prom-client.
    expect(sample(m, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(family(m, "nodejs_eventloop_lag_seconds").type).toBe("GAUGE");
  });
});

describe("GET /health/detail", () => {
  it("gives admins the same numbers as JSON; others get 401/403; /health stays public", async () => {
    expect((await server.fetch("/health/detail")).status).toBe(401);
    const viewer = await tokenFor(server, "viewer");
    expect((await server.fetch("/health/detail", { headers: authHeaders(viewer) })).status).toBe(403);
    const body = await detail();
    expect(body.status).toBe("ok");
    expect(body.database.backend).toBe(server.db.kind);
    expect(body.metrics.netmon_database_up?.values[0]?.value).toBe(1);
    expect(body.metrics.netmon_http_requests_total?.type).toBe("counter");
    expect(body.metrics.netmon_poll_jobs?.values.map((v) => v.labels?.status).sort()).toEqual([
      "dispatching",
      "pending",
      "running",
    ]);
    expect((await server.fetch("/health")).status).toBe(200);
  });
});

describe("examples/grafana/netmon-dashboard.json", () => {
  it("only charts metrics /metrics exposes", async () => {
    const dash = JSON.parse(fs.readFileSync("examples/grafana/netmon-dashboard.json", "utf8")) as {
      panels: { targets: { expr: string }[] }[];
    };
    const exposed = new Set((await scrape()).map((f) => f.name));
    const used = new Set<string>();
    for (const p of dash.panels)
      for (const t of p.targets)
        for (const m of t.expr.matchAll(/\b((?:netmon|process|nodejs)_[a-z0-9_]+)/g))
          used.add((m[1] as string).replace(/_(bucket|count|sum)$/, ""));
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((n) => !exposed.has(n))).toEqual([]);
  });
});
