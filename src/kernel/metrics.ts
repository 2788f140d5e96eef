/**
 * netmon's own metrics (issue 19): one prom-client registry per server, holding the
 * in-process instruments domains increment (`ctx.metrics?.…`) and the process metrics
 * prom-client collects itself. Gauges read from the database (poll-job states, scheduler
 * lateness, delivery log) are refreshed by `src/ops/metrics.ts` just before a scrape, so the
 * numbers come from one place whether they are scraped (`GET /metrics`) or read as JSON
 * (`GET /health/detail`). Kernel code: no domain knowledge, only the instrument names.
 *
 * A registry per server rather than prom-client's global one: tests run several servers in
 * one process, and each must count only its own requests.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** Latency buckets in seconds: 5 ms to 10 s (long polls answer in up to 30 s and land in +Inf). */
export const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

type HttpLabels = "method" | "route" | "status_class";

let processReg: Registry | undefined;

/**
 * Process metrics (CPU, memory, event-loop lag, GC) belong to the process, not a server:
 * collected once into one registry shared by every server of the process (tests start many;
 * each collector adds observers that are never removed).
 */
function processRegistry(): Registry {
  if (!processReg) {
    processReg = new Registry();
    collectDefaultMetrics({ register: processReg });
  }
  return processReg;
}

export interface MetricsOptions {
  /** Collect process metrics (CPU, memory, event-loop lag, GC). Default true. */
  processMetrics?: boolean;
}

export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<HttpLabels>;
  readonly httpDuration: Histogram<HttpLabels>;
  /** Device sightings written, by source (api, import, source_inventory) and outcome. */
  readonly sightings: Counter<"source" | "outcome">;
  /** Notification delivery attempts finished by this process, by provider and outcome. */
  readonly deliveries: Counter<"provider" | "outcome">;
  readonly #processMetrics: boolean;

  constructor(opts: MetricsOptions = {}) {
    const registers = [this.registry];
    this.httpRequests = new Counter({
      name: "netmon_http_requests_total",
      help: "HTTP requests answered, by route pattern and status class",
      labelNames: ["method", "route", "status_class"],
      registers,
    });
    this.httpDuration = new Histogram({
      name: "netmon_http_request_duration_seconds",
      help: "HTTP request latency, by route pattern and status class",
      labelNames: ["method", "route", "status_class"],
      buckets: HTTP_BUCKETS,
      registers,
    });
    this.sightings = new Counter({
      name: "netmon_ingest_sightings_total",
      help: "Device sightings ingested, by source and outcome (created, updated)",
      labelNames: ["source", "outcome"],
      registers,
    });
    this.deliveries = new Counter({
      name: "netmon_notification_delivery_attempts_total",
      help: "Notification delivery attempts finished by this process, by provider and outcome",
      labelNames: ["provider", "outcome"],
      registers,
    });
    this.#processMetrics = opts.processMetrics !== false;
  }

  /** This server's metrics plus the process metrics, as one registry (built per read). */
  #combined(): Registry {
    return this.#processMetrics ? Registry.merge([processRegistry(), this.registry]) : this.registry;
  }

  /** The Prometheus text exposition of every metric. */
  exposition(): Promise<string> {
    return this.#combined().metrics();
  }

  /** Content type of `exposition()`. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** Every metric as prom-client's JSON (for /health/detail). */
  json(): ReturnType<Registry["getMetricsAsJSON"]> {
    return this.#combined().getMetricsAsJSON();
  }

  /** Record one answered HTTP request. `route` is the route pattern, never the raw URL. */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status_class: `${Math.floor(status / 100)}xx` };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
  }

  /**
   * A gauge on this registry (for collectors outside the kernel). `collect` runs on every
   * read of the registry, to set the gauge from a value kept elsewhere.
   */
  gauge<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[] = [],
    collect?: (this: Gauge<L>) => void,
  ): Gauge<L> {
    return new Gauge({ name, help, labelNames, registers: [this.registry], ...(collect ? { collect } : {}) });
  }
}
