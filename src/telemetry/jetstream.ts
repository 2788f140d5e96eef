import {
  AckPolicy,
  type ConsumerMessages,
  DiscardPolicy,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { connect, type NatsConnection, nanos } from "@nats-io/transport-node";
import { writeInternalLog } from "../alerting/internal-log.ts";
import type { AppContext } from "../kernel/context.ts";
import { AppError } from "../kernel/errors.ts";
import type { Queryable } from "../storage/db.ts";
import { isConnectionLoss, isDiskFull } from "../storage/db-error.ts";
import { sql } from "../storage/sql.ts";
import { storageUnavailable } from "./ingest-gate.ts";
import type { TelemetrySink } from "./sink.ts";
import { decodeUnit, encodeUnit, type IngestUnit, storeUnit } from "./units.ts";

/**
 * The JetStream buffer (decision 0311). With NATS_URL set, receivers publish each accepted unit
 * to the stream `<stream>` (subjects `<stream>.<kind>`) and answer their sender once JetStream
 * acknowledged the publish — the unit is then on disk in the NATS server. Writer workers in every
 * replica share one durable pull consumer and store units in the database, acking only after
 * the commit. A redelivered unit (the writer died between commit and ack) is recognised by its
 * stream sequence, claimed in the same transaction as the write, so it is never stored twice.
 *
 * The database being away (restart, disk full) pauses the writers; the stream absorbs the
 * backlog up to its byte limit, after which publishes fail and receivers answer 503 — back
 * pressure, never a silent drop. A unit that fails for any other reason MAX_ATTEMPTS times is
 * moved to the dead-letter stream `<stream>_DLQ` and an error log says so.
 */
export interface JetStreamOptions {
  url: string;
  stream: string;
  maxBytes: number;
  maxAgeDays: number;
}

export interface JetStreamWriterStats {
  stored: number;
  duplicates: number;
  retried: number;
  deadLettered: number;
}

export interface JetStreamBuffer {
  sink: TelemetrySink;
  stats: JetStreamWriterStats;
  /** Units published but not yet acknowledged by the writers (from the consumer's info). */
  pending(): Promise<number>;
  close(): Promise<void>;
}

const CONSUMER = "netmon-writer";
/** Attempts before a unit that keeps failing (not for an outage) goes to the dead-letter stream. */
export const MAX_ATTEMPTS = 5;
const ACK_WAIT_SECONDS = 30;
const DLQ_MAX_AGE_DAYS = 30;

function subjectOf(stream: string, unit: IngestUnit): string {
  return `${stream}.${unit.kind}`;
}

/** Database errors that mean "not now" rather than "not this unit": wait, never dead-letter. */
function isOutage(err: unknown): boolean {
  if (isConnectionLoss(err) || isDiskFull(err)) return true;
  return err instanceof AppError && err.status === 503;
}

async function ensureStreams(jsm: JetStreamManager, opts: JetStreamOptions): Promise<string> {
  const config = {
    name: opts.stream,
    subjects: [`${opts.stream}.>`],
    // Work-queue retention: a unit leaves the stream when a writer acked it.
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    max_bytes: opts.maxBytes,
    max_age: nanos(opts.maxAgeDays * 86_400_000),
    // Full means refuse new units (senders are told to retry), not discard stored ones.
    discard: DiscardPolicy.New,
  };
  let info: Awaited<ReturnType<JetStreamManager["streams"]["info"]>>;
  try {
    info = await jsm.streams.info(opts.stream);
    info = await jsm.streams.update(opts.stream, {
      max_bytes: config.max_bytes,
      max_age: config.max_age,
      discard: config.discard,
    });
  } catch {
    info = await jsm.streams.add(config);
  }
  const dlq = `${opts.stream}_DLQ`;
  try {
    await jsm.streams.info(dlq);
  } catch {
    await jsm.streams.add({
      name: dlq,
      subjects: [`${dlq}.>`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      max_age: nanos(DLQ_MAX_AGE_DAYS * 86_400_000),
    });
  }
  try {
    await jsm.consumers.info(opts.stream, CONSUMER);
  } catch {
    await jsm.consumers.add(opts.stream, {
      durable_name: CONSUMER,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(ACK_WAIT_SECONDS * 1000),
      max_ack_pending: 1024,
    });
  }
  // A recreated stream restarts its sequences at 1; the creation time keeps old claims apart.
  return `${opts.stream}@${info.created}`;
}

/**
 * The redelivery check: claims stream sequence `seq` inside the writer's transaction; false
 * when it was claimed before (the unit is stored already and only the ack was lost).
 */
export function claimSequence(streamKey: string, seq: number) {
  return async (tx: Queryable): Promise<boolean> => {
    const r = await tx.one<{ seq: string }>(sql`
      INSERT INTO telemetry_stream_claims (stream_key, seq) VALUES (${streamKey}, ${seq})
      ON CONFLICT DO NOTHING RETURNING seq::text AS seq`);
    // No row back: the sequence was claimed before.
    return r !== undefined;
  };
}

export async function startJetStream(ctx: AppContext, opts: JetStreamOptions): Promise<JetStreamBuffer> {
  const nc: NatsConnection = await connect({
    servers: opts.url,
    name: "netmon",
    maxReconnectAttempts: -1,
  });
  const jsm = await jetstreamManager(nc);
  const streamKey = await ensureStreams(jsm, opts);
  const js = jetstream(nc);
  const stats: JetStreamWriterStats = { stored: 0, duplicates: 0, retried: 0, deadLettered: 0 };
  let closed = false;
  let messages: ConsumerMessages | null = null;
  let lastOutageLog = 0;

  const claim = (seq: number) => claimSequence(streamKey, seq);

  async function deadLetter(m: JsMsg, reason: string): Promise<void> {
    await js.publish(`${opts.stream}_DLQ.${m.subject.slice(opts.stream.length + 1)}`, m.data, {
      headers: undefined,
    });
    m.term(reason);
    stats.deadLettered++;
    try {
      await writeInternalLog(ctx, {
        source: "ingest",
        service_name: "netmon.ingest",
        severity_text: "ERROR",
        body: `telemetry unit moved to the dead-letter stream ${opts.stream}_DLQ after ${m.info.deliveryCount} attempts: ${reason}`,
        attributes: {
          event_type: "ingest.dead_lettered",
          stream: opts.stream,
          stream_sequence: m.info.streamSequence,
          subject: m.subject,
          reason,
        },
      });
    } catch (err) {
      ctx.log.error({ err, reason }, "telemetry unit dead-lettered (and the error log could not be written)");
    }
  }

  async function handle(m: JsMsg): Promise<void> {
    let unit: IngestUnit;
    try {
      unit = decodeUnit(m.data);
    } catch (err) {
      await deadLetter(m, `undecodable: ${(err as Error).message}`);
      return;
    }
    try {
      const r = await storeUnit(ctx, unit, claim(m.info.streamSequence));
      if (r.stored) stats.stored++;
      else stats.duplicates++;
      m.ack();
    } catch (err) {
      stats.retried++;
      if (isOutage(err)) {
        if (Date.now() - lastOutageLog > 10_000) {
          lastOutageLog = Date.now();
          ctx.log.warn({ err }, "telemetry writer: database unavailable; units stay queued in JetStream");
        }
        m.nak(2000);
        // Don't spin through the backlog while the database is away.
        await new Promise((r) => setTimeout(r, 1000));
        return;
      }
      if (m.info.deliveryCount >= MAX_ATTEMPTS) {
        await deadLetter(m, (err as Error).message ?? String(err));
        return;
      }
      ctx.log.warn({ err, attempt: m.info.deliveryCount }, "telemetry writer: unit failed; will retry");
      m.nak(1000 * m.info.deliveryCount);
    }
  }

  // A claim can only matter while its unit could still be redelivered: within the stream's
  // maximum age. Older claims are deleted in bounded batches (any replica may; it is idempotent).
  const prune = setInterval(() => {
    const cutoff = new Date(ctx.now().getTime() - (opts.maxAgeDays + 1) * 86_400_000);
    ctx.db
      .query(sql`
        DELETE FROM telemetry_stream_claims WHERE ctid IN (
          SELECT ctid FROM telemetry_stream_claims WHERE claimed_at < ${cutoff} LIMIT 10000)`)
      .catch((err) => ctx.log.warn({ err }, "telemetry stream claims could not be pruned"));
  }, 3_600_000);
  prune.unref();

  const consumer = await js.consumers.get(opts.stream, CONSUMER);
  const loop = (async () => {
    while (!closed) {
      try {
        messages = await consumer.consume({ max_messages: 16 });
        for await (const m of messages) {
          await handle(m);
          if (closed) break;
        }
      } catch (err) {
        if (closed) break;
        ctx.log.warn({ err }, "telemetry writer: consumer interrupted; resuming");
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  })();

  const sink: TelemetrySink = {
    name: "jetstream",
    async accept(unit) {
      try {
        await js.publish(subjectOf(opts.stream, unit), encodeUnit(unit));
      } catch (err) {
        // Stream full (discard new), NATS away or no ack in time: nothing was queued.
        ctx.log.warn({ err, kind: unit.kind }, "JetStream publish failed; sender told to retry");
        throw storageUnavailable(err);
      }
    },
    async close() {},
  };

  return {
    sink,
    stats,
    async pending() {
      const info = await jsm.consumers.info(opts.stream, CONSUMER);
      return info.num_pending + info.num_ack_pending;
    },
    async close() {
      closed = true;
      clearInterval(prune);
      await messages?.close().catch(() => undefined);
      await loop.catch(() => undefined);
      await nc.drain().catch(() => undefined);
    },
  };
}
