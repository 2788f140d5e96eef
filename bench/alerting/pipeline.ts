// Alerting pipeline throughput on a fresh database: log promotion (event-rule matching with a
// realistic rule set, OCSF event + alert writes, stateful rule counting) and webhook delivery
// to a loopback HTTP receiver through dispatchDueDeliveries.
// Run: node --import tsx bench/alerting/pipeline.ts
//   ALERTING_BENCH_LOGS (default 5000 logs), ALERTING_BENCH_RULES (default 50 event rules),
//   ALERTING_BENCH_DELIVERIES (default 1000), ALERTING_BENCH_DATABASE_URL (PostgreSQL admin URL,
//   default postgres://root@127.0.0.1:5432/postgres; "pglite" for the embedded backend).
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import pg from "pg";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { triggerAlert } from "../../src/alerting/actions.ts";
import { createEventRule, promoteStoredLogs } from "../../src/alerting/event-rules.ts";
import {
  addStepChannel,
  createChannel,
  createPolicy,
  createRoute,
  createStep,
} from "../../src/alerting/notifications/config.ts";
import { dispatchDueDeliveries } from "../../src/alerting/notifications/delivery.ts";
import { routeAlert } from "../../src/alerting/notifications/routing.ts";
import { createStatefulRule } from "../../src/alerting/stateful-rules.ts";
import { loadConfig } from "../../src/config/config.ts";
import type { AppContext } from "../../src/kernel/context.ts";
import { createLogger } from "../../src/kernel/logger.ts";
import type { Db } from "../../src/storage/db.ts";
import { migrate } from "../../src/storage/migrate.ts";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { insertLogs } from "../../src/telemetry/write.ts";

const LOGS = Number(process.env.ALERTING_BENCH_LOGS ?? 5000);
const RULES = Number(process.env.ALERTING_BENCH_RULES ?? 50);
const DELIVERIES = Number(process.env.ALERTING_BENCH_DELIVERIES ?? 1000);
const ADMIN_URL = process.env.ALERTING_BENCH_DATABASE_URL ?? "postgres://root@127.0.0.1:5432/postgres";

async function openDb(): Promise<{ db: Db; label: string; drop: () => Promise<void> }> {
  if (ADMIN_URL === "pglite") {
    const db = await PgliteDb.open({});
    return { db, label: "PGlite (in-process worker)", drop: async () => {} };
  }
  const name = `netmon_bench_alerting_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const db = await PostgresDb.open({ connectionString: url.toString(), poolSize: 10 });
  return {
    db,
    label: "PostgreSQL 15 (local)",
    drop: async () => {
      const a = new pg.Client({ connectionString: ADMIN_URL });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name}`);
      await a.end();
    },
  };
}

const { db, label, drop } = await openDb();
await migrate(db);
const ctx: AppContext = {
  config: loadConfig({}),
  db,
  log: createLogger("warn"),
  secretKey: randomBytes(32),
  now: () => new Date(),
};

// Rule set: RULES non-matching rules of every predicate kind ahead of the one that matches 10%.
for (let i = 0; i < RULES; i++) {
  const kinds = [
    { body_contains: `no-such-text-${i}` },
    { service_name: `svc-${i}`, severity_number_min: 17 },
    { attribute_equals: { "http.route": `/never/${i}` } },
    { event_type: `never.${i}` },
  ];
  await createEventRule(ctx, SYSTEM_ACTOR, {
    name: `bench-miss-${i}`,
    priority: 10 + i,
    match: kinds[i % 4] as Record<string, unknown>,
  });
}
await createEventRule(ctx, SYSTEM_ACTOR, {
  name: "bench-hit",
  priority: 1000,
  match: { body_contains: "payment failed" },
  event: { alert: false },
});
await createStatefulRule(ctx, SYSTEM_ACTOR, {
  name: "bench-stateful",
  signal: "log",
  match: { body_contains: "payment failed" },
  group_by: ["customer"],
  threshold: 1000000,
  window_seconds: 600,
  bucket_seconds: 60,
});

const rows = Array.from({ length: LOGS }, (_, i) => ({
  timestamp: new Date(),
  service_name: "checkout",
  severity_text: i % 10 === 0 ? "ERROR" : "INFO",
  severity_number: i % 10 === 0 ? 17 : 9,
  body: i % 10 === 0 ? `payment failed for order ${i}` : `request ${i} served`,
  attributes: { customer: `c${i % 100}`, "http.route": "/checkout" },
}));
const ids = await insertLogs(db, rows);

const BATCH = 100;
const t0 = performance.now();
let promoted = 0;
for (let i = 0; i < ids.length; i += BATCH) {
  const res = await promoteStoredLogs(ctx, ids.slice(i, i + BATCH));
  promoted += res.filter((r) => r.event).length;
}
const promoSecs = (performance.now() - t0) / 1000;

// Delivery: one webhook channel, DELIVERIES alerts routed to it, then drain the queue.
let hits = 0;
const receiver = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    hits++;
    res.end("ok");
  });
});
await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`;
const channel = await createChannel(ctx, SYSTEM_ACTOR, {
  name: "bench-hook",
  provider: "webhook",
  config: { url },
});
const policy = await createPolicy(ctx, SYSTEM_ACTOR, { name: "bench-policy" });
const step = await createStep(ctx, SYSTEM_ACTOR, { policy_id: policy.id as string, step_number: 1 });
await addStepChannel(ctx, SYSTEM_ACTOR, { step_id: step.id as string, channel_id: channel.id as string });
await createRoute(ctx, SYSTEM_ACTOR, { name: "bench-route", escalation_policy_id: policy.id as string });
const tRoute = performance.now();
for (let i = 0; i < DELIVERIES; i++) {
  const a = await triggerAlert(ctx, SYSTEM_ACTOR, { title: `bench alert ${i}`, severity: "critical" });
  await routeAlert(ctx, a);
}
const routeSecs = (performance.now() - tRoute) / 1000;
const tSend = performance.now();
while ((await dispatchDueDeliveries(ctx, { batchSize: 100 })) > 0) {}
const sendSecs = (performance.now() - tSend) / 1000;
const sent = await db.one<{ n: number }>(
  "SELECT count(*)::int AS n FROM notification_deliveries WHERE status = 'sent'",
);

receiver.close();
await db.close();
await drop();

const f = (n: number) => n.toLocaleString("en-US", { maximumFractionDigits: 0 });
console.log(`## Alerting pipeline (${label})

Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, Node ${process.version}. Command:
\`node --import tsx bench/alerting/pipeline.ts\` (ALERTING_BENCH_LOGS=${LOGS}, ALERTING_BENCH_RULES=${RULES},
ALERTING_BENCH_DELIVERIES=${DELIVERIES}).

| stage | work | time | rate |
|---|---|---|---|
| log promotion (${RULES + 1} event rules, 1 stateful rule, batches of ${BATCH}) | ${f(LOGS)} logs, ${f(promoted)} promoted to events | ${promoSecs.toFixed(2)} s | ${f(LOGS / promoSecs)} logs/s |
| trigger + route (1 route, 1 step, 1 channel) | ${f(DELIVERIES)} alerts | ${routeSecs.toFixed(2)} s | ${f(DELIVERIES / routeSecs)} alerts/s |
| webhook delivery to loopback (8 concurrent per batch of 100) | ${f(sent?.n ?? 0)} sent, ${f(hits)} received | ${sendSecs.toFixed(2)} s | ${f((sent?.n ?? 0) / sendSecs)} deliveries/s |
`);
