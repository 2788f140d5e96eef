import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestContext } from "../../test/helpers/context.ts";
import type { AppContext } from "../kernel/context.ts";
import { AppError } from "../kernel/errors.ts";
import { sql } from "../storage/sql.ts";
import { type CompositeRow, evaluateComposite, evaluateDueComposites } from "./composite.ts";
import { parseCompositeInputs, resolveCheckInputs } from "./composite-inputs.ts";
import { evaluateVerdict, type InputState } from "./composite-verdict.ts";

const s = (key: string, last: InputState["last"], extra: Partial<InputState> = {}): InputState => ({
  key,
  last,
  stale: false,
  critical: false,
  ...extra,
});

describe("composite verdict", () => {
  it("all_healthy: healthy only when every input is healthy and fresh", () => {
    expect(evaluateVerdict("all_healthy", [s("a", "healthy"), s("b", "healthy")])).toMatchObject({
      verdict: "healthy",
      status: "healthy",
    });
    expect(evaluateVerdict("all_healthy", [s("a", "healthy"), s("b", "down")]).verdict).toBe("degraded");
    expect(
      evaluateVerdict("all_healthy", [s("a", "healthy"), s("b", "down", { critical: true })]).verdict,
    ).toBe("down");
    expect(evaluateVerdict("all_healthy", [s("a", "degraded", { critical: true })]).verdict).toBe("degraded");
    expect(evaluateVerdict("all_healthy", []).verdict).toBe("unknown");
  });

  it("a stale input counts as unknown for the verdict, and the status keeps its last state", () => {
    const out = evaluateVerdict("all_healthy", [s("a", "healthy"), s("b", "healthy", { stale: true })]);
    expect(out.verdict).toBe("unknown");
    expect(out.status).toBe("healthy");
    expect(out.message).toBe("unknown: stale input b counted as unknown");
    // A stale critical input that last said down cannot make the verdict down…
    const stale = evaluateVerdict("all_healthy", [
      s("a", "healthy"),
      s("b", "down", { stale: true, critical: true }),
    ]);
    expect(stale).toMatchObject({ verdict: "unknown", status: "down" });
    // …but known trouble elsewhere still outranks the unknown.
    const mixed = evaluateVerdict("all_healthy", [s("a", "down"), s("b", "healthy", { stale: true })]);
    expect(mixed.verdict).toBe("degraded");
    expect(mixed.message).toBe("degraded: a down; stale input b counted as unknown");
  });

  it("any_healthy: one healthy path keeps the composite up (degraded)", () => {
    expect(evaluateVerdict("any_healthy", [s("a", "healthy"), s("b", "down")]).verdict).toBe("degraded");
    expect(evaluateVerdict("any_healthy", [s("a", "down"), s("b", "down")]).verdict).toBe("down");
    expect(evaluateVerdict("any_healthy", [s("a", "healthy", { stale: true })]).verdict).toBe("unknown");
    expect(evaluateVerdict("any_healthy", [s("a", "healthy"), s("b", "healthy")]).verdict).toBe("healthy");
  });
});

describe("composite inputs", () => {
  const bad = (raw: unknown) => {
    try {
      parseCompositeInputs(raw);
    } catch (e) {
      return e instanceof AppError ? `${e.status} ${e.message}` : String(e);
    }
    return "accepted";
  };
  it("reject malformed inputs with a 422 naming the member", () => {
    expect(bad([])).toBe("422 inputs must be a list of 1 to 50 inputs");
    expect(bad([{ key: "a", kind: "check", check_name: "x", __proto__x: 1 }])).toMatch(
      /^422 unknown member '__proto__x'/,
    );
    expect(bad([{ key: "a", kind: "check" }])).toBe(
      "422 a check input names its check by check_id or check_name",
    );
    expect(bad([{ key: "a", kind: "metric", metric: "m", op: "~", threshold: 1 }])).toMatch(
      /^422 op must be one of/,
    );
    expect(bad([{ key: "a", kind: "metric", metric: "m", op: ">", threshold: "1" }])).toBe(
      "422 threshold must be a finite number",
    );
    expect(
      bad([
        { key: "a", kind: "check", check_name: "x" },
        { key: "a", kind: "check", check_name: "y" },
      ]),
    ).toBe("422 two inputs have the key 'a'");
    expect(bad([{ key: "a", kind: "metric", metric: "m", op: ">", threshold: 1 }])).toBe("accepted");
  });
});

describe("composite evaluation", () => {
  let ctx: AppContext;
  const clock = Date.parse("2026-11-24T12:00:00Z");
  const at = (secondsAgo: number) => new Date(clock - secondsAgo * 1000);
  beforeAll(async () => {
    ctx = await createTestContext();
    ctx.now = () => new Date(clock);
  });
  afterAll(async () => {
    await ctx?.db.close();
  });

  it("reads checks and metric thresholds, marks stale inputs and records one result per evaluation", async () => {
    await ctx.db.query(sql`
      INSERT INTO service_checks (name, check_type, target, port, interval_seconds, last_result, last_check_at) VALUES
        ('web', 'http', '127.0.0.1', 80, 60, 'success', ${at(30)}),
        ('db', 'tcp', '127.0.0.1', 5432, 60, 'success', ${at(600)})`);
    await ctx.db.query(sql`
      INSERT INTO timeseries_metrics ("timestamp", metric_name, metric_type, device_id, value)
      VALUES (${at(20)}, 'latency_ms', 'tcp', 'dev-1', 40), (${at(10)}, 'latency_ms', 'tcp', 'dev-1', 80)`);
    const inputs = parseCompositeInputs([
      { key: "web", kind: "check", check_name: "WEB", critical: true },
      { key: "db", kind: "check", check_name: "db" },
      { key: "lat", kind: "metric", metric: "latency_ms", device_uid: "dev-1", op: ">", threshold: 50 },
    ]);
    await resolveCheckInputs(ctx.db, inputs);
    expect(inputs[0]).toMatchObject({ check_name: "web" });
    const row = await ctx.db.one<{ id: string }>(sql`
      INSERT INTO composite_checks (slug, name, inputs) VALUES ('core-path', 'Core path', ${JSON.stringify(inputs)}::jsonb)
      RETURNING id`);
    const composite: CompositeRow = {
      id: row?.id as string,
      slug: "core-path",
      name: "Core path",
      device_uid: null,
      inputs,
      rule: "all_healthy",
      interval_seconds: 60,
    };
    const r = await evaluateComposite(ctx.db, composite, new Date(clock));
    // avg(40, 80) = 60 > 50 breaches; db's last result is 10 minutes old (overdue after 3 min).
    expect(r.verdict).toBe("degraded");
    expect(r.status).toBe("degraded");
    expect(r.inputs.map((i) => [i.key, i.status, i.last_status, i.stale])).toEqual([
      ["web", "healthy", "healthy", false],
      ["db", "unknown", "healthy", true],
      ["lat", "down", "down", false],
    ]);
    expect(r.inputs[2]?.value).toBe(60);
    expect(r.message).toBe("degraded: lat down; stale input db counted as unknown");

    // The metric recovers (window moves past the samples) → no samples → unknown.
    const later = new Date(clock + 600_000);
    const r2 = await evaluateComposite(ctx.db, composite, later);
    expect(r2.inputs.find((i) => i.key === "lat")).toMatchObject({ status: "unknown", stale: true });
    expect(r2.verdict).toBe("unknown");

    const stored = await ctx.db.many<{ verdict: string; stale_inputs: number; check_slug: string }>(
      sql`SELECT verdict, stale_inputs, check_slug FROM composite_results ORDER BY evaluated_at`,
    );
    expect(stored).toEqual([
      { verdict: "degraded", stale_inputs: 1, check_slug: "core-path" },
      { verdict: "unknown", stale_inputs: 3, check_slug: "core-path" },
    ]);
    const perInput = await ctx.db.many<{ input_key: string; input_value: string; input_stale: boolean }>(
      sql`SELECT input_key, input_value, input_stale FROM composite_result_inputs
          WHERE evaluated_at = ${new Date(clock)} ORDER BY input_key`,
    );
    expect(perInput).toEqual([
      { input_key: "db", input_value: "unknown", input_stale: true },
      { input_key: "lat", input_value: "down", input_stale: false },
      { input_key: "web", input_value: "healthy", input_stale: false },
    ]);
  });

  it("the leader evaluates due composites and schedules the next run one interval later", async () => {
    await ctx.db.query(sql`UPDATE composite_checks SET next_run_at = NULL`);
    expect(await evaluateDueComposites(ctx)).toBe(1);
    expect(await evaluateDueComposites(ctx)).toBe(0);
    const c = await ctx.db.one<{ next_run_at: Date; last_verdict: string }>(
      sql`SELECT next_run_at, last_verdict FROM composite_checks WHERE slug = 'core-path'`,
    );
    expect(c?.next_run_at.toISOString()).toBe(new Date(clock + 60_000).toISOString());
    expect(c?.last_verdict).toBe("degraded");
  });

  it("a deleted input check is unknown and stale, not an error", async () => {
    await ctx.db.query(sql`DELETE FROM service_checks WHERE name = 'web'`);
    const c = await ctx.db.one<CompositeRow>(
      sql`SELECT id, slug, name, device_uid, inputs, rule, interval_seconds FROM composite_checks`,
    );
    const r = await evaluateComposite(ctx.db, c as CompositeRow, new Date(clock));
    expect(r.inputs[0]).toMatchObject({
      key: "web",
      status: "unknown",
      stale: true,
      note: "the check no longer exists",
    });
  });
});
