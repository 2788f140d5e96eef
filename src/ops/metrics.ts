/**
 * Self-metrics (issue 19, decision 0950): `GET /metrics` in the Prometheus text exposition
 * format and `GET /health/detail` with the same numbers as JSON, both for callers holding
 * `metrics.read` (admins by default; a Prometheus scrapes with a bearer token or an API key
 * of a user holding it). The in-process instruments live in `src/kernel/metrics.ts`; this
 * feature counts HTTP requests and, just before each scrape, reads the cluster-wide numbers
 * from the database: poll-job states and queue depth, scheduler lateness, the delivery log.
 * Those come from the shared database, so every replica reports the same values for them;
 * per-process numbers (requests, ingest, delivery attempts, connection pool) are per replica.
 */
import type { FastifyInstance } from "fastify";
import { DELIVERY_STATUSES } from "../alerting/notifications/delivery.ts";
import type { AppContext } from "../kernel/context.ts";
import { Metrics } from "../kernel/metrics.ts";
import { VERSION } from "../kernel/version.ts";
import { POLL_JOB_STATUSES, TERMINAL_STATUSES } from "../monitoring/poll-job-state.ts";
import { sql } from "../storage/sql.ts";

const DB_TIMEOUT_MS = 2000;
// The state lists are the state machines' own, so a new state is counted without an edit here.
const ACTIVE_JOB_STATES = POLL_JOB_STATUSES.filter((s) => !TERMINAL_STATUSES.has(s));
const FINISHED_JOB_STATES = [...TERMINAL_STATUSES];
/** Window of `netmon_poll_jobs_finished_recent`. */
const FINISHED_WINDOW_SECONDS = 300;

/** The gauges refreshed from the database before each scrape. */
interface DbGauges {
  up: ReturnType<Metrics["gauge"]>;
  ping: ReturnType<Metrics["gauge"]>;
  jobs: ReturnType<Metrics["gauge"]>;
  queue: ReturnType<Metrics["gauge"]>;
  finished: ReturnType<Metrics["gauge"]>;
  due: ReturnType<Metrics["gauge"]>;
  lateness: ReturnType<Metrics["gauge"]>;
  deliveries: ReturnType<Metrics["gauge"]>;
}

function registerGauges(ctx: AppContext, m: Metrics): DbGauges {
  // Connection use is read from the driver at scrape time (no database round trip).
  const waiting = m.gauge(
    "netmon_db_waiting",
    "Callers waiting for a database connection (PGlite: statements queued behind the running one)",
  );
  const max = m.gauge("netmon_db_connections_max", "Configured database connections (PGlite: 1)");
  m.gauge("netmon_db_connections", "Database connections by state (in_use, idle)", ["state"], function () {
    const s = ctx.db.stats();
    this.set({ state: "in_use" }, s.total - s.idle);
    this.set({ state: "idle" }, s.idle);
    waiting.set(s.waiting);
    max.set(s.max);
  });
  const backend = m.gauge("netmon_db_info", "Database backend in use (value 1)", ["backend"]);
  backend.set({ backend: ctx.db.kind }, 1);
  const info = m.gauge("netmon_build_info", "netmon version (value 1)", ["version"]);
  info.set({ version: VERSION }, 1);
  return {
    up: m.gauge("netmon_database_up", "1 when the database answered the scrape's queries"),
    ping: m.gauge("netmon_database_ping_seconds", "Round trip of SELECT 1 at scrape time"),
    jobs: m.gauge("netmon_poll_jobs", "Poll jobs not yet finished, by status", ["status"]),
    queue: m.gauge("netmon_poll_job_queue_depth", "Pending poll jobs claimable now (waiting for an agent)"),
    finished: m.gauge(
      "netmon_poll_jobs_finished_recent",
      `Poll jobs finished in the last ${FINISHED_WINDOW_SECONDS} s, by status`,
      ["status"],
    ),
    due: m.gauge("netmon_checks_due", "Enabled checks due now and not in flight (the scheduler's backlog)"),
    lateness: m.gauge(
      "netmon_scheduler_lateness_seconds",
      "How long the most overdue check has been due without a poll job (0 when none)",
    ),
    deliveries: m.gauge(
      "netmon_notification_deliveries",
      "Rows in the notification delivery log, by status",
      ["status"],
    ),
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

/** Read the database-derived numbers into the gauges. Never throws: a failure sets `up` to 0. */
async function refresh(ctx: AppContext, g: DbGauges): Promise<void> {
  const now = ctx.now();
  const since = new Date(now.getTime() - FINISHED_WINDOW_SECONDS * 1000);
  const t0 = performance.now();
  try {
    await withTimeout(ctx.db.ping(), DB_TIMEOUT_MS);
    g.ping.set((performance.now() - t0) / 1000);
    const [jobs, finished, checks, deliveries] = await withTimeout(
      Promise.all([
        ctx.db.many<{ status: string; n: number; claimable: number }>(sql`
          SELECT status, count(*)::int8 AS n,
                 count(*) FILTER (WHERE status = 'pending' AND available_at <= ${now})::int8 AS claimable
          FROM poll_jobs WHERE status IN ('pending', 'dispatching', 'running') GROUP BY status`),
        ctx.db.many<{ status: string; n: number }>(sql`
          SELECT status, count(*)::int8 AS n FROM poll_jobs
          WHERE completed_at IS NOT NULL AND completed_at > ${since} GROUP BY status`),
        ctx.db.one<{ due: number; lateness: number | string | null }>(sql`
          SELECT count(*)::int8 AS due,
                 EXTRACT(EPOCH FROM (${now}::timestamptz - min(next_run_at)))::float8 AS lateness
          FROM service_checks WHERE enabled AND inflight_job_id IS NULL AND next_run_at <= ${now}`),
        ctx.db.many<{ status: string; n: number }>(
          sql`SELECT status, count(*)::int8 AS n FROM notification_deliveries GROUP BY status`,
        ),
      ]),
      DB_TIMEOUT_MS,
    );
    setByStatus(g.jobs, ACTIVE_JOB_STATES, jobs);
    g.queue.set(jobs.reduce((sum, r) => sum + Number(r.claimable), 0));
    setByStatus(g.finished, FINISHED_JOB_STATES, finished);
    g.due.set(Number(checks?.due ?? 0));
    g.lateness.set(Math.max(0, Number(checks?.lateness ?? 0)));
    setByStatus(g.deliveries, DELIVERY_STATUSES, deliveries);
    g.up.set(1);
  } catch (err) {
    ctx.log.warn({ err }, "self-metrics: the database did not answer");
    g.up.set(0);
  }
}

function setByStatus(
  gauge: DbGauges["jobs"],
  known: readonly string[],
  rows: readonly { status: string; n: number }[],
): void {
  gauge.reset();
  for (const s of known) gauge.set({ status: s }, 0);
  for (const r of rows) gauge.set({ status: r.status }, Number(r.n));
}

const METRICS_ROUTE = { access: { permission: "metrics.read" }, rateLimit: "api_default" } as const;

/** Count every request and serve `/metrics` and `/health/detail`. */
export function metricsRoutes(app: FastifyInstance, ctx: AppContext): void {
  ctx.metrics ??= new Metrics();
  const metrics = ctx.metrics;
  const gauges = registerGauges(ctx, metrics);

  app.addHook("onResponse", async (request, reply) => {
    // The route pattern (`/api/devices/:uid`), never the raw URL: bounded label values.
    const route = request.routeOptions.url ?? "unmatched";
    metrics.observeRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
  });

  app.get("/metrics", { config: METRICS_ROUTE }, async (_request, reply) => {
    await refresh(ctx, gauges);
    const body = await metrics.exposition();
    return reply.type(metrics.contentType).send(body);
  });

  app.get("/health/detail", { config: METRICS_ROUTE }, async () => {
    await refresh(ctx, gauges);
    const all = await metrics.json();
    const out: Record<string, unknown> = Object.create(null);
    for (const m of all) {
      out[m.name] = {
        type: m.type,
        help: m.help,
        values: m.values.map((v) => ({
          ...(Object.keys(v.labels).length > 0 ? { labels: v.labels } : {}),
          ...("metricName" in v && v.metricName !== m.name ? { name: v.metricName } : {}),
          value: v.value,
        })),
      };
    }
    return {
      status: (await gauges.up.get()).values[0]?.value === 1 ? "ok" : "unavailable",
      version: VERSION,
      database: { backend: ctx.db.kind, stats: ctx.db.stats() },
      metrics: out,
    };
  });
}
