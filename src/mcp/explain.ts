/**
 * "Why is this check red?" — everything an operator would open four pages for, gathered as
 * the caller (each part under its own read policy; a part the caller may not see is named,
 * not silently dropped) and summarised as findings in plain words.
 */
import type { Actor } from "../access/actor.ts";
import { hasPermission } from "../access/actor.ts";
import { deviceJson } from "../inventory/device.ts";
import { getDevice } from "../inventory/devices.ts";
import type { AppContext } from "../kernel/context.ts";
import { AppError } from "../kernel/errors.ts";
import { runQuery } from "../srql/run.ts";
import { listResource, readResource } from "./v2.ts";

type Attrs = Record<string, unknown>;

async function part<T>(fn: () => Promise<T>): Promise<T | { unavailable: string }> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof AppError && err.status < 500) return { unavailable: err.message };
    throw err;
  }
}

function attrsOf(doc: Record<string, unknown>): Attrs & { id: string } {
  const d = doc.data as { id: string; attributes: Attrs };
  return { id: d.id, ...d.attributes };
}

export async function explainCheck(
  ctx: AppContext,
  actor: Actor,
  checkId: string,
): Promise<Record<string, unknown>> {
  // The check itself is required: 404/403 propagate as the tool's error.
  const check = attrsOf(await readResource(ctx, actor, "service-check", checkId));
  const findings: string[] = [];

  const agentUid = typeof check.agent_uid === "string" ? check.agent_uid : null;
  const deviceUid = typeof check.device_uid === "string" ? check.device_uid : null;

  const agent = agentUid
    ? await part(async () => attrsOf(await readResource(ctx, actor, "agent", agentUid)))
    : null;
  const device = deviceUid
    ? await part(async () => deviceJson(await getDevice(ctx.db, actor, deviceUid)))
    : null;
  const recent = hasPermission(actor, "analytics.view")
    ? await part(async () => {
        // checkId is a validated uuid (hex and dashes only), so it cannot change the query's shape.
        const r = await runQuery(ctx, actor, {
          query: `in:services service_check_id:"${checkId}" time:last_24h sort:timestamp:desc`,
          limit: 10,
        });
        return r.results.map((row) => ({
          timestamp: row.timestamp,
          status: row.status,
          available: row.available,
          response_time_ms: row.response_time_ms,
          message: row.message,
          agent_id: row.agent_id,
        }));
      })
    : { unavailable: "recent results need the analytics.view permission" };
  const alerts = await part(async () => {
    const doc = await listResource(ctx, actor, "alert", {
      filter: { service_check_id: { eq: checkId }, status: { in: ["pending", "acknowledged", "escalated"] } },
      page: { limit: "20" },
      sort: "-triggered_at",
    });
    return ((doc.data as { id: string; attributes: Attrs }[]) ?? []).map((r) => ({
      id: r.id,
      title: r.attributes.title,
      severity: r.attributes.severity,
      status: r.attributes.status,
      triggered_at: r.attributes.triggered_at,
    }));
  });

  if (check.enabled !== true) findings.push("The check is disabled: it does not run and raises no alerts.");
  if (check.last_check_at == null && check.enabled === true) {
    findings.push(
      "The check has not produced a result yet; it first runs within one interval of being created.",
    );
  }
  if (check.is_stale === true) {
    findings.push(
      `No result has arrived for more than three intervals (${check.interval_seconds} s each): the last result is stale, so the check is overdue — look at the agent that runs it.`,
    );
  }
  if (check.last_result && check.last_result !== "success") {
    findings.push(
      `The last result was ${String(check.last_result)}${check.last_error ? `: ${String(check.last_error)}` : ""}.`,
    );
  }
  if (typeof check.consecutive_failures === "number" && check.consecutive_failures > 0) {
    findings.push(
      `It has failed ${check.consecutive_failures} time(s) in a row (retries: ${check.retries}).`,
    );
  }
  if (agentUid === null) {
    findings.push("No agent is assigned: the check runs on the embedded agent (NETMON_UNASSIGNED_CHECKS).");
  } else if (agent && !("unavailable" in agent)) {
    if (agent.status !== "connected") {
      findings.push(
        `Its agent ${agentUid} is ${String(agent.status)}${agent.status_reason ? ` (${String(agent.status_reason)})` : ""}: results cannot arrive until it reconnects.`,
      );
    }
  }
  if (device && !("unavailable" in device) && device.is_available === false) {
    findings.push(`The device ${deviceUid} it monitors is marked unavailable.`);
  }
  if (Array.isArray(alerts) && alerts.length > 0) {
    findings.push(`${alerts.length} open alert(s) concern this check.`);
  }
  if (findings.length === 0)
    findings.push("The check is enabled, current and its last result was successful.");

  return { check, findings, agent, device, recent_results: recent, open_alerts: alerts };
}
