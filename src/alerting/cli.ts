/**
 * `netmon notifications channel create|list|enable|disable`: notification channels have no v2
 * create route (spec 4.1 lists only the list), so operators create them here.
 */
import fs from "node:fs";
import { SYSTEM_ACTOR } from "../access/actor.ts";
import { flag, type ParsedArgs, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { withContext } from "../cli/database.ts";
import { cliIo, cliPath, stderr, stdout } from "../cli/io.ts";
import { runAction } from "../jsonapi/engine/actions.ts";
import { sql } from "../storage/sql.ts";
import { type ChannelInput, createChannel } from "./notifications/config.ts";
import "./resources/notifications.ts";

function all(args: ParsedArgs, name: string): string[] {
  return args.flags.get(name) ?? [];
}

function secretFrom(args: ParsedArgs, name: string): string | undefined {
  const file = flag(args, `${name}-file`);
  if (file) return fs.readFileSync(cliPath(file), "utf8").trim();
  const env = flag(args, `${name}-env`);
  if (env) {
    const v = cliIo().env[env];
    if (v === undefined) throw new UsageError(`environment variable ${env} is not set`);
    return v;
  }
  return undefined;
}

function channelInput(args: ParsedArgs): ChannelInput {
  const name = flag(args, "name");
  if (!name) throw new UsageError("--name is required");
  const provider = flag(args, "provider");
  if (provider !== "webhook" && provider !== "email")
    throw new UsageError("--provider must be webhook or email");
  const maxAttempts = flag(args, "max-attempts");
  const base: ChannelInput = {
    name,
    provider,
    description: flag(args, "description") ?? null,
    max_attempts: maxAttempts === undefined ? undefined : Number(maxAttempts),
    fallback_channel_id: flag(args, "fallback") ?? null,
    fail_closed: flag(args, "fail-closed") === "true",
  };
  if (provider === "webhook") {
    const headers: Record<string, string> = {};
    for (const h of all(args, "header")) {
      const i = h.indexOf("=");
      if (i <= 0) throw new UsageError(`--header takes NAME=VALUE, got '${h}'`);
      headers[h.slice(0, i)] = h.slice(i + 1);
    }
    const secret = secretFrom(args, "secret");
    return {
      ...base,
      config: { url: flag(args, "url"), ...(Object.keys(headers).length ? { headers } : {}) },
      secret_refs: secret ? { webhook_secret: secret } : {},
    };
  }
  const port = flag(args, "smtp-port");
  const starttls = flag(args, "starttls");
  const user = flag(args, "smtp-user");
  const password = secretFrom(args, "smtp-password");
  return {
    ...base,
    config: {
      to: all(args, "to"),
      from: flag(args, "from"),
      smtp: {
        host: flag(args, "smtp-host"),
        ...(port ? { port: Number(port) } : {}),
        ...(flag(args, "smtp-secure") === "true" ? { secure: true } : {}),
        ...(starttls === "true" ? { starttls: true } : starttls === "false" ? { starttls: false } : {}),
      },
    },
    secret_refs: user && password ? { smtp_user: user, smtp_password: password } : {},
  };
}

export const notificationsCommand: Command = {
  name: "notifications",
  summary: "Create and list notification channels (webhook, email)",
  booleanFlags: ["fail-closed", "smtp-secure"],
  usage: `netmon notifications channel create --name NAME --provider webhook --url URL
    [--header NAME=VALUE]... [--secret-file F | --secret-env VAR] [--max-attempts N]
    [--fallback CHANNEL_ID] [--fail-closed] [--description TEXT]
netmon notifications channel create --name NAME --provider email --to ADDR [--to ADDR]...
    --smtp-host HOST [--smtp-port 25] [--smtp-secure] [--starttls true|false] [--from ADDR]
    [--smtp-user U (--smtp-password-file F | --smtp-password-env VAR)] [--max-attempts N]
netmon notifications channel list
netmon notifications channel enable|disable ID

Webhook channels POST a JSON document per notification (HMAC-SHA256 of the body in
x-netmon-signature when a secret is set). Email channels send plain-text mail over SMTP.
Secrets are read from a file or an environment variable, never from the command line, and are
never shown by the API. Attach channels to escalation steps over the v2 API
(POST /api/v2/notification-escalation-step-channels).`,
  async run(args) {
    const [group, action, id] = args.positionals;
    if (group !== "channel") throw new UsageError("expected 'channel' (see netmon notifications --help)");
    if (action === "create") {
      const input = channelInput(args);
      const row = await withContext((ctx) => createChannel(ctx, SYSTEM_ACTOR, input));
      stdout(`${row.id}\n`);
      return 0;
    }
    if (action === "list") {
      const rows = await withContext((ctx) =>
        ctx.db.many<{ id: string; name: string; provider: string; enabled: boolean; health: string }>(
          sql`SELECT id, name, provider, enabled, health FROM notification_channels ORDER BY name`,
        ),
      );
      for (const r of rows) {
        stdout(`${r.id}\t${r.name}\t${r.provider}\t${r.enabled ? "enabled" : "disabled"}\t${r.health}\n`);
      }
      return 0;
    }
    if (action === "enable" || action === "disable") {
      if (!id) throw new UsageError("ID is required");
      // The channel's declared update, as PATCH /api/v2/notification-channels/{id} runs it.
      await withContext((ctx) =>
        runAction(ctx, SYSTEM_ACTOR, "notification-channel", "update", {
          id,
          input: { enabled: action === "enable" },
        }),
      );
      return 0;
    }
    throw new UsageError("expected create, list, enable or disable");
  },
};
