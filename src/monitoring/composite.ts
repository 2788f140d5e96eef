/**
 * Evaluating composite checks: read each input's latest state, decide the verdict
 * (composite-verdict.ts) and record one composite_results row. The leader evaluates the due
 * composites every few seconds; the `evaluate` operation evaluates one on demand.
 */
import type { AppContext } from "../kernel/context.ts";
import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import type { CheckInput, CompositeInput, MetricInput } from "./composite-inputs.ts";
import {
  breaches,
  type CompositeRule,
  evaluateVerdict,
  type InputState,
  type Verdict,
  verdictOfCheckResult,
} from "./composite-verdict.ts";
import { overdueAfterSeconds } from "./overdue.ts";

export type CompositeRow = {
  id: string;
  slug: string;
  name: string;
  device_uid: string | null;
  inputs: CompositeInput[];
  rule: CompositeRule;
  interval_seconds: number;
};

/** One input as recorded in composite_results.inputs (and the `input_*` SRQL stats fields). */
export interface InputDetail {
  key: string;
  kind: "check" | "metric";
  ref: string;
  /** The state the verdict used: `unknown` when stale. */
  status: Verdict;
  /** The latest state observed, staleness ignored. */
  last_status: Verdict;
  stale: boolean;
  critical: boolean;
  observed_at: string | null;
  age_seconds: number | null;
  max_age_seconds: number;
  value?: number | null;
  note?: string;
}

export interface EvaluationResult {
  id: string;
  verdict: Verdict;
  status: Verdict;
  message: string;
  inputs: InputDetail[];
  evaluated_at: Date;
}

function ageOf(at: Date | null, now: Date): number | null {
  return at ? Math.max(0, Math.round((now.getTime() - at.getTime()) / 1000)) : null;
}

function detail(
  input: CompositeInput,
  ref: string,
  last: Verdict,
  observedAt: Date | null,
  maxAge: number,
  now: Date,
  extra: Partial<InputDetail> = {},
): InputDetail {
  const age = ageOf(observedAt, now);
  const stale = age === null || age > maxAge;
  return {
    key: input.key,
    kind: input.kind,
    ref,
    status: stale ? "unknown" : last,
    last_status: last,
    stale,
    critical: input.critical,
    observed_at: observedAt?.toISOString() ?? null,
    age_seconds: age,
    max_age_seconds: maxAge,
    ...extra,
  };
}

async function checkDetail(tx: Queryable, input: CheckInput, now: Date): Promise<InputDetail> {
  const row = await tx.one<{
    name: string;
    last_result: string | null;
    last_check_at: Date | null;
    interval_seconds: number;
  }>(
    sql`SELECT name, last_result, last_check_at, interval_seconds FROM service_checks WHERE id = ${input.check_id}::uuid`,
  );
  if (!row) {
    return detail(input, input.check_name, "unknown", null, input.max_age_seconds ?? 0, now, {
      note: "the check no longer exists",
    });
  }
  const maxAge = input.max_age_seconds ?? overdueAfterSeconds(row.interval_seconds);
  const last = row.last_check_at ? verdictOfCheckResult(row.last_result) : "unknown";
  return detail(input, row.name, last, row.last_check_at, maxAge, now, {
    ...(row.last_check_at ? {} : { note: "the check has no result yet" }),
  });
}

async function metricDetail(tx: Queryable, input: MetricInput, now: Date): Promise<InputDetail> {
  const since = new Date(now.getTime() - input.window_seconds * 1000);
  const row = await tx.one<{
    n: string;
    avg: number | null;
    min: number | null;
    max: number | null;
    last: number | null;
    latest: Date | null;
  }>(sql`
    SELECT count(*) AS n, avg(value) AS avg, min(value) AS min, max(value) AS max,
           (array_agg(value ORDER BY "timestamp" DESC))[1] AS last, max("timestamp") AS latest
    FROM timeseries_metrics
    WHERE metric_name = ${input.metric}
      AND (${input.device_uid}::text IS NULL OR device_id = ${input.device_uid}::text)
      AND "timestamp" >= ${since.toISOString()}::timestamptz AND "timestamp" <= ${now.toISOString()}::timestamptz
      AND value IS NOT NULL`);
  const ref = `${input.agg}(${input.metric}) ${input.op} ${input.threshold}`;
  const maxAge = input.max_age_seconds ?? input.window_seconds;
  const value = row && Number(row.n) > 0 ? row[input.agg] : null;
  if (value === null || value === undefined) {
    return detail(input, ref, "unknown", null, maxAge, now, {
      value: null,
      note: `no samples in the last ${input.window_seconds}s`,
    });
  }
  const v = Number(value);
  const last: Verdict = breaches(v, input.op, input.threshold) ? "down" : "healthy";
  return detail(input, ref, last, row?.latest ?? null, maxAge, now, { value: v });
}

/** Evaluate one composite and record the result (in `tx`, so an operation's response sees it). */
export async function evaluateComposite(
  tx: Queryable,
  c: CompositeRow,
  now: Date,
): Promise<EvaluationResult> {
  const inputs: InputDetail[] = [];
  for (const input of c.inputs) {
    inputs.push(
      input.kind === "check" ? await checkDetail(tx, input, now) : await metricDetail(tx, input, now),
    );
  }
  const states: InputState[] = inputs.map((i) => ({
    key: i.key,
    last: i.last_status,
    stale: i.stale,
    critical: i.critical,
  }));
  const outcome = evaluateVerdict(c.rule, states);
  const stale = inputs.filter((i) => i.stale).length;
  const row = await tx.one<{ id: string }>(sql`
    INSERT INTO composite_results (composite_id, check_slug, check_name, verdict, status, message, device_uid,
                                   stale_inputs, inputs, evaluated_at)
    VALUES (${c.id}::uuid, ${c.slug}, ${c.name}, ${outcome.verdict}, ${outcome.status}, ${outcome.message},
            ${c.device_uid}, ${stale}, ${JSON.stringify(inputs)}::jsonb, ${now.toISOString()}::timestamptz)
    RETURNING id`);
  // Scheduler bookkeeping (not an API write): the next due time keeps the interval's phase.
  await tx.query(sql`
    UPDATE composite_checks SET last_evaluated_at = ${now.toISOString()}::timestamptz,
      last_verdict = ${outcome.verdict},
      next_run_at = ${now.toISOString()}::timestamptz + interval_seconds * interval '1 second'
    WHERE id = ${c.id}::uuid`);
  return { id: (row as { id: string }).id, ...outcome, inputs, evaluated_at: now };
}

export const COMPOSITE_COLUMNS = sql`id, slug, name, device_uid, inputs, rule, interval_seconds`;

/** Leader job: evaluate every enabled composite that is due (bounded per pass). */
export async function evaluateDueComposites(ctx: AppContext, limit = 200): Promise<number> {
  const now = ctx.now();
  const due = await ctx.db.many<CompositeRow>(sql`
    SELECT ${COMPOSITE_COLUMNS} FROM composite_checks
    WHERE enabled AND (next_run_at IS NULL OR next_run_at <= ${now.toISOString()}::timestamptz)
    ORDER BY next_run_at NULLS FIRST LIMIT ${limit}`);
  for (const c of due) {
    try {
      await evaluateComposite(ctx.db, c, now);
    } catch (err) {
      // One broken composite must not stop the others; the next pass retries it.
      ctx.log.warn({ err, composite: c.slug }, "composite check evaluation failed");
    }
  }
  return due.length;
}

/** Results older than the retention are pruned with the poll jobs. */
export async function pruneCompositeResults(ctx: AppContext, retentionDays: number): Promise<void> {
  await ctx.db.query(
    sql`DELETE FROM composite_results WHERE evaluated_at < ${ctx.now().toISOString()}::timestamptz - ${retentionDays} * interval '1 day'`,
  );
}
