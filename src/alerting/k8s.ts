/**
 * Kubernetes node readiness incidents (reference 7.4, 2.4 "K8s probe actions").
 *
 * A readiness flip is emitted as an internal log (source `k8s`, attributes.event_type
 * `node.not_ready` / `node.ready`); the seeded event rule `k8s_node_readiness` promotes it to
 * an OCSF event, and the managed stateful rule `k8s_node_not_ready` (signal `event`, group
 * `cluster_id`,`node`, threshold 1) opens one critical alert per (cluster, node); a
 * `node.ready` event matches the rule's `alert.recover_match` and resolves it.
 */
import type { AppContext } from "../kernel/context.ts";
import { ValidationError } from "../kernel/errors.ts";
import { type PromotionResult, promoteLogs } from "./event-rules.ts";
import { writeInternalLog } from "./internal-log.ts";

export interface K8sProbeInput {
  cluster_id?: unknown;
  node?: unknown;
  role?: unknown;
}

export interface K8sProbeResult {
  published: true;
  event_type: "node.not_ready" | "node.ready";
  cluster_id: string;
  node: string;
  role: "control-plane" | "worker";
}

function requiredString(v: unknown, field: string): string {
  if (typeof v !== "string" || v.trim() === "") {
    throw new ValidationError(`${field} is required`, { source: { pointer: `/data/${field}` } });
  }
  return v.trim();
}

/** Emit the internal log of a readiness flip and run it through promotion. */
export async function publishK8sNodeReadiness(
  ctx: AppContext,
  ready: boolean,
  input: K8sProbeInput,
): Promise<K8sProbeResult & { promotion: PromotionResult[] }> {
  const cluster = requiredString(input.cluster_id, "cluster_id");
  const node = requiredString(input.node, "node");
  const role = input.role === "control-plane" ? "control-plane" : "worker";
  const eventType = ready ? "node.ready" : "node.not_ready";
  const log = await writeInternalLog(ctx, {
    source: "k8s",
    service_name: "k8s",
    severity_text: ready ? "info" : "critical",
    body: `Kubernetes ${role} node ${node} is ${ready ? "Ready" : "NotReady"}`,
    attributes: { event_type: eventType, cluster_id: cluster, node, "node.role": role, hostname: node },
    host: node,
  });
  const promotion = await promoteLogs(ctx, [log]);
  return { published: true, event_type: eventType, cluster_id: cluster, node, role, promotion };
}
