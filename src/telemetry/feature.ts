import fs from "node:fs";
import { promoteLogs } from "../alerting/event-rules.ts";
import { writeInternalLog } from "../alerting/internal-log.ts";
import type { AppContext } from "../kernel/context.ts";
import type { Feature } from "../kernel/feature.ts";
import { computeCapacityForecasts, type ExhaustionSignal, exhaustionSignals } from "./forecast.ts";
import { IngestGate } from "./ingest-gate.ts";
import { type JetStreamBuffer, type JetStreamOptions, startJetStream } from "./jetstream.ts";
import { type OtlpGrpcServer, startOtlpGrpc } from "./otlp/grpc.ts";
import { otlpHttpRoutes } from "./otlp/http.ts";
import { ensureTelemetryPartitions } from "./partitions.ts";
import { purgeExpiredTelemetry } from "./retention.ts";
import { rollupHourly } from "./rollup.ts";
import { directSink, type Intake, unavailableSink } from "./sink.ts";
import { startTrapReceiver, type TrapReceiver } from "./snmp-trap.ts";
import { type SyslogReceiver, type SyslogTlsOptions, startSyslogReceiver } from "./syslog/receiver.ts";

/** The non-HTTP receivers a running server started (tests flush and address them). */
export interface Receivers {
  syslog: SyslogReceiver | null;
  otlpGrpc: OtlpGrpcServer | null;
  snmpTrap: TrapReceiver | null;
}
const RECEIVERS = new WeakMap<AppContext, Receivers>();
const JETSTREAM = new WeakMap<AppContext, JetStreamBuffer>();
const JETSTREAM_RETRY_MS = 5_000;

/** The JetStream buffer of this context, when NATS_URL is set and it connected. */
export function jetstreamOf(ctx: AppContext): JetStreamBuffer | null {
  return JETSTREAM.get(ctx) ?? null;
}

/** The receivers started on this context (all null when off). */
export function receiversOf(ctx: AppContext): Receivers {
  return RECEIVERS.get(ctx) ?? { syslog: null, otlpGrpc: null, snmpTrap: null };
}

/** Advisory lock key of the hourly rollup job (one replica rolls up at a time). */
export const ROLLUP_LOCK_KEY = 0x6e65746d6f6e0300n;
/** Advisory lock key of the retention job (one replica purges at a time). */
export const RETENTION_LOCK_KEY = 0x6e65746d6f6e0301n;
/** Advisory lock key of the capacity-forecast job. */
export const FORECAST_LOCK_KEY = 0x6e65746d6f6e0302n;
/** Advisory lock key of the daily-partition job (decision 0320). */
export const PARTITIONS_LOCK_KEY = 0x6e65746d6f6e0303n;
const PARTITIONS_EVERY_MS = 60 * 60_000;
const FORECAST_EVERY_MS = 60 * 60_000;
/** The first forecasts come shortly after start (after a rollup pass), not an hour later. */
const FORECAST_FIRST_MS = 3 * 60_000;
const ROLLUP_EVERY_MS = 5 * 60_000;
const RETENTION_EVERY_MS = 60 * 60_000;
/** The first retention pass runs shortly after start, not an hour later. */
const RETENTION_FIRST_MS = 60_000;
/** Each pass recomputes the current and previous hour buckets (late rows land there). */
const ROLLUP_LOOKBACK_MS = 2 * 3_600_000;

/**
 * One forecast pass: compute, then emit each exhaustion signal as an internal log through the
 * event rules and stateful rules (so "disk full within 7 days" can alert; decision 0310).
 */
export async function runCapacityForecasts(ctx: AppContext): Promise<ExhaustionSignal[]> {
  const now = ctx.now();
  const n = await computeCapacityForecasts(ctx.db, now);
  const signals = await exhaustionSignals(ctx.db, now);
  for (const { kind, forecast: f } of signals) {
    const hours =
      f.projected_exhaustion_at === null
        ? null
        : Math.round((f.projected_exhaustion_at.getTime() - now.getTime()) / 360_000) / 10;
    const what =
      `${f.resource_type ?? "resource"} ${f.resource_label ?? ""} on ${f.resource_id ?? "?"}`.replace(
        /\s+/g,
        " ",
      );
    const log = await writeInternalLog(ctx, {
      source: "capacity",
      service_name: "netmon.capacity",
      severity_text: kind === "capacity.exhaustion_forecast" ? "WARN" : "INFO",
      body:
        kind === "capacity.exhaustion_forecast"
          ? `${what} projected to reach 100 % at ${f.projected_exhaustion_at?.toISOString()} (in ${hours} h, confidence ${f.confidence})`
          : `${what} no longer projected to reach 100 % within 7 days`,
      attributes: {
        event_type: kind,
        resource_key: f.resource_key,
        resource_type: f.resource_type,
        resource_id: f.resource_id,
        metric_name: f.metric_name,
        hours_to_exhaustion: hours,
        confidence: f.confidence,
        current_value: f.current_value,
      },
    });
    await promoteLogs(ctx, [log]);
  }
  ctx.log.debug({ forecasts: n, signals: signals.length }, "capacity forecasts computed");
  return signals;
}

/**
 * Telemetry: the ingest receivers (OTLP/HTTP routes here; OTLP/gRPC, syslog and SNMP traps
 * started with the feature) sharing one back-pressure gate, and the background work
 * (leader-only through advisory locks): daily partitions kept ahead, hourly rollups and retention.
 */
export function createTelemetryFeature(): Feature {
  const timers: NodeJS.Timeout[] = [];
  let intake: Intake | null = null;
  let buffer: JetStreamBuffer | null = null;
  let connecting: NodeJS.Timeout | null = null;
  let stopped = false;
  const receivers: Receivers = { syslog: null, otlpGrpc: null, snmpTrap: null };
  const gateFor = (ctx: AppContext): Intake => {
    intake ??= {
      gate: new IngestGate(ctx.config.ingest.maxPending),
      // With NATS_URL set nothing bypasses the buffer: until it connects, receivers answer 503.
      sink: ctx.config.ingest.jetstream
        ? unavailableSink("the JetStream telemetry buffer is not connected yet")
        : directSink(ctx),
    };
    return intake;
  };

  /** Connect the JetStream buffer, retrying every few seconds while NATS is unreachable. */
  function connectBuffer(ctx: AppContext, config: JetStreamOptions): void {
    startJetStream(ctx, config).then(
      async (b) => {
        if (stopped) return b.close();
        buffer = b;
        gateFor(ctx).sink = b.sink;
        JETSTREAM.set(ctx, b);
        ctx.log.info({ stream: config.stream }, "telemetry buffered through JetStream");
      },
      (err) => {
        if (stopped) return;
        ctx.log.error(
          { err, stream: config.stream },
          "JetStream buffer unavailable; telemetry receivers answer 503 until it connects",
        );
        connecting = setTimeout(() => connectBuffer(ctx, config), JETSTREAM_RETRY_MS);
        connecting.unref();
      },
    );
  }
  let running: Promise<void> | null = null;

  async function exclusive(ctx: AppContext, key: bigint, what: string, fn: () => Promise<void>) {
    const release = await ctx.db.tryAdvisoryLock(key);
    if (!release) return;
    try {
      await fn();
    } catch (err) {
      ctx.log.warn({ err }, `telemetry ${what} failed`);
    } finally {
      await release();
    }
  }

  const rollup = (ctx: AppContext) =>
    exclusive(ctx, ROLLUP_LOCK_KEY, "hourly rollup", async () => {
      const now = ctx.now();
      await rollupHourly(ctx.db, new Date(now.getTime() - ROLLUP_LOOKBACK_MS), now);
    });

  const retention = (ctx: AppContext) =>
    exclusive(ctx, RETENTION_LOCK_KEY, "retention", async () => {
      const purged = await purgeExpiredTelemetry(ctx.db, ctx.now(), ctx.config.retention);
      if (Object.keys(purged).length > 0) ctx.log.info({ purged }, "expired telemetry purged");
    });

  const partitions = (ctx: AppContext) =>
    exclusive(ctx, PARTITIONS_LOCK_KEY, "partition maintenance", async () => {
      const { created, moved, busy } = await ensureTelemetryPartitions(ctx.db, ctx.now());
      if (created.length > 0) ctx.log.info({ created }, "telemetry partitions created");
      if (busy.length > 0)
        ctx.log.info({ busy }, "telemetry tables busy; their partitions are created next pass");
      // Rows had arrived for a day no partition covered: the job was not running, or senders'
      // clocks are days ahead.
      if (Object.keys(moved).length > 0)
        ctx.log.warn({ moved }, "telemetry rows moved from the DEFAULT partition into new daily partitions");
    });

  const forecast = (ctx: AppContext) =>
    exclusive(ctx, FORECAST_LOCK_KEY, "capacity forecast", async () => {
      await runCapacityForecasts(ctx);
    });

  /** One job at a time: on PGlite they would only queue behind each other. */
  function run(job: () => Promise<void>): void {
    if (!running) running = job().finally(() => (running = null));
  }

  return {
    name: "telemetry",
    async routes(app, ctx) {
      await otlpHttpRoutes(app, ctx, gateFor(ctx));
    },
    async start(ctx) {
      const { host, syslogPort, otlpGrpcPort, snmpTrapPort, jetstream } = ctx.config.ingest;
      RECEIVERS.set(ctx, receivers);
      stopped = false;
      if (jetstream) {
        registerBufferMetrics(ctx, () => buffer);
        connectBuffer(ctx, jetstream);
      }
      // A receiver that cannot listen (port taken, no permission) is logged as an error and
      // stays off; the API and the other receivers keep running (and /v1/* still ingests).
      const tryStart = async <T>(what: string, port: number, fn: () => Promise<T>): Promise<T | null> => {
        try {
          return await fn();
        } catch (err) {
          ctx.log.error({ err, host, port }, `${what} receiver could not start; it stays off`);
          return null;
        }
      };
      if (otlpGrpcPort > 0)
        receivers.otlpGrpc = await tryStart("OTLP/gRPC", otlpGrpcPort, () =>
          startOtlpGrpc(ctx, gateFor(ctx), host, otlpGrpcPort),
        );
      if (snmpTrapPort > 0) {
        receivers.snmpTrap = startTrapReceiver(ctx, gateFor(ctx), {
          host,
          port: snmpTrapPort,
          communities: ctx.config.ingest.snmpTrapCommunities,
          users: ctx.config.ingest.snmpTrapUsers,
        });
      }
      if (syslogPort > 0) {
        let tlsOptions: SyslogTlsOptions | undefined;
        try {
          tlsOptions = syslogTlsOptions(ctx);
        } catch (err) {
          // Plain UDP/TCP syslog still starts; the TLS listener stays off and says why.
          ctx.log.error({ err }, "syslog TLS listener could not be configured; it stays off");
        }
        receivers.syslog = await tryStart("syslog", syslogPort, () =>
          startSyslogReceiver(ctx, gateFor(ctx), host, syslogPort, tlsOptions),
        );
      }
      // Before any other job: nothing else runs yet, so this pass is never skipped.
      run(() => partitions(ctx));
      timers.push(setInterval(() => run(() => partitions(ctx)), PARTITIONS_EVERY_MS));
      timers.push(setInterval(() => run(() => rollup(ctx)), ROLLUP_EVERY_MS));
      timers.push(setInterval(() => run(() => retention(ctx)), RETENTION_EVERY_MS));
      timers.push(setTimeout(() => run(() => retention(ctx)), RETENTION_FIRST_MS));
      timers.push(setInterval(() => run(() => forecast(ctx)), FORECAST_EVERY_MS));
      timers.push(setTimeout(() => run(() => forecast(ctx)), FORECAST_FIRST_MS));
      for (const t of timers) t.unref();
    },
    async stop() {
      stopped = true;
      if (connecting) clearTimeout(connecting);
      await receivers.otlpGrpc?.close().catch(() => undefined);
      receivers.otlpGrpc = null;
      await receivers.snmpTrap?.close().catch(() => undefined);
      receivers.snmpTrap = null;
      await receivers.syslog?.close().catch(() => undefined);
      receivers.syslog = null;
      for (const t of timers) clearTimeout(t);
      timers.length = 0;
      // After the receivers: what they accepted was published before they closed.
      await buffer?.close().catch(() => undefined);
      buffer = null;
      await running;
    },
  };
}

/**
 * Self-metrics of the JetStream buffer (decision 0311), so a stalled writer or dead letters
 * show on a dashboard: whether it is connected, what the writer did since start, and the
 * backlog (units published and not yet acked; read from the consumer, refreshed per scrape).
 */
function registerBufferMetrics(ctx: AppContext, current: () => JetStreamBuffer | null): void {
  const m = ctx.metrics;
  if (!m) return;
  let backlog = 0;
  m.gauge(
    "netmon_jetstream_connected",
    "The JetStream telemetry buffer is connected (1) or not (0)",
    [],
    function () {
      this.set(current() ? 1 : 0);
    },
  );
  m.gauge(
    "netmon_jetstream_writer_units",
    "Units the JetStream writer of this process handled since start, by outcome (stored, duplicate, retried, dead_lettered)",
    ["outcome"],
    function () {
      const s = current()?.stats;
      if (!s) return;
      this.set({ outcome: "stored" }, s.stored);
      this.set({ outcome: "duplicate" }, s.duplicates);
      this.set({ outcome: "retried" }, s.retried);
      this.set({ outcome: "dead_lettered" }, s.deadLettered);
    },
  );
  m.gauge(
    "netmon_jetstream_backlog",
    "Telemetry units waiting in the stream or being written (as of the previous scrape)",
    [],
    function () {
      this.set(backlog);
      current()
        ?.pending()
        .then((n) => {
          backlog = n;
        })
        .catch(() => undefined);
    },
  );
}

/**
 * The syslog TLS listener's options, or undefined when it is off. Misconfiguration (a port
 * without readable PEM files) throws, so the receiver's start fails loudly in the log.
 */
function syslogTlsOptions(ctx: AppContext): SyslogTlsOptions | undefined {
  const { port, certFile, keyFile } = ctx.config.ingest.syslogTls;
  if (port === 0) return undefined;
  if (!certFile || !keyFile) {
    throw new Error(
      "NETMON_SYSLOG_TLS_PORT is set but NETMON_SYSLOG_TLS_CERT_FILE or NETMON_SYSLOG_TLS_KEY_FILE is not",
    );
  }
  return { port, cert: fs.readFileSync(certFile, "utf8"), key: fs.readFileSync(keyFile, "utf8") };
}
