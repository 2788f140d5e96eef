import { describe, expect, it } from "vitest";
import { renderWebhookBody, validateWebhookTemplate } from "./webhook-templates.ts";

const payload = {
  type: "alert.fire",
  url: "https://netmon.example.net/alerts/a1",
  lifecycle_reason: "fire",
  step_number: 2,
  check: { id: "c1", name: "web", check_type: "http", target: "https://intranet/", port: null },
  device: { uid: "sr:1", hostname: "web-01", ip: "10.0.0.5" },
  alert: { id: "a1", title: 'Disk "full" } on web-01', description: "95%", severity: "critical" },
};

describe("webhook templates", () => {
  it("fill string leaves as data: quotes and braces in values cannot change the body's structure", () => {
    const { send } = renderWebhookBody(
      {
        body_template: { text: "{{alert.title}} at {{target}}", step: "{{step_number}}", alert: "{{alert}}" },
      },
      {},
      payload,
    );
    const round = JSON.parse(JSON.stringify(send));
    expect(round).toEqual({
      text: 'Disk "full" } on web-01 at https://intranet/',
      step: 2, // a whole-leaf placeholder keeps the value's type
      alert: payload.alert,
    });
  });

  it("never read through the prototype chain", () => {
    const { send } = renderWebhookBody(
      { body_template: { a: "{{alert.constructor}}", b: "x{{alert.toString}}y", c: "{{__proto__}}" } },
      {},
      payload,
    );
    expect(JSON.parse(JSON.stringify(send))).toEqual({ a: null, b: "xy", c: null });
  });

  it("shape PagerDuty events and keep the routing key out of the logged body", () => {
    const { send, log } = renderWebhookBody({ template: "pagerduty" }, { routing_key: "rk-123" }, payload);
    expect(send).toMatchObject({
      routing_key: "rk-123",
      event_action: "trigger",
      dedup_key: "netmon-a1",
      payload: { summary: payload.alert.title, severity: "critical", source: "https://intranet/" },
      links: [{ href: payload.url }],
    });
    expect(JSON.stringify(log)).not.toContain("rk-123");
    expect((log as { routing_key: string }).routing_key).toBe("[secret]");
    const resolved = renderWebhookBody(
      { template: "pagerduty" },
      {},
      { ...payload, lifecycle_reason: "resolve" },
    );
    expect((resolved.send as { event_action: string }).event_action).toBe("resolve");
  });

  it("shape Slack, Teams and Discord messages with the link back", () => {
    const slack = renderWebhookBody({ template: "slack" }, {}, payload).send as Record<string, unknown>;
    expect(slack.text).toBe(`[CRITICAL] ${payload.alert.title} (fire)`);
    expect(JSON.stringify(slack)).toContain(payload.url);
    const teams = renderWebhookBody({ template: "teams" }, {}, payload).send as Record<string, unknown>;
    expect(teams["@type"]).toBe("MessageCard");
    const discord = renderWebhookBody({ template: "discord" }, {}, payload).send as {
      embeds: { color: number; url: string }[];
    };
    expect(discord.embeds[0]).toMatchObject({ color: 0xd32f2f, url: payload.url });
    expect(renderWebhookBody({}, {}, payload).send).toBe(payload);
  });

  it("refuse unknown presets and placeholders when the channel is saved", () => {
    expect(() => validateWebhookTemplate({ template: "opsgenie" }, "/c")).toThrow(/one of json, slack/);
    expect(() => validateWebhookTemplate({ body_template: { t: "{{host}} {{alert.title}}" } }, "/c")).toThrow(
      /unknown placeholders \{\{host\}\}/,
    );
    expect(() => validateWebhookTemplate({ body_template: "text" }, "/c")).toThrow(/JSON object or array/);
    expect(() => validateWebhookTemplate({ template: "slack", body_template: {} }, "/c")).toThrow(/not both/);
    expect(() => validateWebhookTemplate({ body_template: { t: "{{alert.title}}" } }, "/c")).not.toThrow();
  });
});
