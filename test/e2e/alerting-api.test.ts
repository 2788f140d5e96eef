/**
 * Alerting over real HTTP: alerts lifecycle routes, k8s probe endpoints, event-rule
 * permission semantics (spec 4.1 behaviours 1–3), stateful rules (4–5), the notification
 * resources and end-to-end webhook delivery by the running notifier.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { createChannel } from "../../src/alerting/notifications/config.ts";
import { createRoleProfile, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

const J = "application/vnd.api+json";

interface Res {
  status: number;
  type: string | null;
  body: {
    data?: unknown;
    errors?: {
      status: string;
      code: string;
      detail: string;
      source?: Record<string, string>;
      meta?: Record<string, unknown>;
    }[];
    [k: string]: unknown;
  };
}

let server: TestServer;
const tokens: Record<string, string> = {};

async function call(method: string, path: string, token: string | null, body?: unknown): Promise<Res> {
  const headers: Record<string, string> = { accept: J };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = J;
  const res = await server.fetch(`/api/v2${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, type: res.headers.get("content-type"), body: text ? JSON.parse(text) : {} };
}

type Resource = { id: string; type: string; attributes: Record<string, unknown> };
const one = (r: Res) => r.body.data as Resource;
const many = (r: Res) => r.body.data as Resource[];

// Loopback webhook receiver.
const received: Record<string, unknown>[] = [];
let hookServer: http.Server;
let hookUrl: string;

beforeAll(async () => {
  server = await startTestServer();
  for (const role of ["viewer", "operator", "admin"] as const) tokens[role] = await tokenFor(server, role);
  hookServer = http.createServer((req, res) => {
    let data = "";
    req.on("data", (c) => {
      data += c;
    });
    req.on("end", () => {
      received.push(JSON.parse(data));
      res.end("ok");
    });
  });
  await new Promise<void>((r) => hookServer.listen(0, "127.0.0.1", r));
  hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}/hook`;
});

afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => (hookServer ? hookServer.close(() => r()) : r()));
});

describe("alerts", () => {
  it("trigger, list, filter, active/pending, acknowledge, resolve, invalid transitions", async () => {
    expect((await call("GET", "/alerts", null)).status).toBe(401);
    const denied = await call("POST", "/alerts", tokens.viewer as string, {
      data: { type: "alert", attributes: { title: "nope" } },
    });
    expect(denied.status).toBe(403);

    const created = await call("POST", "/alerts", tokens.operator as string, {
      data: {
        type: "alert",
        attributes: {
          title: "CPU hot",
          severity: "critical",
          source_type: "device",
          device_uid: "dev-9",
          metric_value: 97.5,
          comparison: "greater_than",
        },
      },
    });
    expect(created.status).toBe(201);
    expect(created.type).toContain(J);
    const alert = one(created);
    expect(alert.type).toBe("alert");
    expect(alert.attributes).toMatchObject({
      title: "CPU hot",
      status: "pending",
      severity: "critical",
      escalation_level: 0,
      notification_count: 0,
    });
    expect(alert.attributes).not.toHaveProperty("incident_key");
    await call("POST", "/alerts", tokens.operator as string, {
      data: { type: "alert", attributes: { title: "Info only", severity: "info" } },
    });

    const crit = await call("GET", "/alerts?filter[severity][eq]=critical", tokens.viewer as string);
    expect(crit.status).toBe(200);
    expect(many(crit).map((a) => a.attributes.title)).toEqual(["CPU hot"]);
    const badFilter = await call("GET", "/alerts?filter[severity][eq]=huge", tokens.viewer as string);
    expect(badFilter.status).toBe(400);

    const active = await call("GET", "/alerts/active", tokens.viewer as string);
    expect(many(active).map((a) => a.id)).toContain(alert.id);
    expect((await call("GET", "/alerts/active?page[limit]=1", tokens.viewer as string)).status).toBe(400);
    const pending = await call("GET", "/alerts/pending?page[limit]=10", tokens.viewer as string);
    expect(many(pending).map((a) => a.id)).toContain(alert.id);

    const viewerAck = await call("PATCH", `/alerts/${alert.id}/acknowledge`, tokens.viewer as string, {
      data: { type: "alert", id: alert.id, attributes: {} },
    });
    expect(viewerAck.status).toBe(403);

    const opUser = await createUser(server, { role: "operator", email: "oncall@example.test" });
    const opToken = await tokenFor(server, { id: opUser.id });
    const ack = await call("PATCH", `/alerts/${alert.id}/acknowledge`, opToken, {
      data: { type: "alert", id: alert.id, attributes: {} },
    });
    expect(ack.status).toBe(200);
    expect(one(ack).attributes).toMatchObject({
      status: "acknowledged",
      acknowledged_by: "oncall@example.test",
    });
    expect(one(ack).attributes.acknowledged_at).toEqual(expect.any(String));

    const again = await call("PATCH", `/alerts/${alert.id}/acknowledge`, opToken, {
      data: { type: "alert", id: alert.id, attributes: {} },
    });
    expect(again.status).toBe(400);
    expect(again.type).toContain(J);
    expect(again.body.errors?.[0]).toMatchObject({ code: "invalid_transition", status: "400" });
    expect(again.body.errors?.[0]?.detail).toContain("acknowledge");
    expect(again.body.errors?.[0]?.detail).toContain("acknowledged");

    const resolved = await call("PATCH", `/alerts/${alert.id}/resolve`, opToken, {
      data: { type: "alert", id: alert.id, attributes: { resolution_note: "fan replaced" } },
    });
    expect(resolved.status).toBe(200);
    expect(one(resolved).attributes).toMatchObject({
      status: "resolved",
      resolved_by: "oncall@example.test",
      resolution_note: "fan replaced",
    });
    const resolveAgain = await call("PATCH", `/alerts/${alert.id}/resolve`, opToken, {
      data: { type: "alert", id: alert.id, attributes: {} },
    });
    expect(resolveAgain.status).toBe(400);
    const activeAfter = await call("GET", "/alerts/active", tokens.viewer as string);
    expect(many(activeAfter).map((a) => a.id)).not.toContain(alert.id);
    const read = await call("GET", `/alerts/${alert.id}`, tokens.viewer as string);
    expect(one(read).attributes.status).toBe("resolved");
  });
});

describe("k8s node readiness test endpoints", () => {
  it("node.not_ready opens an incident alert through the event-rule path; node.ready resolves it", async () => {
    const nr = await call("POST", "/alerts/k8s-node-not-ready-test", tokens.operator as string, {
      data: { cluster_id: "prod-eu", node: "worker-7", role: "worker" },
    });
    expect(nr.status).toBe(200);
    expect(nr.body).toEqual({
      published: true,
      event_type: "node.not_ready",
      cluster_id: "prod-eu",
      node: "worker-7",
      role: "worker",
    });
    const active = many(
      await call("GET", "/alerts/active?filter[severity][eq]=critical", tokens.viewer as string),
    );
    const incident = active.find((a) => a.attributes.title === "Kubernetes worker node worker-7 is NotReady");
    expect(incident).toBeDefined();
    expect(incident?.attributes).toMatchObject({
      status: "pending",
      source_type: "event",
      metadata: {
        incident_rule_name: "k8s_node_not_ready",
        incident_group_values: { cluster_id: "prod-eu", node: "worker-7" },
      },
    });
    expect(incident?.attributes.event_id).toEqual(expect.any(String));

    const ready = await call("POST", "/alerts/k8s-node-ready-test", tokens.operator as string, {
      data: { cluster_id: "prod-eu", node: "worker-7" },
    });
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ published: true, event_type: "node.ready" });
    const after = one(await call("GET", `/alerts/${incident?.id}`, tokens.viewer as string));
    expect(after.attributes).toMatchObject({ status: "resolved", resolved_by: "system" });

    const missing = await call("POST", "/alerts/k8s-node-not-ready-test", tokens.operator as string, {
      data: { node: "x" },
    });
    expect(missing.status).toBe(400);
    expect(
      (
        await call("POST", "/alerts/k8s-node-not-ready-test", tokens.viewer as string, {
          data: { cluster_id: "c", node: "n" },
        })
      ).status,
    ).toBe(403);
  });
});

describe("event rules (behaviours 1–3)", () => {
  it("unauthenticated: list 200 with empty data, detail 404, every mutation 401", async () => {
    const list = await call("GET", "/event-rules", null);
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([]);
    expect((await call("GET", "/event-rules/active", null)).body.data).toEqual([]);
    const seeded = many(await call("GET", "/event-rules", tokens.viewer as string));
    const id = seeded[0]?.id as string;
    expect(id).toBeDefined();
    expect((await call("GET", `/event-rules/${id}`, null)).status).toBe(404);
    const body = { data: { type: "event-rule", attributes: { name: "anon", match: { always: true } } } };
    expect((await call("POST", "/event-rules", null, body)).status).toBe(401);
    expect(
      (
        await call("PATCH", `/event-rules/${id}`, null, {
          data: { type: "event-rule", id, attributes: { priority: 1 } },
        })
      ).status,
    ).toBe(401);
    expect((await call("DELETE", `/event-rules/${id}`, null)).status).toBe(401);
  });

  it("write permissions do not grant reads; without view lists are empty and detail reads 404", async () => {
    const profile = await createRoleProfile(server, {
      baseRole: "operator",
      revoke: ["observability.rules.view"],
    });
    const writer = await createUser(server, { role: "operator", roleProfileId: profile.id });
    const wt = await tokenFor(server, { id: writer.id });
    const created = await call("POST", "/event-rules", wt, {
      data: { type: "event-rule", attributes: { name: "writer-made", match: { body_contains: "zzz" } } },
    });
    expect(created.status).toBe(201);
    const id = one(created).id;
    const list = await call("GET", "/event-rules", wt);
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([]);
    expect((await call("GET", "/event-rules/active", wt)).body.data).toEqual([]);
    expect((await call("GET", `/event-rules/${id}`, wt)).status).toBe(404);
    const upd = await call("PATCH", `/event-rules/${id}`, wt, {
      data: { type: "event-rule", id, attributes: { priority: 42 } },
    });
    expect(upd.status).toBe(200);
    // A viewer holds view: sees it, but cannot write.
    const seen = await call("GET", `/event-rules/${id}`, tokens.viewer as string);
    expect(seen.status).toBe(200);
    expect(one(seen).attributes).toMatchObject({
      name: "writer-made",
      priority: 42,
      source_type: "log",
      enabled: true,
    });
    expect(
      (
        await call("PATCH", `/event-rules/${id}`, tokens.viewer as string, {
          data: { type: "event-rule", id, attributes: { priority: 1 } },
        })
      ).status,
    ).toBe(403);
    expect((await call("DELETE", `/event-rules/${id}`, tokens.viewer as string)).status).toBe(403);
    expect(
      (
        await call("POST", "/event-rules", tokens.viewer as string, {
          data: { type: "event-rule", attributes: { name: "v" } },
        })
      ).status,
    ).toBe(403);
    // Each write permission is separate: create-only cannot update or delete.
    const createOnly = await createRoleProfile(server, {
      baseRole: "viewer",
      grant: ["observability.rules.create"],
      revoke: ["observability.rules.view"],
    });
    const co = await tokenFor(server, {
      id: (await createUser(server, { role: "viewer", roleProfileId: createOnly.id })).id,
    });
    expect(
      (
        await call("PATCH", `/event-rules/${id}`, co, {
          data: { type: "event-rule", id, attributes: { priority: 1 } },
        })
      ).status,
    ).toBe(403);
    expect((await call("DELETE", `/event-rules/${id}`, co)).status).toBe(403);
    expect((await call("DELETE", `/event-rules/${id}`, wt)).status).toBe(204);
    expect((await call("GET", `/event-rules/${id}`, tokens.viewer as string)).status).toBe(404);
  });

  it("validates the match map", async () => {
    const bad = await call("POST", "/event-rules", tokens.operator as string, {
      data: { type: "event-rule", attributes: { name: "bad-match", match: { nonsense: true } } },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors?.[0]?.source?.pointer).toBe("/data/attributes/match/nonsense");
  });

  it("a rule created over the API applies to the very next log; deleting it applies at once too", async () => {
    const created = await call("POST", "/event-rules", tokens.operator as string, {
      data: {
        type: "event-rule",
        attributes: {
          name: "k8s-override",
          priority: 1,
          match: { event_type: "node.not_ready", attribute_equals: { cluster_id: "cache-test" } },
          event: { alert: { title: "override rule fired", severity: "emergency" } },
        },
      },
    });
    expect(created.status).toBe(201);
    await call("POST", "/alerts/k8s-node-not-ready-test", tokens.operator as string, {
      data: { cluster_id: "cache-test", node: "n1" },
    });
    const titles = () =>
      call("GET", "/alerts/active", tokens.viewer as string).then((r) =>
        many(r).map((a) => a.attributes.title),
      );
    // The override rule won promotion (first match by priority) and opened its own alert; the
    // promoted event still feeds the k8s stateful rule (reference 7.2).
    expect(await titles()).toContain("override rule fired");

    expect((await call("DELETE", `/event-rules/${one(created).id}`, tokens.operator as string)).status).toBe(
      204,
    );
    await call("POST", "/alerts/k8s-node-not-ready-test", tokens.operator as string, {
      data: { cluster_id: "cache-test", node: "n2" },
    });
    const after = await titles();
    expect(after).toContain("Kubernetes worker node n2 is NotReady");
    expect(after.filter((t) => t === "override rule fired")).toHaveLength(1);
  });
});

describe("stateful alert rules (behaviours 4–5)", () => {
  it("reads viewer+, mutations operator+, validation, no engine state exposed", async () => {
    expect((await call("GET", "/stateful-alert-rules", null)).status).toBe(401);
    const list = await call("GET", "/stateful-alert-rules", tokens.viewer as string);
    expect(list.status).toBe(200);
    const seeded = many(list).find((r) => r.attributes.name === "k8s_node_not_ready");
    expect(seeded?.type).toBe("stateful-alert-rule");
    for (const hidden of [
      "buckets",
      "state",
      "history",
      "cooldown_until",
      "last_fired_at",
      "template",
      "templates",
      "managed",
    ]) {
      expect(seeded?.attributes).not.toHaveProperty(hidden);
    }
    const body = {
      data: {
        type: "stateful-alert-rule",
        attributes: {
          name: "ssh-bruteforce",
          match: { body_contains: "Failed password" },
          group_by: ["source_ip"],
          threshold: 10,
        },
      },
    };
    expect((await call("POST", "/stateful-alert-rules", tokens.viewer as string, body)).status).toBe(403);
    const created = await call("POST", "/stateful-alert-rules", tokens.operator as string, body);
    expect(created.status).toBe(201);
    const rule = one(created);
    expect(rule.attributes).toMatchObject({
      window_seconds: 600,
      bucket_seconds: 60,
      cooldown_seconds: 300,
      renotify_seconds: 21600,
      enabled: true,
      priority: 100,
      signal: "log",
    });
    const bad = await call("PATCH", `/stateful-alert-rules/${rule.id}`, tokens.operator as string, {
      data: { type: "stateful-alert-rule", id: rule.id, attributes: { bucket_seconds: 70 } },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors?.[0]).toMatchObject({
      detail: "must divide window_seconds",
      source: { pointer: "/data/attributes/bucket_seconds" },
    });
    const zero = await call("POST", "/stateful-alert-rules", tokens.operator as string, {
      data: {
        type: "stateful-alert-rule",
        attributes: { name: "zero", threshold: 0, match: { always: true } },
      },
    });
    expect(zero.status).toBe(422);
    const disabled = await call("PATCH", `/stateful-alert-rules/${rule.id}`, tokens.operator as string, {
      data: { type: "stateful-alert-rule", id: rule.id, attributes: { enabled: false } },
    });
    expect(one(disabled).attributes.enabled).toBe(false);
    const active = many(await call("GET", "/stateful-alert-rules/active", tokens.viewer as string));
    expect(active.map((r) => r.id)).not.toContain(rule.id);
    expect(active.map((r) => r.attributes.name)).toContain("k8s_node_not_ready");
    expect((await call("DELETE", `/stateful-alert-rules/${rule.id}`, tokens.viewer as string)).status).toBe(
      403,
    );
    expect((await call("DELETE", `/stateful-alert-rules/${rule.id}`, tokens.operator as string)).status).toBe(
      204,
    );
  });
});

describe("notification resources and delivery", () => {
  it("create policy/step/step-channel/route with reference validation; an alert is delivered to a webhook", async () => {
    const admin = tokens.admin as string;
    const channel = await createChannel(server.ctx, SYSTEM_ACTOR, {
      name: "e2e-hook",
      provider: "webhook",
      config: { url: hookUrl },
      secret_refs: { webhook_secret: "never-shown" },
    });
    const chans = await call("GET", "/notification-channels", admin);
    expect(chans.status).toBe(200);
    const ch = many(chans).find((c) => c.id === channel.id);
    expect(ch?.attributes).toMatchObject({
      name: "e2e-hook",
      provider: "webhook",
      enabled: true,
      health: "unknown",
    });
    expect(JSON.stringify(chans.body)).not.toContain("never-shown");
    expect((await call("GET", "/notification-channels?page[limit]=5", admin)).status).toBe(400);
    expect((await call("GET", "/notification-channels", tokens.viewer as string)).status).toBe(403);

    const policy = await call("POST", "/notification-escalation-policies", admin, {
      data: { type: "notification-escalation-policy", attributes: { name: "e2e-policy" } },
    });
    expect(policy.status).toBe(201);
    const policyId = one(policy).id;
    const badRepeat = await call("POST", "/notification-escalation-policies", admin, {
      data: { type: "notification-escalation-policy", attributes: { name: "e2e-repeat", repeat_count: 2 } },
    });
    expect(badRepeat.status).toBe(422);

    const missingPolicy = await call("POST", "/notification-escalation-steps", admin, {
      data: {
        type: "notification-escalation-step",
        attributes: { policy_id: "00000000-0000-4000-8000-000000000001", step_number: 1 },
      },
    });
    expect(missingPolicy.status).toBe(422);
    expect(missingPolicy.body.errors?.[0]?.source?.pointer).toBe("/data/attributes/policy_id");
    const step = await call("POST", "/notification-escalation-steps", admin, {
      data: { type: "notification-escalation-step", attributes: { policy_id: policyId, step_number: 1 } },
    });
    expect(step.status).toBe(201);
    expect(one(step).attributes).toMatchObject({
      step_number: 1,
      delay_seconds: 0,
      condition: "if_unacknowledged",
    });
    const stepId = one(step).id;

    const badLink = await call("POST", "/notification-escalation-step-channels", admin, {
      data: {
        type: "notification-escalation-step-channel",
        attributes: { step_id: stepId, channel_id: "00000000-0000-4000-8000-000000000002" },
      },
    });
    expect(badLink.status).toBe(422);
    expect(badLink.body.errors?.[0]?.source?.pointer).toBe("/data/attributes/channel_id");
    const link = await call("POST", "/notification-escalation-step-channels", admin, {
      data: {
        type: "notification-escalation-step-channel",
        attributes: { step_id: stepId, channel_id: channel.id },
      },
    });
    expect(link.status).toBe(201);

    const badRoute = await call("POST", "/notification-routes", admin, {
      data: {
        type: "notification-route",
        attributes: {
          name: "e2e-bad",
          escalation_policy_id: policyId,
          match_expression: { field: "alert.severity" },
        },
      },
    });
    expect(badRoute.status).toBe(422);
    const route = await call("POST", "/notification-routes", admin, {
      data: {
        type: "notification-route",
        attributes: {
          name: "e2e-route",
          priority: 5,
          escalation_policy_id: policyId,
          match_expression: { field: "alert.title", contains: "e2e-notify" },
        },
      },
    });
    expect(route.status).toBe(201);
    const routeId = one(route).id;
    expect(
      (
        await call("POST", "/notification-routes", tokens.operator as string, {
          data: { type: "notification-route", attributes: { name: "x", escalation_policy_id: policyId } },
        })
      ).status,
    ).toBe(403);

    // Update cannot toggle enabled; /enable does.
    const noEnabled = await call("PATCH", `/notification-routes/${routeId}`, admin, {
      data: { type: "notification-route", id: routeId, attributes: { enabled: false } },
    });
    expect(noEnabled.status).toBe(400);
    const badRef = await call("PATCH", `/notification-routes/${routeId}`, admin, {
      data: {
        type: "notification-route",
        id: routeId,
        attributes: { escalation_policy_id: "00000000-0000-4000-8000-000000000003" },
      },
    });
    expect(badRef.status).toBe(422);
    const upd = await call("PATCH", `/notification-routes/${routeId}`, admin, {
      data: { type: "notification-route", id: routeId, attributes: { priority: 3, description: "e2e" } },
    });
    expect(one(upd).attributes).toMatchObject({ priority: 3, description: "e2e", enabled: true });
    const enabled = await call("PATCH", `/notification-routes/${routeId}/enable`, admin, {
      data: { type: "notification-route", id: routeId, attributes: {} },
    });
    expect(enabled.status).toBe(200);
    expect(one(enabled).attributes.enabled).toBe(true);
    const routes = many(await call("GET", "/notification-routes", admin));
    expect(routes.map((r) => r.id)).toContain(routeId);
    const steps = many(
      await call("GET", `/notification-escalation-steps?filter[policy_id][eq]=${policyId}`, admin),
    );
    expect(steps).toHaveLength(1);

    // A matching alert is delivered by the running notifier to the loopback webhook.
    const alert = one(
      await call("POST", "/alerts", tokens.operator as string, {
        data: { type: "alert", attributes: { title: "e2e-notify disk", severity: "critical" } },
      }),
    );
    for (let i = 0; i < 100 && !received.some((r) => (r.alert as { id: string }).id === alert.id); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const got = received.find((r) => (r.alert as { id: string }).id === alert.id);
    expect(got).toMatchObject({
      type: "alert.fire",
      alert: { title: "e2e-notify disk", severity: "critical", status: "pending" },
    });
    let count = 0;
    for (let i = 0; i < 50 && count === 0; i++) {
      count = one(await call("GET", `/alerts/${alert.id}`, tokens.viewer as string)).attributes
        .notification_count as number;
      if (count === 0) await new Promise((r) => setTimeout(r, 100));
    }
    expect(count).toBe(1);
  });
});
