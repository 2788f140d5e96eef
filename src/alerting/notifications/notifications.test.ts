import http from "node:http";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../test/helpers/database.ts";
import { ConflictError, ForbiddenError, ValidationError } from "../../kernel/errors.ts";
import type { Db, Row } from "../../storage/db.ts";
import { sql } from "../../storage/sql.ts";
import { acknowledgeAlert, resolveAlert, triggerAlert } from "../actions.ts";
import { promoteLogs } from "../event-rules.ts";
import { writeInternalLog } from "../internal-log.ts";
import { onAlertLifecycle } from "../lifecycle.ts";
import { lifecycleListener } from "../notifier.ts";
import { createStatefulRule } from "../stateful-rules.ts";
import { roleActor, testActor, testClock, testContext } from "../test-context.ts";
import type { AlertRow } from "../types.ts";
import {
  addStepChannel,
  createChannel,
  createPolicy,
  createRoute,
  createStep,
  disableRoute,
  enableRoute,
} from "./config.ts";
import { dispatchDueDeliveries } from "./delivery.ts";
import { evaluateMatchExpression, validateMatchExpression } from "./match-expression.ts";
import { advanceEscalations, notifyResolved, routeAlert } from "./routing.ts";

let db: Db;
const clock = testClock("2026-04-01T00:00:00Z");
let ctx: ReturnType<typeof testContext>;
const admin = testActor(
  "admin",
  ["notifications.channels.manage", "notifications.routes.manage"],
  "admin@example.test",
);
const operator = roleActor("operator", [], "op@example.test");

// A loopback webhook receiver whose answers the test scripts.
interface Hook {
  url: string;
  received: { headers: http.IncomingHttpHeaders; body: Record<string, unknown> }[];
  answers: number[];
  close(): Promise<void>;
}

async function webhookServer(): Promise<Hook> {
  const hook: Partial<Hook> = { received: [], answers: [] };
  const server = http.createServer((req, res) => {
    let data = "";
    req.on("data", (c) => {
      data += c;
    });
    req.on("end", () => {
      hook.received?.push({ headers: req.headers, body: JSON.parse(data) });
      res.statusCode = hook.answers?.shift() ?? 200;
      res.end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  hook.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  hook.close = () => new Promise<void>((r) => server.close(() => r()));
  return hook as Hook;
}

// A loopback SMTP server collecting messages.
interface Smtp {
  port: number;
  messages: { from: string; to: string[]; data: string }[];
  rejectNext: number;
  close(): Promise<void>;
}

async function smtpServer(): Promise<Smtp> {
  const state: Partial<Smtp> = { messages: [], rejectNext: 0 };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onData(stream, session, cb) {
      let data = "";
      stream.on("data", (c) => {
        data += c;
      });
      stream.on("end", () => {
        if ((state.rejectNext ?? 0) > 0) {
          state.rejectNext = (state.rejectNext ?? 0) - 1;
          const err = new Error("mailbox busy") as Error & { responseCode: number };
          err.responseCode = 451;
          cb(err);
          return;
        }
        state.messages?.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          data,
        });
        cb();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  state.port = (server.server.address() as AddressInfo).port;
  state.close = () => new Promise<void>((r) => server.close(() => r()));
  return state as Smtp;
}

let hook: Hook;
let smtp: Smtp;

beforeAll(async () => {
  db = (await createTestDatabase()).db;
  ctx = testContext(db, clock);
  hook = await webhookServer();
  smtp = await smtpServer();
});
afterAll(async () => {
  await hook?.close();
  await smtp?.close();
  await db?.close();
});

const OPTS = { backoffBaseMs: 10_000, timeoutMs: 5_000 };

async function deliveries(alertId: string): Promise<Row[]> {
  return db.many(
    sql`SELECT * FROM notification_deliveries WHERE alert_id = ${alertId} ORDER BY inserted_at, step_number`,
  );
}

async function setupPolicy(
  name: string,
  channels: string[][],
  delays: number[],
  condition = "if_unacknowledged",
) {
  const policy = await createPolicy(ctx, admin, { name });
  for (const [i, chans] of channels.entries()) {
    const step = await createStep(ctx, admin, {
      policy_id: policy.id as string,
      step_number: i + 1,
      delay_seconds: delays[i] ?? 0,
      condition: condition as "always",
    });
    for (const c of chans) await addStepChannel(ctx, admin, { step_id: step.id as string, channel_id: c });
  }
  return policy;
}

describe("configuration validation", () => {
  it("validates channel config, references and permissions", async () => {
    await expect(
      createChannel(ctx, admin, { name: "bad-hook", provider: "webhook", config: { url: "ftp://x" } }),
    ).rejects.toBeInstanceOf(ValidationError);
    await expect(
      createChannel(ctx, admin, {
        name: "bad-mail",
        provider: "email",
        config: { to: ["nobody"], smtp: { host: "h" } },
      }),
    ).rejects.toBeInstanceOf(ValidationError);
    await expect(
      createChannel(ctx, operator, { name: "op-hook", provider: "webhook", config: { url: hook.url } }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      createStep(ctx, admin, { policy_id: "00000000-0000-4000-8000-0000000000aa", step_number: 1 }),
    ).rejects.toMatchObject({ status: 422, source: { pointer: "/data/attributes/policy_id" } });
    const p = await createPolicy(ctx, admin, { name: "val-policy" });
    await createStep(ctx, admin, { policy_id: p.id as string, step_number: 1 });
    await expect(
      createStep(ctx, admin, { policy_id: p.id as string, step_number: 1 }),
    ).rejects.toBeInstanceOf(ConflictError);
    await expect(
      addStepChannel(ctx, admin, {
        step_id: "00000000-0000-4000-8000-0000000000bb",
        channel_id: "00000000-0000-4000-8000-0000000000cc",
      }),
    ).rejects.toMatchObject({ status: 422, source: { pointer: "/data/attributes/step_id" } });
    await expect(
      createRoute(ctx, admin, {
        name: "r-bad",
        escalation_policy_id: "00000000-0000-4000-8000-0000000000dd",
      }),
    ).rejects.toMatchObject({ status: 422, source: { pointer: "/data/attributes/escalation_policy_id" } });
    await expect(
      createRoute(ctx, admin, {
        name: "r-bad2",
        escalation_policy_id: p.id as string,
        match_expression: { field: "alert.severity" },
      }),
    ).rejects.toBeInstanceOf(ValidationError);
  });

  it("repeat_interval_seconds is required with repeats and floored by stateful renotify_seconds", async () => {
    await expect(createPolicy(ctx, admin, { name: "rp1", repeat_count: 2 })).rejects.toMatchObject({
      message: "is required when repeat_count is greater than zero",
    });
    await createStatefulRule(ctx, operator, {
      name: "renotify-floor",
      match: { always: true },
      renotify_seconds: 3600,
      enabled: true,
    });
    await expect(
      createPolicy(ctx, admin, { name: "rp2", repeat_count: 1, repeat_interval_seconds: 60 }),
    ).rejects.toBeInstanceOf(ValidationError);
    await db.query(sql`UPDATE stateful_alert_rules SET enabled = false WHERE name = 'renotify-floor'`);
  });

  it("match expressions: grammar and evaluation", () => {
    const c = {
      alert: { severity: "critical", title: "Node down", metadata: { incident_rule_name: "k8s" } },
    };
    expect(evaluateMatchExpression({}, c)).toBe(true);
    expect(evaluateMatchExpression({ "alert.severity": "critical" }, c)).toBe(true);
    expect(evaluateMatchExpression({ field: "alert.metadata.incident_rule_name", equals: "k8s" }, c)).toBe(
      true,
    );
    expect(
      evaluateMatchExpression(
        {
          any: [
            { field: "alert.severity", in: ["info"] },
            { field: "alert.title", contains: "down" },
          ],
        },
        c,
      ),
    ).toBe(true);
    expect(evaluateMatchExpression({ not: { field: "alert.title", matches: "^Node" } }, c)).toBe(false);
    expect(
      evaluateMatchExpression(
        { all: [{ field: "alert.device", exists: false }, { "alert.severity": "info" }] },
        c,
      ),
    ).toBe(false);
    expect(() => validateMatchExpression({ field: "alert.severity", equals: "" })).toThrow(ValidationError);
    expect(() => validateMatchExpression({ all: [], x: 1 })).toThrow(ValidationError);
    expect(() => validateMatchExpression({ field: "a", bogus: 1 })).toThrow(ValidationError);
  });
});

describe("webhook delivery", () => {
  it("routes a fired alert and POSTs it to a real loopback receiver", async () => {
    const ch = await createChannel(ctx, admin, {
      name: "ops-hook",
      provider: "webhook",
      config: { url: hook.url, headers: { "X-Team": "ops" } },
      secret_refs: { webhook_secret: "s3cret" },
    });
    const policy = await setupPolicy("hook-policy", [[ch.id as string]], [0]);
    await createRoute(ctx, admin, {
      name: "criticals-to-hook",
      priority: 10,
      match_expression: { field: "alert.metadata.team", equals: "payments" },
      escalation_policy_id: policy.id as string,
    });
    const other = await triggerAlert(ctx, operator, { title: "unrelated", metadata: { team: "other" } });
    expect(await routeAlert(ctx, other)).toEqual([]);

    const alert = await triggerAlert(ctx, operator, {
      title: "payments down",
      severity: "critical",
      metadata: { team: "payments" },
    });
    const routes = await routeAlert(ctx, alert);
    expect(routes).toHaveLength(1);
    hook.received.length = 0;
    expect(await dispatchDueDeliveries(ctx, OPTS)).toBe(1);
    expect(hook.received).toHaveLength(1);
    const got = hook.received[0];
    expect(got?.headers["x-team"]).toBe("ops");
    expect(got?.headers["x-netmon-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(got?.body).toMatchObject({
      type: "alert.fire",
      lifecycle_reason: "fire",
      alert: { id: alert.id, title: "payments down", severity: "critical", status: "pending" },
    });
    const [d] = await deliveries(alert.id);
    expect(d).toMatchObject({ status: "sent", attempts: 1, response_status: 200, lifecycle_reason: "fire" });
    const a = await db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${alert.id}`);
    expect(a?.notification_count).toBe(1);
    // Routing again is idempotent: no second delivery.
    await routeAlert(ctx, alert);
    expect(await deliveries(alert.id)).toHaveLength(1);

    // Resolving notifies the channel that was notified.
    const resolved = await resolveAlert(ctx, operator, alert.id, { resolution_note: "ok" });
    expect(await notifyResolved(ctx, resolved)).toBe(1);
    await dispatchDueDeliveries(ctx, OPTS);
    expect(hook.received.at(-1)?.body).toMatchObject({
      type: "alert.resolve",
      alert: { status: "resolved" },
    });
    await disableRoute(ctx, admin, routes[0] as string);
  });

  it("retries a failing target with backoff, then succeeds", async () => {
    const ch = await createChannel(ctx, admin, {
      name: "flaky-hook",
      provider: "webhook",
      config: { url: hook.url },
      max_attempts: 3,
    });
    const policy = await setupPolicy("flaky-policy", [[ch.id as string]], [0]);
    const route = await createRoute(ctx, admin, {
      name: "flaky-route",
      match_expression: { "alert.metadata.team": "flaky" },
      escalation_policy_id: policy.id as string,
    });
    const alert = await triggerAlert(ctx, operator, { title: "flaky", metadata: { team: "flaky" } });
    await routeAlert(ctx, alert);
    hook.received.length = 0;
    hook.answers.push(503, 500);
    await dispatchDueDeliveries(ctx, OPTS);
    let [d] = await deliveries(alert.id);
    expect(d).toMatchObject({
      status: "pending",
      attempts: 1,
      response_status: 503,
      last_error: "webhook answered HTTP 503",
    });
    expect(new Date(d?.next_attempt_at as Date).getTime() - clock.now().getTime()).toBe(10_000);
    // Not due yet: nothing is sent.
    expect(await dispatchDueDeliveries(ctx, OPTS)).toBe(0);
    clock.advance(10);
    await dispatchDueDeliveries(ctx, OPTS);
    [d] = await deliveries(alert.id);
    expect(d).toMatchObject({ status: "pending", attempts: 2, response_status: 500 });
    expect(new Date(d?.next_attempt_at as Date).getTime() - clock.now().getTime()).toBe(20_000);
    const health = await db.one(sql`SELECT health FROM notification_channels WHERE id = ${ch.id}`);
    expect(health?.health).toBe("degraded");
    clock.advance(20);
    await dispatchDueDeliveries(ctx, OPTS);
    [d] = await deliveries(alert.id);
    expect(d).toMatchObject({ status: "sent", attempts: 3, response_status: 200 });
    expect(hook.received).toHaveLength(3);
    await disableRoute(ctx, admin, route.id as string);
  });

  it("gives up after max_attempts or on a 4xx, and fails over to the fallback channel", async () => {
    const fallback = await createChannel(ctx, admin, {
      name: "fallback-hook",
      provider: "webhook",
      config: { url: hook.url },
    });
    // A closed port: connection refused on every attempt.
    const dead = http.createServer();
    await new Promise<void>((r) => dead.listen(0, "127.0.0.1", r));
    const deadUrl = `http://127.0.0.1:${(dead.address() as AddressInfo).port}/`;
    await new Promise<void>((r) => dead.close(() => r()));
    const down = await createChannel(ctx, admin, {
      name: "down-hook",
      provider: "webhook",
      config: { url: deadUrl },
      max_attempts: 2,
      fallback_channel_id: fallback.id as string,
    });
    const rejecting = await createChannel(ctx, admin, {
      name: "rejecting-hook",
      provider: "webhook",
      config: { url: hook.url },
      max_attempts: 5,
      fail_closed: true,
      fallback_channel_id: fallback.id as string,
    });
    const policy = await setupPolicy("failing-policy", [[down.id as string, rejecting.id as string]], [0]);
    const route = await createRoute(ctx, admin, {
      name: "failing-route",
      match_expression: { "alert.metadata.team": "failing" },
      escalation_policy_id: policy.id as string,
    });
    const alert = await triggerAlert(ctx, operator, { title: "failing", metadata: { team: "failing" } });
    await routeAlert(ctx, alert);
    hook.received.length = 0;
    hook.answers.push(400);
    await dispatchDueDeliveries(ctx, OPTS);
    clock.advance(10);
    await dispatchDueDeliveries(ctx, OPTS); // second attempt of down-hook fails → failover created and sent
    await dispatchDueDeliveries(ctx, OPTS);
    const rows = await deliveries(alert.id);
    const byChannel = (id: unknown) => rows.filter((r) => r.channel_id === id);
    expect(byChannel(down.id)[0]).toMatchObject({ status: "failed", attempts: 2 });
    expect(String(byChannel(down.id)[0]?.last_error)).toMatch(/webhook request failed/);
    // 400 is not retried; fail_closed: no failover from it.
    expect(byChannel(rejecting.id)[0]).toMatchObject({ status: "failed", attempts: 1, response_status: 400 });
    const fo = byChannel(fallback.id);
    expect(fo).toHaveLength(1);
    expect(fo[0]).toMatchObject({
      status: "sent",
      lifecycle_reason: "failover",
      originating_delivery_id: byChannel(down.id)[0]?.id,
    });
    await disableRoute(ctx, admin, route.id as string);
  });
});

describe("email delivery", () => {
  it("sends through a real loopback SMTP server, retrying a temporary rejection", async () => {
    const ch = await createChannel(ctx, admin, {
      name: "oncall-mail",
      provider: "email",
      config: {
        to: ["oncall@example.test", "lead@example.test"],
        from: "netmon@example.test",
        smtp: { host: "127.0.0.1", port: smtp.port, starttls: false },
      },
    });
    const policy = await setupPolicy("mail-policy", [[ch.id as string]], [0]);
    const route = await createRoute(ctx, admin, {
      name: "mail-route",
      match_expression: { "alert.metadata.team": "mail" },
      escalation_policy_id: policy.id as string,
    });
    const alert = await triggerAlert(ctx, operator, {
      title: "database down",
      severity: "emergency",
      device_uid: "db-1",
      metadata: { team: "mail" },
    });
    await routeAlert(ctx, alert);
    smtp.rejectNext = 1;
    await dispatchDueDeliveries(ctx, OPTS);
    let [d] = await deliveries(alert.id);
    expect(d).toMatchObject({ status: "pending", attempts: 1, response_status: 451 });
    expect(smtp.messages).toHaveLength(0);
    clock.advance(10);
    await dispatchDueDeliveries(ctx, OPTS);
    [d] = await deliveries(alert.id);
    expect(d).toMatchObject({ status: "sent", attempts: 2, payload_format: "plain" });
    expect(smtp.messages).toHaveLength(1);
    const m = smtp.messages[0];
    expect(m?.from).toBe("netmon@example.test");
    expect(m?.to).toEqual(["oncall@example.test", "lead@example.test"]);
    expect(m?.data).toContain("Subject: [EMERGENCY] database down");
    expect(m?.data).toContain("Device: db-1");
    expect(m?.data).toContain(`Alert id: ${alert.id}`);
    await disableRoute(ctx, admin, route.id as string);
  });
});

describe("stateful renotify", () => {
  it("a rule still firing after renotify_seconds notifies the channels again", async () => {
    clock.set("2026-04-03T00:00:00Z");
    const unsubscribe = onAlertLifecycle(lifecycleListener({}, () => {}));
    try {
      const ch = await createChannel(ctx, admin, {
        name: "renotify-hook",
        provider: "webhook",
        config: { url: hook.url },
      });
      const policy = await setupPolicy("renotify-policy", [[ch.id as string]], [0]);
      const route = await createRoute(ctx, admin, {
        name: "renotify-route",
        priority: 0,
        match_expression: { field: "alert.metadata.incident_rule_name", equals: "disk-errors" },
        escalation_policy_id: policy.id as string,
      });
      await createStatefulRule(ctx, operator, {
        name: "disk-errors",
        match: { body_contains: "I/O error" },
        threshold: 1,
        window_seconds: 60,
        bucket_seconds: 60,
        cooldown_seconds: 3600,
        renotify_seconds: 600,
      });
      const log = () =>
        writeInternalLog(ctx, {
          source: "test",
          service_name: "kernel",
          severity_text: "error",
          body: "sda: I/O error",
          attributes: {},
        });
      const [first] = await promoteLogs(ctx, [await log()]);
      const alert = first?.stateful_alerts[0] as AlertRow;
      expect(alert).toBeDefined();
      await dispatchDueDeliveries(ctx, OPTS);
      expect((await deliveries(alert.id)).map((d) => [d.lifecycle_reason, d.status])).toEqual([
        ["fire", "sent"],
      ]);
      clock.advance(300);
      await promoteLogs(ctx, [await log()]);
      expect(await deliveries(alert.id)).toHaveLength(1);
      clock.advance(301);
      await promoteLogs(ctx, [await log()]);
      await dispatchDueDeliveries(ctx, OPTS);
      const rows = await deliveries(alert.id);
      expect(rows.map((d) => [d.lifecycle_reason, d.repeat_number, d.status])).toEqual([
        ["fire", 0, "sent"],
        ["renotify", 1, "sent"],
      ]);
      expect(hook.received.at(-1)?.body).toMatchObject({ type: "alert.renotify", alert: { id: alert.id } });
      await disableRoute(ctx, admin, route.id as string);
      await db.query(sql`UPDATE stateful_alert_rules SET enabled = false WHERE name = 'disk-errors'`);
      await db.query(
        sql`UPDATE alerting_rule_versions SET version = version + 1 WHERE kind = 'stateful_alert_rules'`,
      );
    } finally {
      unsubscribe();
    }
  });
});

describe("escalation", () => {
  it("runs later steps after their delay while unacknowledged, escalating the alert; acknowledging stops them", async () => {
    clock.set("2026-04-02T00:00:00Z");
    const first = await createChannel(ctx, admin, {
      name: "esc-primary",
      provider: "webhook",
      config: { url: `${hook.url}?p` },
    });
    const second = await createChannel(ctx, admin, {
      name: "esc-secondary",
      provider: "webhook",
      config: { url: `${hook.url}?s` },
    });
    const third = await createChannel(ctx, admin, {
      name: "esc-manager",
      provider: "webhook",
      config: { url: `${hook.url}?m` },
    });
    const policy = await setupPolicy(
      "esc-policy",
      [[first.id as string], [second.id as string], [third.id as string]],
      [0, 300, 900],
    );
    const route = await createRoute(ctx, admin, {
      name: "esc-route",
      priority: 1,
      match_expression: { field: "alert.metadata.team", equals: "esc" },
      escalation_policy_id: policy.id as string,
    });
    const alert = await triggerAlert(ctx, operator, {
      title: "escalating",
      severity: "critical",
      metadata: { team: "esc" },
    });
    await routeAlert(ctx, alert);
    await dispatchDueDeliveries(ctx, OPTS);
    expect((await deliveries(alert.id)).map((d) => [d.step_number, d.status])).toEqual([[1, "sent"]]);

    clock.advance(299);
    expect(await advanceEscalations(ctx)).toBe(0);
    clock.advance(1);
    expect(await advanceEscalations(ctx)).toBe(1);
    await dispatchDueDeliveries(ctx, OPTS);
    const rows = await deliveries(alert.id);
    expect(rows.map((d) => [d.step_number, d.lifecycle_reason, d.status, d.channel_id])).toEqual([
      [1, "fire", "sent", first.id],
      [2, "escalate", "sent", second.id],
    ]);
    const escalated = await db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${alert.id}`);
    expect(escalated).toMatchObject({
      status: "escalated",
      escalation_level: 1,
      escalation_reason: "escalation step 2",
    });

    // Acknowledged: step 3 (if_unacknowledged) never runs.
    await acknowledgeAlert(ctx, operator, alert.id);
    clock.advance(1000);
    expect(await advanceEscalations(ctx)).toBe(0);
    expect(await deliveries(alert.id)).toHaveLength(2);
    const routing = await db.one(
      sql`SELECT completed FROM notification_alert_routings WHERE alert_id = ${alert.id}`,
    );
    expect(routing?.completed).toBe(true);
    await disableRoute(ctx, admin, route.id as string);
  });

  it("first matching route wins unless continue; disabled channels are recorded as suppressed; enable restores a route", async () => {
    const on = await createChannel(ctx, admin, {
      name: "cont-on",
      provider: "webhook",
      config: { url: hook.url },
    });
    const off = await createChannel(ctx, admin, {
      name: "cont-off",
      provider: "webhook",
      config: { url: hook.url },
      enabled: false,
    });
    const p1 = await setupPolicy("cont-p1", [[on.id as string]], [0]);
    const p2 = await setupPolicy("cont-p2", [[off.id as string]], [0]);
    const r1 = await createRoute(ctx, admin, {
      name: "cont-r1",
      priority: 2,
      continue: true,
      match_expression: { "alert.metadata.team": "cont" },
      escalation_policy_id: p1.id as string,
    });
    const r2 = await createRoute(ctx, admin, {
      name: "cont-r2",
      priority: 3,
      match_expression: { "alert.metadata.team": "cont" },
      escalation_policy_id: p2.id as string,
    });
    const r3 = await createRoute(ctx, admin, {
      name: "cont-r3",
      priority: 4,
      match_expression: {},
      escalation_policy_id: p1.id as string,
    });
    const alert = await triggerAlert(ctx, operator, { title: "cont", metadata: { team: "cont" } });
    expect(await routeAlert(ctx, alert)).toEqual([r1.id, r2.id]);
    const rows = await deliveries(alert.id);
    expect(rows.find((r) => r.channel_id === off.id)).toMatchObject({
      status: "suppressed",
      suppression_reason: "channel_disabled",
    });
    await disableRoute(ctx, admin, r1.id as string);
    await disableRoute(ctx, admin, r2.id as string);
    const again = await triggerAlert(ctx, operator, { title: "cont2", metadata: { team: "cont" } });
    expect(await routeAlert(ctx, again)).toEqual([r3.id]);
    const re = await enableRoute(ctx, admin, r1.id as string);
    expect(re.enabled).toBe(true);
  });
});

describe("a claim taken over after the claim timeout", () => {
  it("is concluded once: the outcome recorded first stands, a late one does not overwrite it", async () => {
    // A receiver that holds requests until the test answers them (`hold` off: answers 200 at once).
    let hold = true;
    let answered = 0;
    const queue: http.ServerResponse[] = [];
    const waiting: ((res: http.ServerResponse) => void)[] = [];
    const server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        if (!hold) {
          answered++;
          res.end("{}");
          return;
        }
        const w = waiting.shift();
        if (w) w(res);
        else queue.push(res);
      });
    });
    const nextRequest = () =>
      new Promise<http.ServerResponse>((resolve) => {
        const r = queue.shift();
        if (r) resolve(r);
        else waiting.push(resolve);
      });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      await dispatchDueDeliveries(ctx, OPTS); // what earlier tests left due
      const ch = await createChannel(ctx, admin, {
        name: "held-hook",
        provider: "webhook",
        config: { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` },
        max_attempts: 3,
      });
      const policy = await setupPolicy("held-policy", [[ch.id as string]], [0]);
      const route = await createRoute(ctx, admin, {
        name: "held-route",
        priority: 1,
        match_expression: { "alert.metadata.team": "held" },
        escalation_policy_id: policy.id as string,
      });
      const alert = await triggerAlert(ctx, operator, { title: "held", metadata: { team: "held" } });
      await routeAlert(ctx, alert);

      const first = dispatchDueDeliveries(ctx, OPTS); // replica A claims and sends…
      const toA = await nextRequest();
      clock.advance(ctx.config.monitoring.notifyClaimTimeoutSeconds + 1);
      const second = dispatchDueDeliveries(ctx, OPTS); // …A looks dead: B takes the claim over
      const toB = await nextRequest();
      toB.end("{}");
      await second;
      let [d] = await deliveries(alert.id);
      expect(d).toMatchObject({ status: "sent", attempts: 2, response_status: 200 });
      toA.statusCode = 503; // A's late answer would schedule a retry
      toA.end("{}");
      await first;
      [d] = await deliveries(alert.id);
      expect(d).toMatchObject({ status: "sent", attempts: 2, response_status: 200, next_attempt_at: null });
      hold = false;
      clock.advance(3600);
      await dispatchDueDeliveries(ctx, OPTS);
      expect(answered).toBe(0); // not sent a third time
      await disableRoute(ctx, admin, route.id as string);
    } finally {
      hold = false;
      for (const r of queue) r.end("{}");
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
