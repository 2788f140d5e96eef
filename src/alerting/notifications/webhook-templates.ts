import { ValidationError } from "../../kernel/errors.ts";

/**
 * Webhook body templates (issue 13): the channel's `config.template` picks a preset for a
 * receiver that expects its own shape (Slack, Microsoft Teams, Discord, PagerDuty Events v2),
 * or `config.body_template` gives a JSON document whose strings hold `{{path}}` placeholders.
 *
 * Why not a general template engine (Handlebars, Mustache): the body is JSON, and text
 * templates would have to be escaped into JSON by hand — the classic way to produce invalid
 * or injected bodies. Here the template is parsed JSON and only its string leaves are filled:
 * values are inserted as data, so a quote or a brace in an alert title cannot change the
 * structure. A leaf that is exactly one placeholder keeps the value's type (numbers, objects).
 * Paths are looked up through own properties only, never the prototype chain.
 */

export const TEMPLATE_PRESETS = ["json", "slack", "teams", "discord", "pagerduty"] as const;
export type TemplatePreset = (typeof TEMPLATE_PRESETS)[number];

/** Roots a placeholder may start with (anything else is refused when the channel is saved). */
export const TEMPLATE_ROOTS = [
  "type",
  "url",
  "alert",
  "check",
  "device",
  "target",
  "lifecycle_reason",
  "step_number",
  "repeat_number",
  "delivery_id",
  "severity_upper",
  "color",
  "color_int",
  "pagerduty_action",
  "pagerduty_severity",
  "secret",
] as const;

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}/g;
const WHOLE = /^\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}$/;
const MAX_TEMPLATE_BYTES = 16_384;

const PRESETS: Record<Exclude<TemplatePreset, "json">, unknown> = {
  slack: {
    text: "[{{severity_upper}}] {{alert.title}} ({{lifecycle_reason}})",
    attachments: [
      {
        color: "{{color}}",
        title: "{{alert.title}}",
        title_link: "{{url}}",
        text: "{{alert.description}}",
        fields: [
          { title: "Severity", value: "{{alert.severity}}", short: true },
          { title: "Target", value: "{{target}}", short: true },
        ],
      },
    ],
  },
  teams: {
    "@type": "MessageCard",
    "@context": "https://schema.org/extensions",
    summary: "{{alert.title}}",
    themeColor: "{{color}}",
    title: "[{{severity_upper}}] {{alert.title}}",
    text: "{{alert.description}}",
    sections: [
      {
        facts: [
          { name: "Status", value: "{{lifecycle_reason}}" },
          { name: "Target", value: "{{target}}" },
        ],
      },
    ],
    potentialAction: [
      { "@type": "OpenUri", name: "Open in netmon", targets: [{ os: "default", uri: "{{url}}" }] },
    ],
  },
  discord: {
    content: "[{{severity_upper}}] {{alert.title}} ({{lifecycle_reason}})",
    embeds: [
      {
        title: "{{alert.title}}",
        url: "{{url}}",
        description: "{{alert.description}}",
        color: "{{color_int}}",
        fields: [{ name: "Target", value: "{{target}}" }],
      },
    ],
  },
  pagerduty: {
    routing_key: "{{secret.routing_key}}",
    event_action: "{{pagerduty_action}}",
    dedup_key: "netmon-{{alert.id}}",
    payload: {
      summary: "{{alert.title}}",
      source: "{{target}}",
      severity: "{{pagerduty_severity}}",
      custom_details: "{{alert}}",
    },
    links: [{ href: "{{url}}", text: "Open in netmon" }],
  },
};

const COLORS: Record<string, string> = {
  emergency: "#7b1fa2",
  critical: "#d32f2f",
  warning: "#f9a825",
  info: "#1976d2",
};

function lookup(vars: Record<string, unknown>, path: string): unknown {
  let cur: unknown = vars;
  for (const part of path.split(".")) {
    if (cur === null || typeof cur !== "object" || !Object.hasOwn(cur, part)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

function fill(node: unknown, vars: Record<string, unknown>): unknown {
  if (typeof node === "string") {
    const whole = WHOLE.exec(node);
    if (whole) return lookup(vars, whole[1] as string) ?? null;
    return node.replace(PLACEHOLDER, (_m, path: string) => {
      const v = lookup(vars, path);
      if (v === undefined || v === null) return "";
      return typeof v === "object" ? JSON.stringify(v) : String(v);
    });
  }
  if (Array.isArray(node)) return node.map((n) => fill(n, vars));
  if (node !== null && typeof node === "object") {
    const out: Record<string, unknown> = Object.create(null);
    for (const [k, v] of Object.entries(node)) out[k] = fill(v, vars);
    return out;
  }
  return node;
}

/** The variables a template sees: the standard payload plus a few derived conveniences. */
function variables(
  payload: Record<string, unknown>,
  secrets: Record<string, unknown>,
): Record<string, unknown> {
  const alert = (payload.alert ?? {}) as Record<string, unknown>;
  const check = payload.check as Record<string, unknown> | null | undefined;
  const device = payload.device as Record<string, unknown> | null | undefined;
  const severity = String(alert.severity ?? "info");
  const color = COLORS[severity] ?? "#757575";
  const reason = String(payload.lifecycle_reason ?? "");
  const target = check?.target
    ? `${check.target}${check.port ? `:${check.port}` : ""}`
    : String(device?.hostname ?? device?.ip ?? alert.source_id ?? "netmon");
  return {
    ...payload,
    target,
    severity_upper: severity.toUpperCase(),
    color,
    color_int: Number.parseInt(color.slice(1), 16),
    pagerduty_action: reason === "resolve" ? "resolve" : reason === "acknowledge" ? "acknowledge" : "trigger",
    pagerduty_severity:
      severity === "emergency" || severity === "critical"
        ? "critical"
        : severity === "warning"
          ? "warning"
          : "info",
    secret: secrets,
  };
}

/** The template a channel uses, or null for the plain JSON payload. */
export function channelTemplate(config: Record<string, unknown>): unknown | null {
  if (config.body_template !== undefined && config.body_template !== null) return config.body_template;
  const preset = config.template;
  if (typeof preset === "string" && preset !== "json" && Object.hasOwn(PRESETS, preset)) {
    return PRESETS[preset as Exclude<TemplatePreset, "json">];
  }
  return null;
}

/**
 * The body to send and the body to log: both rendered from the same template, the logged one
 * with every secret replaced, so the delivery log never holds a routing key.
 */
export function renderWebhookBody(
  config: Record<string, unknown>,
  secrets: Record<string, unknown>,
  payload: Record<string, unknown>,
): { send: unknown; log: unknown } {
  const template = channelTemplate(config);
  if (template === null) return { send: payload, log: payload };
  const redacted: Record<string, unknown> = Object.create(null);
  for (const k of Object.keys(secrets)) redacted[k] = "[secret]";
  return {
    send: fill(template, variables(payload, secrets)),
    log: fill(template, variables(payload, redacted)),
  };
}

/** Refuse, when the channel is saved, a template that could never render what was meant. */
export function validateWebhookTemplate(config: Record<string, unknown>, pointer: string): void {
  if (config.template !== undefined && !(TEMPLATE_PRESETS as readonly unknown[]).includes(config.template)) {
    throw new ValidationError(`config.template must be one of ${TEMPLATE_PRESETS.join(", ")}`, {
      source: { pointer: `${pointer}/template` },
    });
  }
  if (config.template !== undefined && config.body_template !== undefined) {
    throw new ValidationError("give config.template or config.body_template, not both", {
      source: { pointer: `${pointer}/body_template` },
    });
  }
  const body = config.body_template;
  if (body === undefined || body === null) return;
  if (typeof body !== "object") {
    throw new ValidationError("config.body_template must be a JSON object or array", {
      source: { pointer: `${pointer}/body_template` },
    });
  }
  if (JSON.stringify(body).length > MAX_TEMPLATE_BYTES) {
    throw new ValidationError(`config.body_template must be at most ${MAX_TEMPLATE_BYTES} bytes`, {
      source: { pointer: `${pointer}/body_template` },
    });
  }
  const unknown = new Set<string>();
  const walk = (n: unknown) => {
    if (typeof n === "string") {
      for (const m of n.matchAll(PLACEHOLDER)) {
        const root = (m[1] as string).split(".")[0] as string;
        if (!(TEMPLATE_ROOTS as readonly string[]).includes(root)) unknown.add(m[1] as string);
      }
    } else if (Array.isArray(n)) n.forEach(walk);
    else if (n !== null && typeof n === "object") Object.values(n).forEach(walk);
  };
  walk(body);
  if (unknown.size > 0) {
    throw new ValidationError(
      `config.body_template uses unknown placeholders ${[...unknown].map((u) => `{{${u}}}`).join(", ")} (known roots: ${TEMPLATE_ROOTS.join(", ")})`,
      { source: { pointer: `${pointer}/body_template` } },
    );
  }
}
