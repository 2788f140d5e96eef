import { randomBytes } from "node:crypto";
import { flag, flagAll, type ParsedArgs, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { withContext } from "../cli/database.ts";
import { stderr, stdout } from "../cli/io.ts";
import { ROLES } from "./actor.ts";
import { createApiTokenForEmail, issueControlPlaneToken, ownerPermissions } from "./tokens.ts";
import { findUserByEmail, insertUser, setUserPassword } from "./users.ts";
import { parseTtl } from "./util.ts";

function generatedPassword(): string {
  return randomBytes(18).toString("base64url");
}

function need(args: ParsedArgs, name: string): string {
  const v = flag(args, name);
  if (!v || v === "true") throw new UsageError(`--${name} is required`);
  return v;
}

/** Run `fn`; exit code 0 (domain errors are reported by the command runner, src/cli/run.ts). */
async function run(fn: () => Promise<void>): Promise<number> {
  await fn();
  return 0;
}

export const usersCommand: Command = {
  name: "users",
  summary: "Create users and set passwords",
  usage: `netmon users create --email EMAIL --role viewer|operator|admin [--password P] [--name DISPLAY_NAME]
netmon users set-password --email EMAIL [--password P]

Without --password a random password is generated and printed once.
Works against the configured database (DATABASE_URL, or PGlite in NETMON_DATA_DIR while the
server is stopped).`,
  async run(args) {
    const sub = args.positionals[0];
    if (sub === "create") {
      const email = need(args, "email");
      const role = need(args, "role");
      if (!(ROLES as readonly string[]).includes(role)) {
        throw new UsageError(`role must be one of: ${ROLES.join(", ")}`);
      }
      const given = flag(args, "password");
      const password = given && given !== "true" ? given : generatedPassword();
      return run(() =>
        withContext(async (ctx) => {
          const user = await insertUser(ctx, { email, role, password, display_name: flag(args, "name") });
          stdout(`created user ${user.email} (id ${user.id}, role ${user.role})\n`);
          if (!given) stdout(`password: ${password}\n`);
        }),
      );
    }
    if (sub === "set-password") {
      const email = need(args, "email");
      const given = flag(args, "password");
      const password = given && given !== "true" ? given : generatedPassword();
      return run(() =>
        withContext(async (ctx) => {
          const user = await findUserByEmail(ctx.db, email);
          if (!user) throw new UsageError(`no user with email ${email}`);
          await setUserPassword(ctx, user.id, password);
          stdout(`password updated for ${user.email}\n`);
          if (!given) stdout(`password: ${password}\n`);
        }),
      );
    }
    throw new UsageError("expected 'create' or 'set-password' (see netmon users --help)");
  },
};

export const tokensCommand: Command = {
  name: "tokens",
  summary: "Issue API tokens for users and control-plane credentials for gateways/agents",
  usage: `netmon tokens create --user EMAIL [--scope S]... [--permission KEY]... [--ttl 30d] [--name NAME]
netmon tokens create --control-plane gateway|agent --name NAME [--ttl DURATION]

Prints the bearer token once. User tokens default to scope 'read' and a 30 day lifetime
(at most 366d); scopes: read, write, admin, mcp, dashboard.publish, plugin.publish,
configuration. --permission (repeatable) limits the token to those permission keys: it then
acts with what both it and its owner hold, and passes no role rule above what that grants.
Control-plane credentials do not expire unless --ttl is given.`,
  async run(args) {
    if (args.positionals[0] !== "create")
      throw new UsageError("expected 'create' (see netmon tokens --help)");
    const ttlRaw = flag(args, "ttl");
    let ttl: number | undefined;
    if (ttlRaw !== undefined) {
      try {
        ttl = parseTtl(ttlRaw);
      } catch (err) {
        throw new UsageError(`--ttl ${(err as Error).message}`);
      }
    }
    const control = flag(args, "control-plane");
    if (control !== undefined) {
      if (control !== "gateway" && control !== "agent") {
        throw new UsageError("--control-plane must be gateway or agent");
      }
      const name = need(args, "name");
      return run(() =>
        withContext(async (ctx) => {
          const { token, record } = await issueControlPlaneToken(ctx, {
            kind: control,
            name,
            ttlSeconds: ttl,
          });
          stderr(`issued ${record.kind} credential '${record.name}' (id ${record.id})\n`);
          stdout(`${token}\n`);
        }),
      );
    }
    const email = need(args, "user");
    const scopes = flagAll(args, "scope");
    const permissions = flagAll(args, "permission");
    return run(() =>
      withContext(async (ctx) => {
        const user = await findUserByEmail(ctx.db, email);
        const { token, record } = await createApiTokenForEmail(ctx, email, {
          name: flag(args, "name") ?? "cli token",
          scopes: scopes.length > 0 ? scopes : undefined,
          expires_in: ttl,
          permissions: permissions.length > 0 ? permissions : undefined,
          ownerPermissions: user ? await ownerPermissions(ctx, user.id) : undefined,
        });
        const limited = record.permissions ? `, limited to ${record.permissions.join(" ")}` : "";
        stderr(
          `issued token '${record.name}' (id ${record.id}, scopes ${record.scopes.join(" ")}${limited}, expires ${record.expires_at?.toISOString()})\n`,
        );
        stdout(`${token}\n`);
      }),
    );
  },
};
