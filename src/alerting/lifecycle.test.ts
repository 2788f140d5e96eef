import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import { SYSTEM_ACTOR } from "../access/actor.ts";
import {
  AuthenticationRequiredError,
  ForbiddenError,
  InvalidTransitionError,
  NotFoundError,
  ValidationError,
} from "../kernel/errors.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import {
  acknowledgeAlert,
  autoEscalate,
  escalateAlert,
  reopenAlert,
  resolveAlert,
  suppressAlert,
  triggerAlert,
} from "./actions.ts";
import { ALERT_STATE_MACHINE } from "./lifecycle.ts";
import { clearAlertsFor, raiseAlert } from "./raise.ts";
import { roleActor, testActor, testClock, testContext } from "./test-context.ts";
import type { AlertRow, AlertStatus } from "./types.ts";

let db: Db;
const clock = testClock();
let ctx: ReturnType<typeof testContext>;
const operator = roleActor("operator", [], "op@example.test");
const viewer = testActor("viewer", ["observability.alerts.view"]);
const admin = roleActor("admin", [], "admin@example.test");

beforeAll(async () => {
  db = (await createTestDatabase()).db;
  ctx = testContext(db, clock);
});
afterAll(async () => {
  await db?.close();
});

async function alertIn(status: AlertStatus): Promise<AlertRow> {
  const a = await triggerAlert(ctx, operator, { title: `alert in ${status}`, severity: "critical" });
  if (status === "acknowledged") await acknowledgeAlert(ctx, operator, a.id);
  if (status === "escalated") await escalateAlert(ctx, admin, a.id, { reason: "test" });
  if (status === "suppressed") await suppressAlert(ctx, admin, a.id);
  if (status === "resolved") await resolveAlert(ctx, operator, a.id);
  const row = await db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${a.id}`);
  expect(row?.status).toBe(status);
  return row as AlertRow;
}

describe("trigger", () => {
  it("starts pending with triggered_at = now and defaults", async () => {
    clock.set("2026-01-01T10:00:00Z");
    const a = await triggerAlert(ctx, operator, {
      title: "disk full",
      source_type: "device",
      device_uid: "dev-1",
    });
    expect(a.status).toBe("pending");
    expect(a.severity).toBe("warning");
    expect(a.triggered_at.toISOString()).toBe("2026-01-01T10:00:00.000Z");
    expect(a.escalation_level).toBe(0);
    expect(a.notification_count).toBe(0);
    expect(a.metadata).toEqual({});
  });

  it("requires a title and valid enums", async () => {
    await expect(triggerAlert(ctx, operator, { title: "" })).rejects.toBeInstanceOf(ValidationError);
    await expect(
      triggerAlert(ctx, operator, { title: "x", severity: "bad" as never }),
    ).rejects.toBeInstanceOf(ValidationError);
  });

  it("needs operator or observability.alerts.manage", async () => {
    await expect(triggerAlert(ctx, null, { title: "x" })).rejects.toBeInstanceOf(AuthenticationRequiredError);
    await expect(triggerAlert(ctx, viewer, { title: "x" })).rejects.toBeInstanceOf(ForbiddenError);
    const helpdesk = testActor("viewer", ["observability.alerts.manage"]);
    expect((await triggerAlert(ctx, helpdesk, { title: "x" })).status).toBe("pending");
  });
});

describe("acknowledge", () => {
  it("sets acknowledged_at and defaults acknowledged_by to the caller", async () => {
    const a = await alertIn("pending");
    clock.set("2026-01-01T11:00:00Z");
    const ack = await acknowledgeAlert(ctx, operator, a.id);
    expect(ack.status).toBe("acknowledged");
    expect(ack.acknowledged_by).toBe("op@example.test");
    expect(ack.acknowledged_by_user_id).toBe(operator.id);
    expect(ack.acknowledged_at?.toISOString()).toBe("2026-01-01T11:00:00.000Z");
  });

  it("keeps an explicit acknowledged_by and works from escalated", async () => {
    const a = await alertIn("escalated");
    const ack = await acknowledgeAlert(ctx, operator, a.id, {
      acknowledged_by: "oncall-bob",
      note: "looking",
    });
    expect(ack.status).toBe("acknowledged");
    expect(ack.acknowledged_by).toBe("oncall-bob");
  });

  it.each(["acknowledged", "resolved", "suppressed"] as const)(
    "is refused from %s and changes nothing",
    async (s) => {
      const a = await alertIn(s);
      const err = await acknowledgeAlert(ctx, operator, a.id).catch((e) => e);
      expect(err).toBeInstanceOf(InvalidTransitionError);
      expect(err.status).toBe(400);
      expect(err.extra).toMatchObject({ operation: "acknowledge", current_state: s });
      const after = await db.one<AlertRow>(sql`SELECT * FROM alerts WHERE id = ${a.id}`);
      expect(after).toEqual(a);
    },
  );

  it("needs permission; unknown ids are 404", async () => {
    const a = await alertIn("pending");
    await expect(acknowledgeAlert(ctx, viewer, a.id)).rejects.toBeInstanceOf(ForbiddenError);
    const desk = testActor("viewer", ["alerts.acknowledge"]);
    expect((await acknowledgeAlert(ctx, desk, a.id)).status).toBe("acknowledged");
    await expect(
      acknowledgeAlert(ctx, operator, "00000000-0000-4000-8000-000000000999"),
    ).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe("resolve", () => {
  it.each(["pending", "acknowledged", "escalated"] as const)("resolves from %s", async (s) => {
    const a = await alertIn(s);
    clock.set("2026-01-01T12:00:00Z");
    const r = await resolveAlert(ctx, operator, a.id, { resolution_note: "fixed the disk" });
    expect(r.status).toBe("resolved");
    expect(r.resolved_by).toBe("op@example.test");
    expect(r.resolution_note).toBe("fixed the disk");
    expect(r.resolved_at?.toISOString()).toBe("2026-01-01T12:00:00.000Z");
  });

  it.each(["resolved", "suppressed"] as const)("is refused from %s", async (s) => {
    const a = await alertIn(s);
    await expect(resolveAlert(ctx, operator, a.id)).rejects.toBeInstanceOf(InvalidTransitionError);
  });
});

describe("escalate, suppress, reopen", () => {
  it("escalate raises the level from pending and acknowledged only", async () => {
    const a = await alertIn("pending");
    const e = await escalateAlert(ctx, admin, a.id, { reason: "no answer" });
    expect(e).toMatchObject({ status: "escalated", escalation_level: 1, escalation_reason: "no answer" });
    expect(e.escalated_at).toBeInstanceOf(Date);
    await expect(escalateAlert(ctx, admin, a.id)).rejects.toBeInstanceOf(InvalidTransitionError);
    const b = await alertIn("acknowledged");
    expect((await escalateAlert(ctx, admin, b.id)).status).toBe("escalated");
    const c = await alertIn("resolved");
    await expect(escalateAlert(ctx, admin, c.id)).rejects.toBeInstanceOf(InvalidTransitionError);
  });

  it("escalate/suppress/reopen are admin operations", async () => {
    const a = await alertIn("pending");
    await expect(escalateAlert(ctx, operator, a.id)).rejects.toBeInstanceOf(ForbiddenError);
    await expect(suppressAlert(ctx, operator, a.id)).rejects.toBeInstanceOf(ForbiddenError);
  });

  it("suppress from open states; reopen from resolved and suppressed clears resolution", async () => {
    const a = await alertIn("escalated");
    const s = await suppressAlert(ctx, admin, a.id, { until: "2026-02-01T00:00:00Z" });
    expect(s.status).toBe("suppressed");
    expect(s.suppressed_until?.toISOString()).toBe("2026-02-01T00:00:00.000Z");
    await expect(suppressAlert(ctx, admin, a.id)).rejects.toBeInstanceOf(InvalidTransitionError);
    const r = await reopenAlert(ctx, admin, a.id);
    expect(r).toMatchObject({ status: "pending", suppressed_until: null });
    await resolveAlert(ctx, operator, a.id);
    const again = await reopenAlert(ctx, admin, a.id);
    expect(again).toMatchObject({ status: "pending", resolved_at: null, resolved_by: null });
    await expect(reopenAlert(ctx, admin, a.id)).rejects.toBeInstanceOf(InvalidTransitionError);
  });

  it("the machine lists exactly the documented source states", () => {
    expect(ALERT_STATE_MACHINE.transitions).toEqual({
      acknowledge: { from: ["pending", "escalated"], to: "acknowledged" },
      resolve: { from: ["pending", "acknowledged", "escalated"], to: "resolved" },
      escalate: { from: ["pending", "acknowledged"], to: "escalated" },
      suppress: { from: ["pending", "acknowledged", "escalated"], to: "suppressed" },
      reopen: { from: ["resolved", "suppressed"], to: "pending" },
    });
  });

  it("concurrent acknowledgements: exactly one wins", async () => {
    const a = await alertIn("pending");
    const results = await Promise.allSettled([
      acknowledgeAlert(ctx, operator, a.id),
      acknowledgeAlert(ctx, operator, a.id),
      acknowledgeAlert(ctx, operator, a.id),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results)
      if (r.status === "rejected") expect(r.reason).toBeInstanceOf(InvalidTransitionError);
  });
});

describe("auto-escalation job", () => {
  it("escalates pending critical/emergency alerts older than 30 minutes only", async () => {
    clock.set("2026-01-05T00:00:00Z");
    const crit = await triggerAlert(ctx, operator, { title: "old critical", severity: "critical" });
    const warn = await triggerAlert(ctx, operator, { title: "old warning", severity: "warning" });
    const acked = await triggerAlert(ctx, operator, { title: "old acked", severity: "emergency" });
    await acknowledgeAlert(ctx, operator, acked.id);
    clock.advance(29 * 60);
    const young = await triggerAlert(ctx, operator, { title: "young", severity: "emergency" });
    // Earlier tests left older pending criticals in this database: only look at ours.
    const ours = [crit.id, warn.id, acked.id, young.id];
    const mine = (rows: AlertRow[]) => rows.filter((r) => ours.includes(r.id));
    expect(mine(await autoEscalate(ctx))).toEqual([]);
    clock.advance(2 * 60);
    const escalated = mine(await autoEscalate(ctx));
    expect(escalated.map((a) => a.id)).toEqual([crit.id]);
    expect(escalated[0]).toMatchObject({
      status: "escalated",
      escalation_level: 1,
      escalation_reason: "unacknowledged for 30 minutes",
    });
    expect(mine(await autoEscalate(ctx))).toEqual([]);
    const rows = await db.many<AlertRow>(
      sql`SELECT * FROM alerts WHERE id IN (${warn.id}, ${acked.id}, ${young.id})`,
    );
    expect(rows.map((r) => r.status).sort()).toEqual(["acknowledged", "pending", "pending"]);
  });
});

describe("raiseAlert / clearAlertsFor (monitoring entry points)", () => {
  const checkId = "11111111-1111-4111-8111-111111111111";

  it("opens one alert per check and reason, then clears them", async () => {
    const first = await raiseAlert(ctx, {
      title: "http check failing",
      severity: "critical",
      service_check_id: checkId,
      reason: "consecutive_failures",
      metric_name: "consecutive_failures",
      metric_value: 3,
      threshold_value: 3,
      comparison: "greater_than",
    });
    expect(first.created).toBe(true);
    expect(first.alert).toMatchObject({
      status: "pending",
      source_type: "service_check",
      source_id: checkId,
    });
    const again = await raiseAlert(ctx, {
      title: "http check failing",
      service_check_id: checkId,
      reason: "consecutive_failures",
    });
    expect(again).toMatchObject({ created: false, alert: { id: first.alert.id } });
    const slow = await raiseAlert(ctx, {
      title: "slow",
      service_check_id: checkId,
      reason: "critical_threshold",
    });
    expect(slow.created).toBe(true);
    const cleared = await clearAlertsFor(ctx, { serviceCheckId: checkId });
    expect(cleared.map((a) => a.id).sort()).toEqual([first.alert.id, slow.alert.id].sort());
    for (const c of cleared) expect(c).toMatchObject({ status: "resolved", resolved_by: "system" });
    expect(await clearAlertsFor(ctx, { serviceCheckId: checkId })).toEqual([]);
    const reopened = await raiseAlert(ctx, {
      title: "failing again",
      service_check_id: checkId,
      reason: "consecutive_failures",
    });
    expect(reopened.created).toBe(true);
    expect(reopened.alert.id).not.toBe(first.alert.id);
  });

  it("concurrent raises of one condition open one alert", async () => {
    const id = "22222222-2222-4222-8222-222222222222";
    const all = await Promise.all(
      Array.from({ length: 5 }, () =>
        raiseAlert(ctx, { title: "x", service_check_id: id, reason: "failing" }),
      ),
    );
    expect(new Set(all.map((r) => r.alert.id)).size).toBe(1);
    expect(all.filter((r) => r.created)).toHaveLength(1);
    void SYSTEM_ACTOR;
  });
});
