import { createHmac } from "node:crypto";
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Notifications an operator can wire and watch (issue 13): channels as a v2 resource with
 * write-only secrets, a test-send, a one-call route, payloads that link back, a delivery log.
 */
const J = "application/vnd.api+json";
let server: TestServer;
let admin: string;
let viewer: string;

interface Hit {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}
const hits: Hit[] = [];
let failing = false;
let receiver: http.Server;
let receiverUrl = "";

async function v2(token: string, method: string, path: string, body?: unknown) {
  const res = await server.fetch(`/api/v2${path}`, {
    method,
    headers: { ...authHeaders(token), accept: J, ...(body ? { "content-type": J } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, doc: text ? JSON.parse(text) : null };
}

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => {
      body += d;
    });
    req.on("end", () => {
      hits.push({ path: req.url ?? "", headers: req.headers, body });
      res.writeHead(failing ? 500 : 200).end("ok");
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
  server = await startTestServer({ env: { NETMON_BASE_URL: "https://netmon.example.net" } });
  admin = await tokenFor(server, "admin");
  viewer = await tokenFor(server, "viewer");
});
afterAll(async () => {
  await server?.stop();
  await new Promise((r) => receiver?.close(r));
});

describe("notification channels, test-send, quick routes and the delivery log", () => {
  let channelId = "";

  it("creates a webhook channel whose secrets are write-only and kept across updates", async () => {
    const created = await v2(admin, "POST", "/notification-channels", {
      data: {
        type: "notification-channel",
        attributes: {
          name: "ops webhook",
          provider: "webhook",
          config: { url: `${receiverUrl}/hook`, headers: { Authorization: "Bearer hook-token" } },
          secret_refs: { webhook_secret: "signing-key" },
        },
      },
    });
    expect(created.status, JSON.stringify(created.doc)).toBe(201);
    channelId = created.doc.data.id;
    const a = created.doc.data.attributes;
    expect(a.config.headers.Authorization).toEqual({ set: true });
    expect(a.secret_refs.webhook_secret).toEqual({ set: true });
    expect(JSON.stringify(created.doc)).not.toContain("hook-token");
    expect(JSON.stringify(created.doc)).not.toContain("signing-key");

    // Rename and move the URL, sending the secrets back as markers: they stay.
    const updated = await v2(admin, "PATCH", `/notification-channels/${channelId}`, {
      data: {
        type: "notification-channel",
        id: channelId,
        attributes: {
          name: "ops webhook 2",
          config: { url: `${receiverUrl}/hook2`, headers: { Authorization: { set: true } } },
        },
      },
    });
    expect(updated.status, JSON.stringify(updated.doc)).toBe(200);
    const read = await v2(viewer, "GET", `/notification-channels/${channelId}`);
    expect(read.status).toBe(403); // viewers lack notifications.channels.view
    expect((await v2(admin, "GET", `/notification-channels/${channelId}`)).doc.data.attributes.name).toBe(
      "ops webhook 2",
    );
  });

  it("refuses bad channel settings with the field named", async () => {
    const badUrl = await v2(admin, "POST", "/notification-channels", {
      data: {
        type: "notification-channel",
        attributes: { name: "x", provider: "webhook", config: { url: "ftp://x" } },
      },
    });
    expect(badUrl.status).toBe(422);
    expect(badUrl.doc.errors[0].source.pointer).toBe("/data/attributes/config");
    const badSecret = await v2(admin, "POST", "/notification-channels", {
      data: {
        type: "notification-channel",
        attributes: {
          name: "y",
          provider: "webhook",
          config: { url: `${receiverUrl}/y` },
          secret_refs: { api_tokn: "1" },
        },
      },
    });
    expect(badSecret.status).toBe(422);
    expect(badSecret.doc.errors[0].detail).toContain("api_tokn");
    const forbidden = await v2(viewer, "POST", "/notification-channels", {
      data: {
        type: "notification-channel",
        attributes: { name: "z", provider: "webhook", config: { url: `${receiverUrl}/z` } },
      },
    });
    expect(forbidden.status).toBe(403);
  });

  it("test-sends through the channel with its kept secrets, and reports a failing receiver", async () => {
    hits.length = 0;
    const ok = await v2(admin, "POST", `/notification-channels/${channelId}/test`);
    expect(ok.status, JSON.stringify(ok.doc)).toBe(200);
    expect(ok.doc.data).toMatchObject({ ok: true, status: 200, error: null });
    const hit = hits.find((h) => h.path === "/hook2");
    expect(hit).toBeDefined();
    expect(hit?.headers.authorization).toBe("Bearer hook-token");
    const expected = `sha256=${createHmac("sha256", "signing-key")
      .update(hit?.body ?? "")
      .digest("hex")}`;
    expect(hit?.headers["x-netmon-signature"]).toBe(expected);
    expect(JSON.parse(hit?.body ?? "{}").type).toBe("test");

    failing = true;
    const bad = await v2(admin, "POST", `/notification-channels/${channelId}/test`);
    failing = false;
    expect(bad.doc.data).toMatchObject({ ok: false, status: 500 });
    const health = (await v2(admin, "GET", `/notification-channels/${channelId}`)).doc.data.attributes;
    expect(health.health).toBe("failing");
    expect(health.last_error).toContain("500");
  });

  it("shapes webhook bodies with a preset or the channel's own template, refusing unknown placeholders", async () => {
    const pd = await v2(admin, "POST", "/notification-channels", {
      data: {
        type: "notification-channel",
        attributes: {
          name: "pagerduty",
          provider: "webhook",
          config: { url: `${receiverUrl}/pd`, template: "pagerduty" },
          secret_refs: { routing_key: "rk-e2e-123" },
        },
      },
    });
    expect(pd.status, JSON.stringify(pd.doc)).toBe(201);
    expect(pd.doc.data.attributes.secret_refs).toEqual({ routing_key: { set: true } });
    hits.length = 0;
    expect((await v2(admin, "POST", `/notification-channels/${pd.doc.data.id}/test`)).doc.data.ok).toBe(true);
    const event = JSON.parse(hits.find((h) => h.path === "/pd")?.body ?? "{}");
    expect(event).toMatchObject({
      routing_key: "rk-e2e-123",
      event_action: "trigger",
      payload: { summary: "Test notification from netmon (pagerduty)", severity: "info" },
      links: [{ href: "https://netmon.example.net/rules?tab=channels" }],
    });

    const own = await v2(admin, "POST", "/notification-channels", {
      data: {
        type: "notification-channel",
        attributes: {
          name: 'chat "ops" }',
          provider: "webhook",
          config: {
            url: `${receiverUrl}/own`,
            body_template: { msg: "{{severity_upper}}: {{alert.title}}", link: "{{url}}" },
          },
        },
      },
    });
    expect(own.status, JSON.stringify(own.doc)).toBe(201);
    hits.length = 0;
    await v2(admin, "POST", `/notification-channels/${own.doc.data.id}/test`);
    expect(JSON.parse(hits.find((h) => h.path === "/own")?.body ?? "{}")).toEqual({
      msg: 'INFO: Test notification from netmon (chat "ops" })',
      link: "https://netmon.example.net/rules?tab=channels",
    });

    const bad = await v2(admin, "POST", "/notification-channels", {
      data: {
        type: "notification-channel",
        attributes: {
          name: "typo",
          provider: "webhook",
          config: { url: `${receiverUrl}/x`, body_template: { text: "{{hostname}} is down" } },
        },
      },
    });
    expect(bad.status).toBe(422);
    expect(bad.doc.errors[0].detail).toContain("{{hostname}}");
    expect(bad.doc.errors[0].source.pointer).toBe("/data/attributes/config/body_template");
  });

  it("wires a route in one call; a matching alert is delivered with a link back and logged", async () => {
    const route = await v2(admin, "POST", "/notification-routes/quick", {
      data: {
        type: "notification-route",
        attributes: { name: "critical to ops", channel_ids: [channelId], min_severity: "critical" },
      },
    });
    expect(route.status, JSON.stringify(route.doc)).toBe(201);
    expect(route.doc.data.attributes.match_expression).toEqual({ field: "alert.severity", in: ["critical"] });
    const again = await v2(admin, "POST", "/notification-routes/quick", {
      data: { type: "notification-route", attributes: { name: "critical to ops", channel_ids: [channelId] } },
    });
    expect(again.status).toBe(409);
    const unknown = await v2(admin, "POST", "/notification-routes/quick", {
      data: {
        type: "notification-route",
        attributes: { name: "nowhere", channel_ids: ["00000000-0000-4000-8000-000000000000"] },
      },
    });
    expect(unknown.status).toBe(422);

    hits.length = 0;
    const warning = await v2(admin, "POST", "/alerts", {
      data: { type: "alert", attributes: { title: "disk 85 %", severity: "warning" } },
    });
    expect(warning.status).toBe(201);
    const critical = await v2(admin, "POST", "/alerts", {
      data: { type: "alert", attributes: { title: "core switch down", severity: "critical" } },
    });
    expect(critical.status).toBe(201);
    const alertId = critical.doc.data.id as string;
    const hit = await waitFor(
      async () => hits.find((h) => h.body.includes("core switch down")),
      "the webhook",
    );
    const payload = JSON.parse(hit.body);
    expect(payload.url).toBe(`https://netmon.example.net/alerts/${alertId}`);
    expect(payload.alert.severity).toBe("critical");
    expect(hits.some((h) => h.body.includes("disk 85 %"))).toBe(false);

    const log = await waitFor(async () => {
      const r = await v2(admin, "GET", `/notification-deliveries?filter[alert_id][eq]=${alertId}`);
      if (!Array.isArray(r.doc?.data)) throw new Error(JSON.stringify(r.doc));
      return r.doc.data.find((d: { attributes: { status: string } }) => d.attributes.status === "sent")
        ? r
        : null;
    }, "the delivery log");
    const entry = log.doc.data[0].attributes;
    expect(entry).toMatchObject({
      channel_id: channelId,
      status: "sent",
      response_status: 200,
      lifecycle_reason: "fire",
    });
    expect(entry.attempts).toBe(1);
  });

  it("records but does not send the notifications of silenced alerts", async () => {
    const empty = await v2(admin, "POST", "/alert-silences", {
      data: {
        type: "alert-silence",
        attributes: { matchers: {}, ends_at: new Date(Date.now() + 3_600_000).toISOString(), comment: "x" },
      },
    });
    expect(empty.status).toBe(422);
    expect(empty.doc.errors[0].source.pointer).toBe("/data/attributes/matchers");
    const backwards = await v2(admin, "POST", "/alert-silences", {
      data: {
        type: "alert-silence",
        attributes: {
          matchers: { "alert.severity": "critical" },
          ends_at: "2020-01-01T00:00:00Z",
          comment: "x",
        },
      },
    });
    expect(backwards.status).toBe(422);
    const viewerTry = await v2(viewer, "POST", "/alert-silences", {
      data: {
        type: "alert-silence",
        attributes: {
          matchers: { "alert.severity": "critical" },
          ends_at: "2099-01-01T00:00:00Z",
          comment: "x",
        },
      },
    });
    expect(viewerTry.status).toBe(403);

    const silence = await v2(admin, "POST", "/alert-silences", {
      data: {
        type: "alert-silence",
        attributes: {
          matchers: { field: "alert.title", contains: "maintenance" },
          ends_at: new Date(Date.now() + 3_600_000).toISOString(),
          comment: "switch firmware upgrade",
        },
      },
    });
    expect(silence.status, JSON.stringify(silence.doc)).toBe(201);
    expect(silence.doc.data.attributes).toMatchObject({
      state: "active",
      comment: "switch firmware upgrade",
    });
    expect(silence.doc.data.attributes.created_by).toBeTruthy();
    const silenceId = silence.doc.data.id as string;

    hits.length = 0;
    const quiet = await v2(admin, "POST", "/alerts", {
      data: { type: "alert", attributes: { title: "maintenance: core switch reboot", severity: "critical" } },
    });
    const loud = await v2(admin, "POST", "/alerts", {
      data: { type: "alert", attributes: { title: "edge router down", severity: "critical" } },
    });
    await waitFor(
      async () => hits.find((h) => h.body.includes("edge router down")),
      "the unsilenced alert's webhook",
    );
    const log = await waitFor(async () => {
      const r = await v2(admin, "GET", `/notification-deliveries?filter[alert_id][eq]=${quiet.doc.data.id}`);
      return r.doc.data?.[0]?.attributes.status === "suppressed" ? r.doc.data[0].attributes : null;
    }, "the silenced delivery");
    expect(log.suppression_reason).toBe(`silenced:${silenceId}`);
    expect(hits.some((h) => h.body.includes("core switch reboot"))).toBe(false);
    expect(loud.status).toBe(201);

    const expired = await v2(admin, "PATCH", `/alert-silences/${silenceId}/expire`, {
      data: { type: "alert-silence", id: silenceId },
    });
    expect(expired.status, JSON.stringify(expired.doc)).toBe(200);
    expect(expired.doc.data.attributes.state).toBe("expired");
  });

  it("silences by device group and by check name, read from the inventory at notification time", async () => {
    const group = await v2(admin, "POST", "/device-groups", {
      data: { type: "device-group", attributes: { name: "core-switches", type: "custom" } },
    });
    expect(group.status, JSON.stringify(group.doc)).toBe(201);
    const groupId = group.doc.data.id as string;
    const ingest = await server.fetch("/api/v1/device-updates", {
      method: "POST",
      headers: { ...authHeaders(admin), "content-type": "application/json" },
      body: JSON.stringify({
        updates: [
          { ip: "10.77.0.1", hostname: "core-sw-1", source: "manual" },
          { ip: "10.77.0.2", hostname: "edge-rtr-1", source: "manual" },
        ],
      }),
    });
    const uids = ((await ingest.json()) as { data: { results: { uid: string }[] } }).data.results.map(
      (r) => r.uid,
    );
    const [inGroup, outside] = uids as [string, string];
    const moved = await v2(admin, "PATCH", `/devices/${encodeURIComponent(inGroup)}`, {
      data: { type: "device", id: inGroup, attributes: { group_id: groupId } },
    });
    expect(moved.status, JSON.stringify(moved.doc)).toBe(200);

    const unknownRoot = await v2(admin, "POST", "/alert-silences", {
      data: {
        type: "alert-silence",
        attributes: { matchers: { group: "core-switches" }, ends_at: "2099-01-01T00:00:00Z", comment: "x" },
      },
    });
    expect(unknownRoot.status).toBe(422);
    expect(unknownRoot.doc.errors[0].detail).toMatch(/device\. or check\./);

    const silence = await v2(admin, "POST", "/alert-silences", {
      data: {
        type: "alert-silence",
        attributes: {
          matchers: {
            any: [{ "device.group": "Core-Switches" }, { field: "check.name", matches: "^backup-" }],
          },
          ends_at: new Date(Date.now() + 3_600_000).toISOString(),
          comment: "core switch maintenance",
        },
      },
    });
    expect(silence.status, JSON.stringify(silence.doc)).toBe(201);
    const silenceId = silence.doc.data.id as string;
    const check = await v2(admin, "POST", "/service-checks", {
      data: {
        type: "service-check",
        attributes: { name: "backup-nas", check_type: "tcp", target: "127.0.0.1", port: 9, enabled: false },
      },
    });
    expect(check.status, JSON.stringify(check.doc)).toBe(201);

    hits.length = 0;
    const alert = (title: string, attrs: Record<string, unknown>) =>
      v2(admin, "POST", "/alerts", {
        data: { type: "alert", attributes: { title, severity: "critical", ...attrs } },
      });
    const grouped = await alert("core-sw-1 unreachable", { device_uid: inGroup });
    const byCheck = await alert("backup-nas refused", { service_check_id: check.doc.data.id });
    const loud = await alert("edge-rtr-1 unreachable", { device_uid: outside });
    expect([grouped.status, byCheck.status, loud.status]).toEqual([201, 201, 201]);
    await waitFor(
      async () => hits.find((h) => h.body.includes("edge-rtr-1 unreachable")),
      "the loud webhook",
    );
    for (const quiet of [grouped, byCheck]) {
      const entry = await waitFor(async () => {
        const r = await v2(
          admin,
          "GET",
          `/notification-deliveries?filter[alert_id][eq]=${quiet.doc.data.id}`,
        );
        return r.doc.data?.[0]?.attributes.status === "suppressed" ? r.doc.data[0].attributes : null;
      }, "the silenced delivery");
      expect(entry.suppression_reason).toBe(`silenced:${silenceId}`);
    }
    expect(hits.some((h) => h.body.includes("core-sw-1") || h.body.includes("backup-nas"))).toBe(false);
    await v2(admin, "PATCH", `/alert-silences/${silenceId}/expire`, {
      data: { type: "alert-silence", id: silenceId },
    });
  });

  it("deletes a channel; its delivery history stays", async () => {
    const del = await v2(admin, "DELETE", `/notification-channels/${channelId}`);
    expect([200, 204]).toContain(del.status);
    expect((await v2(admin, "GET", `/notification-channels/${channelId}`)).status).toBe(404);
    const log = await v2(admin, "GET", "/notification-deliveries");
    expect(log.doc.data.length).toBeGreaterThan(0);
    expect(log.doc.data[0].attributes.channel_id).toBeNull();
  });
});
