import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import {
  AuthenticationRequiredError,
  ConflictError,
  ForbiddenError,
  NotFoundError,
  ValidationError,
} from "../kernel/errors.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { insertLogs } from "../telemetry/write.ts";
import {
  createEventRule,
  deleteEventRule,
  getEventRule,
  listEventRules,
  promoteLogs,
  promoteStoredLogs,
  promoteWrittenLogs,
  updateEventRule,
} from "./event-rules.ts";
import { writeInternalLog } from "./internal-log.ts";
import { publishK8sNodeReadiness } from "./k8s.ts";
import { createStatefulRule, sweepStatefulRules, updateStatefulRule } from "./stateful-rules.ts";
import { testActor, testClock, testContext } from "./test-context.ts";
import type { AlertRow } from "./types.ts";

let db: Db;
const clock = testClock("2026-03-01T00:00:00Z");
let ctx: ReturnType<typeof testContext>;

const ruleAdmin = testActor("viewer", [
  "observability.rules.view",
  "observability.rules.create",
  "observability.rules.update",
  "observability.rules.delete",
]);
const writerOnly = testActor("admin", [
  "observability.rules.create",
  "observability.rules.update",
  "observability.rules.delete",
]);
const viewerOnly = testActor("viewer", ["observability.rules.view"]);
const operator = testActor("operator");
const viewer = testActor("viewer");

beforeAll(async () => {
  db = (await createTestDatabase()).db;
  ctx = testContext(db, clock);
});
afterAll(async () => {
  await db?.close();
});

function log(body: string, attributes: Record<string, unknown> = {}, severity = "error") {
  return writeInternalLog(ctx, {
    source: "test",
    service_name: "payments",
    severity_text: severity,
    body,
    attributes,
  });
}

describe("event rule permissions (spec 4.1 behaviours 2–3)", () => {
  it("unauthenticated: list is empty, detail 404, mutations 401", async () => {
    const r = await createEventRule(ctx, ruleAdmin, { name: "perm-rule", match: { body_contains: "perm" } });
    expect(await listEventRules(db, null)).toEqual([]);
    await expect(getEventRule(db, null, r.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(createEventRule(ctx, null, { name: "x", match: { always: true } })).rejects.toBeInstanceOf(
      AuthenticationRequiredError,
    );
    await expect(updateEventRule(ctx, null, r.id, { priority: 5 })).rejects.toBeInstanceOf(
      AuthenticationRequiredError,
    );
    await expect(deleteEventRule(ctx, null, r.id)).rejects.toBeInstanceOf(AuthenticationRequiredError);
  });

  it("write permissions do not grant reads (even for an admin role)", async () => {
    const r = await createEventRule(ctx, writerOnly, { name: "writer-rule", match: { body_contains: "w" } });
    expect(await listEventRules(db, writerOnly)).toEqual([]);
    await expect(getEventRule(db, writerOnly, r.id)).rejects.toBeInstanceOf(NotFoundError);
    const updated = await updateEventRule(ctx, writerOnly, r.id, { priority: 7 });
    expect(updated.priority).toBe(7);
    await deleteEventRule(ctx, writerOnly, r.id);
    await expect(getEventRule(db, ruleAdmin, r.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("view permission reads; each write needs its own permission", async () => {
    const r = await createEventRule(ctx, ruleAdmin, { name: "view-rule", match: { body_contains: "v" } });
    const listed = await listEventRules(db, viewerOnly);
    expect(listed.map((x) => x.name)).toContain("view-rule");
    expect((await getEventRule(db, viewerOnly, r.id)).name).toBe("view-rule");
    await expect(
      createEventRule(ctx, viewerOnly, { name: "no", match: { always: true } }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(updateEventRule(ctx, viewerOnly, r.id, { priority: 1 })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(deleteEventRule(ctx, viewerOnly, r.id)).rejects.toBeInstanceOf(ForbiddenError);
    const createOnly = testActor("admin", ["observability.rules.create"]);
    await expect(updateEventRule(ctx, createOnly, r.id, { priority: 1 })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(deleteEventRule(ctx, createOnly, r.id)).rejects.toBeInstanceOf(ForbiddenError);
    await deleteEventRule(ctx, ruleAdmin, r.id);
  });

  it("validates names, match keys and uniqueness", async () => {
    await expect(createEventRule(ctx, ruleAdmin, { name: "" })).rejects.toBeInstanceOf(ValidationError);
    await expect(createEventRule(ctx, ruleAdmin, { name: "bad", match: { nope: 1 } })).rejects.toBeInstanceOf(
      ValidationError,
    );
    await createEventRule(ctx, ruleAdmin, { name: "dup", match: { body_contains: "dup" } });
    await expect(
      createEventRule(ctx, ruleAdmin, { name: "dup", match: { always: true } }),
    ).rejects.toBeInstanceOf(ConflictError);
  });
});

describe("log promotion and the rule cache (behaviour 1)", () => {
  it("a new rule applies to the very next log; update and delete too", async () => {
    const before = await promoteLogs(ctx, [await log("card declined for order 1", { order: "1" })]);
    expect(before[0]?.event).toBeNull();

    const rule = await createEventRule(ctx, ruleAdmin, {
      name: "declines",
      priority: 50,
      match: { body_contains: "CARD DECLINED", service_name: "payments" },
      event: { alert: { title: "Card declines", severity: "critical" } },
    });
    const [first] = await promoteLogs(ctx, [await log("card declined for order 2", { order: "2" })]);
    expect(first?.rule_id).toBe(rule.id);
    expect(first?.event).toMatchObject({
      log_id: first?.log_id,
      message: "card declined for order 2",
      severity_id: 4,
    });
    expect(first?.alert).toMatchObject({
      title: "Card declines",
      severity: "critical",
      source_type: "event",
      event_id: first?.event?.id,
      status: "pending",
    });
    const stored = await db.one(sql`SELECT count(*)::int AS n FROM events WHERE log_id = ${first?.log_id}`);
    expect(stored?.n).toBe(1);

    await updateEventRule(ctx, ruleAdmin, rule.id, { event: { alert: false } });
    const [second] = await promoteLogs(ctx, [await log("card declined for order 3")]);
    expect(second?.event).not.toBeNull();
    expect(second?.alert).toBeNull();

    await updateEventRule(ctx, ruleAdmin, rule.id, { enabled: false });
    const [third] = await promoteLogs(ctx, [await log("card declined for order 4")]);
    expect(third?.event).toBeNull();

    await updateEventRule(ctx, ruleAdmin, rule.id, { enabled: true });
    expect((await promoteLogs(ctx, [await log("card declined for order 5")]))[0]?.rule_id).toBe(rule.id);
    await deleteEventRule(ctx, ruleAdmin, rule.id);
    expect((await promoteLogs(ctx, [await log("card declined for order 6")]))[0]?.event).toBeNull();
  });

  it("first matching rule by priority wins; empty match never matches; low severity opens no alert by default", async () => {
    await createEventRule(ctx, ruleAdmin, { name: "empty", priority: 1, match: {} });
    const low = await createEventRule(ctx, ruleAdmin, {
      name: "prio-low",
      priority: 20,
      match: { body_contains: "quota" },
    });
    await createEventRule(ctx, ruleAdmin, { name: "prio-high", priority: 30, match: { always: true } });
    const [r] = await promoteLogs(ctx, [await log("quota exceeded", {}, "info")]);
    expect(r?.rule_id).toBe(low.id);
    expect(r?.alert).toBeNull();
    const [w] = await promoteLogs(ctx, [await log("quota exceeded badly", {}, "error")]);
    expect(w?.rule_id).toBe(low.id);
    expect(w?.alert?.severity).toBe("warning");
  });

  it("promoteStoredLogs promotes logs an ingest path stored with insertLogs", async () => {
    const rule = await createEventRule(ctx, ruleAdmin, {
      name: "ingested",
      priority: 0,
      match: { service_name: "edge-router", severity_text: "error" },
      event: { alert: false },
    });
    const ids = await insertLogs(db, [
      {
        timestamp: clock.now(),
        service_name: "edge-router",
        severity_text: "ERROR",
        body: "bgp down",
        attributes: {},
      },
      {
        timestamp: clock.now(),
        service_name: "edge-router",
        severity_text: "INFO",
        body: "bgp up",
        attributes: {},
      },
    ]);
    const results = await promoteStoredLogs(ctx, ids);
    expect(results.map((r) => r.rule_id === rule.id)).toEqual([true, false]);
    expect(results[0]?.event).toMatchObject({ message: "bgp down", log_id: ids[0] });
    await deleteEventRule(ctx, ruleAdmin, rule.id);
  });

  it("promoteWrittenLogs promotes from the rows as written exactly what the stored rows would match", async () => {
    // Catch-all rules from earlier cases would make every log a candidate: off for this case.
    const bumpRules = () =>
      db.query(sql`UPDATE alerting_rule_versions SET version = version + 1 WHERE kind = 'event_rules'`);
    await db.query(sql`UPDATE event_rules SET enabled = false WHERE match ? 'always'`);
    await bumpRules();
    const rule = await createEventRule(ctx, ruleAdmin, {
      name: "written-rows",
      priority: 0,
      match: { attribute_equals: { "net.peer": "10.0.0.1", port: 179 } },
      event: { alert: false },
    });
    const stateful = await createStatefulRule(ctx, operator, {
      name: "written-recover",
      signal: "log",
      match: { body_contains: "written-flap-down" },
      threshold: 1,
      window_seconds: 60,
      bucket_seconds: 60,
      alert: { severity: "warning", recover_match: { body_contains: "written-flap-up" } },
    });
    const rows = [
      // Matches the event rule only after the JSON round trip the stored jsonb makes (a nested
      // value that is not plain JSON would not); the number must compare as stored.
      { timestamp: clock.now(), body: "peer flap", attributes: { "net.peer": "10.0.0.1", port: 179 } },
      { timestamp: clock.now(), body: "other peer", attributes: { "net.peer": "10.0.0.2", port: 179 } },
      { timestamp: clock.now(), body: "written-flap-down", attributes: {} },
    ];
    const ids = await insertLogs(db, rows);
    const results = await promoteWrittenLogs(
      ctx,
      ids.map((id, i) => ({ id, row: rows[i] as Record<string, unknown> })),
    );
    // Only the two logs a rule acts on were read back and promoted.
    expect(results.map((r) => r.log_id)).toEqual([ids[0], ids[2]]);
    expect(results[0]?.rule_id).toBe(rule.id);
    expect(results[1]?.stateful_alerts).toHaveLength(1);
    const opened = results[1]?.stateful_alerts[0];
    // A log matching only the recover match is still promoted: it resolves the open alert.
    const upRows = [{ timestamp: clock.now(), body: "written-flap-up", attributes: {} }];
    const [upId] = await insertLogs(db, upRows);
    const up = await promoteWrittenLogs(ctx, [
      { id: upId as string, row: upRows[0] as Record<string, unknown> },
    ]);
    expect(up.map((r) => r.log_id)).toEqual([upId]);
    const after = await db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${opened?.id}`);
    expect(after?.status).toBe("resolved");
    await updateStatefulRule(ctx, operator, stateful.id, { enabled: false });
    await deleteEventRule(ctx, ruleAdmin, rule.id);
    await db.query(sql`UPDATE event_rules SET enabled = true WHERE match ? 'always'`);
    await bumpRules();
  });

  it("a rule change made through another handle reaches this cache via the shared version", async () => {
    // Simulate another replica: bump the version and insert a rule directly.
    await db.query(sql`INSERT INTO event_rules (name, priority, match, event)
      VALUES ('replica-rule', 0, '{"body_contains": "replica"}', '{"alert": false}')`);
    const [miss] = await promoteLogs(ctx, [await log("replica change")]);
    expect(miss?.rule_id).not.toBe(null); // cached list still holds the catch-all "prio-high"
    await db.query(sql`UPDATE alerting_rule_versions SET version = version + 1 WHERE kind = 'event_rules'`);
    const [hit] = await promoteLogs(ctx, [await log("replica change 2")]);
    const rule = await db.one<{ id: string }>(sql`SELECT id FROM event_rules WHERE name = 'replica-rule'`);
    expect(hit?.rule_id).toBe(rule?.id);
  });
});

describe("stateful alert rules (reference 7.1)", () => {
  it("validates thresholds and bucket/window", async () => {
    await expect(
      createStatefulRule(ctx, operator, { name: "bad1", threshold: 0, match: { always: true } }),
    ).rejects.toBeInstanceOf(ValidationError);
    const e = await createStatefulRule(ctx, operator, {
      name: "bad2",
      window_seconds: 100,
      bucket_seconds: 30,
      match: { always: true },
    }).catch((x) => x);
    expect(e).toBeInstanceOf(ValidationError);
    expect(e.message).toBe("must divide window_seconds");
    expect(e.source.pointer).toBe("/data/attributes/bucket_seconds");
    await expect(
      createStatefulRule(ctx, viewer, { name: "v", match: { always: true } }),
    ).rejects.toBeInstanceOf(ForbiddenError);
  });

  it("fires at threshold within the window per group, cools down, and recovers when the window decays", async () => {
    clock.set("2026-03-02T00:00:00Z");
    const rule = await createStatefulRule(ctx, operator, {
      name: "auth-failures",
      signal: "log",
      match: { body_contains: "login failed" },
      group_by: ["user"],
      threshold: 3,
      window_seconds: 300,
      bucket_seconds: 60,
      cooldown_seconds: 120,
      alert: { title: "Repeated login failures for {{user}}", severity: "critical" },
    });
    const fail = async (user: string) => (await promoteLogs(ctx, [await log("login failed", { user })]))[0];
    expect((await fail("alice"))?.stateful_alerts).toEqual([]);
    clock.advance(30);
    expect((await fail("alice"))?.stateful_alerts).toEqual([]);
    expect((await fail("bob"))?.stateful_alerts).toEqual([]);
    clock.advance(30);
    const fired = (await fail("alice"))?.stateful_alerts ?? [];
    expect(fired).toHaveLength(1);
    expect(fired[0]).toMatchObject({
      title: "Repeated login failures for alice",
      severity: "critical",
      status: "pending",
      metadata: { incident_rule_name: "auth-failures", incident_group_values: { user: "alice" } },
    });
    // More records while open: same alert.
    expect((await fail("alice"))?.stateful_alerts).toEqual([]);
    // A log without the group key is ignored.
    expect((await promoteLogs(ctx, [await log("login failed", {})]))[0]?.stateful_alerts).toEqual([]);

    // Window decays: the sweep resolves it.
    clock.advance(400);
    const resolved = await sweepStatefulRules(ctx);
    expect(resolved.map((a) => a.id)).toContain(fired[0]?.id);
    const after = await db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${fired[0]?.id}`);
    expect(after).toMatchObject({ status: "resolved", resolved_by: "system" });

    const hist = await db.many<{ event_type: string }>(
      sql`SELECT event_type FROM stateful_alert_rule_history WHERE rule_id = ${rule.id} ORDER BY id`,
    );
    expect(hist.map((h) => h.event_type)).toEqual(["fire", "resolve"]);
    await updateStatefulRule(ctx, operator, rule.id, { enabled: false });
  });

  it("records cooldown instead of a new alert when the threshold is reached again too soon", async () => {
    clock.set("2026-03-03T00:00:00Z");
    const rule = await createStatefulRule(ctx, operator, {
      name: "cooldown-rule",
      match: { body_contains: "cooldown-probe" },
      threshold: 1,
      window_seconds: 60,
      bucket_seconds: 60,
      cooldown_seconds: 600,
      alert: { severity: "warning" },
    });
    const first = (await promoteLogs(ctx, [await log("cooldown-probe")]))[0]?.stateful_alerts ?? [];
    expect(first).toHaveLength(1);
    clock.advance(120);
    await sweepStatefulRules(ctx);
    const second = (await promoteLogs(ctx, [await log("cooldown-probe")]))[0]?.stateful_alerts ?? [];
    expect(second).toEqual([]);
    const hist = await db.many<{ event_type: string }>(
      sql`SELECT event_type FROM stateful_alert_rule_history WHERE rule_id = ${rule.id} ORDER BY id`,
    );
    expect(hist.map((h) => h.event_type)).toEqual(["fire", "resolve", "cooldown"]);
    clock.advance(700);
    const third = (await promoteLogs(ctx, [await log("cooldown-probe")]))[0]?.stateful_alerts ?? [];
    expect(third).toHaveLength(1);
    await updateStatefulRule(ctx, operator, rule.id, { enabled: false });
  });
});

describe("k8s node readiness flow (reference 7.4)", () => {
  it("node.not_ready opens one critical incident per node; node.ready resolves it", async () => {
    clock.set("2026-03-04T00:00:00Z");
    const nr = await publishK8sNodeReadiness(ctx, false, {
      cluster_id: "prod",
      node: "cp-1",
      role: "control-plane",
    });
    expect(nr).toMatchObject({
      published: true,
      event_type: "node.not_ready",
      cluster_id: "prod",
      node: "cp-1",
      role: "control-plane",
    });
    const log = await db.one(sql`SELECT * FROM logs WHERE id = ${nr.promotion[0]?.log_id}`);
    expect(log).toMatchObject({
      body: "Kubernetes control-plane node cp-1 is NotReady",
      attributes: {
        event_type: "node.not_ready",
        cluster_id: "prod",
        node: "cp-1",
        "node.role": "control-plane",
        hostname: "cp-1",
      },
    });
    const event = await db.one(sql`SELECT * FROM events WHERE log_id = ${log?.id}`);
    expect(event).toMatchObject({
      severity_id: 5,
      message: "Kubernetes control-plane node cp-1 is NotReady",
    });
    const open = await db.many<AlertRow>(
      sql`SELECT * FROM alerts WHERE metadata->>'incident_rule_name' = 'k8s_node_not_ready' AND status = 'pending'`,
    );
    expect(open).toHaveLength(1);
    expect(open[0]).toMatchObject({
      title: "Kubernetes control-plane node cp-1 is NotReady",
      severity: "critical",
      event_id: event?.id,
      metadata: { incident_group_values: { cluster_id: "prod", node: "cp-1" } },
    });

    // Repeated NotReady for the same node: still one incident; another node: its own.
    clock.advance(10);
    await publishK8sNodeReadiness(ctx, false, { cluster_id: "prod", node: "cp-1", role: "worker" });
    await publishK8sNodeReadiness(ctx, false, { cluster_id: "prod", node: "w-2" });
    const open2 = await db.many<AlertRow>(sql`SELECT * FROM alerts
      WHERE metadata->>'incident_rule_name' = 'k8s_node_not_ready' AND status = 'pending' ORDER BY triggered_at`);
    expect(open2.map((a) => a.title)).toEqual([
      "Kubernetes control-plane node cp-1 is NotReady",
      "Kubernetes worker node w-2 is NotReady",
    ]);

    clock.advance(10);
    const ready = await publishK8sNodeReadiness(ctx, true, { cluster_id: "prod", node: "cp-1" });
    expect(ready.event_type).toBe("node.ready");
    const cp1 = await db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${open[0]?.id}`);
    expect(cp1).toMatchObject({ status: "resolved", resolved_by: "system" });
    const w2 = await db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${open2[1]?.id}`);
    expect(w2?.status).toBe("pending");
    // The recovery rule never opens an incident by itself.
    await publishK8sNodeReadiness(ctx, true, { cluster_id: "prod", node: "never-down" });
    const forNever = await db.one(sql`SELECT count(*)::int AS n FROM alerts WHERE title LIKE '%never-down%'`);
    expect(forNever?.n).toBe(0);
  });

  it("concurrent NotReady reports for one node open exactly one incident", async () => {
    clock.set("2026-03-05T00:00:00Z");
    await Promise.all(
      Array.from({ length: 6 }, () =>
        publishK8sNodeReadiness(ctx, false, { cluster_id: "race", node: "r-1" }),
      ),
    );
    const open = await db.many<AlertRow>(sql`SELECT * FROM alerts
      WHERE metadata->'incident_group_values'->>'cluster_id' = 'race' AND status = 'pending'`);
    expect(open).toHaveLength(1);
  });

  it("requires cluster_id and node", async () => {
    await expect(publishK8sNodeReadiness(ctx, false, { node: "x" })).rejects.toBeInstanceOf(ValidationError);
    await expect(publishK8sNodeReadiness(ctx, false, { cluster_id: "x" })).rejects.toBeInstanceOf(
      ValidationError,
    );
  });
});
