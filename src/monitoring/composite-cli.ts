/**
 * `netmon checks composite create|list|evaluate`: composite checks from a terminal, through the
 * same declared actions as `/api/v2/composite-checks` (runAction), as the system actor.
 */
import fs from "node:fs";
import { SYSTEM_ACTOR } from "../access/actor.ts";
import { flag, type ParsedArgs, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { withContext } from "../cli/database.ts";
import { cliPath, stderr, stdout } from "../cli/io.ts";
import { runAction } from "../jsonapi/engine/actions.ts";
import { sql } from "../storage/sql.ts";
import "./resources/composite-checks.ts";

function inputsFrom(args: ParsedArgs): unknown {
  const file = flag(args, "inputs-file");
  const text = file ? fs.readFileSync(cliPath(file), "utf8") : flag(args, "inputs");
  if (!text) throw new UsageError("--inputs JSON or --inputs-file FILE is required");
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError("--inputs must be a JSON list of inputs");
  }
}

function createInput(args: ParsedArgs): Record<string, unknown> {
  const slug = flag(args, "slug");
  if (!slug) throw new UsageError("--slug is required");
  const interval = flag(args, "interval");
  const device = flag(args, "device");
  const rule = flag(args, "rule");
  return {
    slug,
    name: flag(args, "name") ?? slug,
    inputs: inputsFrom(args),
    ...(device ? { device_uid: device } : {}),
    ...(rule ? { rule } : {}),
    ...(interval ? { interval_seconds: Number(interval) } : {}),
  };
}

export const checksCommand: Command = {
  name: "checks",
  summary: "Composite checks: create, list and evaluate",
  usage: `netmon checks composite create --slug SLUG [--name NAME] (--inputs JSON | --inputs-file FILE)
    [--device UID] [--rule all_healthy|any_healthy] [--interval SECONDS]
netmon checks composite list
netmon checks composite evaluate SLUG

Inputs are a JSON list: {"key":"web","kind":"check","check_name":"core web","critical":true},
{"key":"lat","kind":"metric","metric":"response_time_ms","op":">","threshold":500}. 'evaluate'
records a result now and prints its verdict. Results: netmon query 'in:composite_results'.`,
  async run(args) {
    const [group, action, slug] = args.positionals;
    if (group !== "composite") throw new UsageError("expected 'composite' (see netmon checks --help)");
    if (action === "create") {
      const input = createInput(args);
      const r = await withContext((ctx) =>
        runAction(ctx, SYSTEM_ACTOR, "composite-check", "create", { input }),
      );
      stdout(`${r.id}\n`);
      return 0;
    }
    if (action === "list") {
      const rows = await withContext((ctx) =>
        ctx.db.many<{ slug: string; name: string; enabled: boolean; last_verdict: string | null }>(
          sql`SELECT slug, name, enabled, last_verdict FROM composite_checks ORDER BY slug`,
        ),
      );
      for (const r of rows) {
        stdout(`${r.slug}\t${r.name}\t${r.enabled ? "enabled" : "disabled"}\t${r.last_verdict ?? "-"}\n`);
      }
      return 0;
    }
    if (action === "evaluate") {
      if (!slug) throw new UsageError("SLUG is required");
      const verdict = await withContext(async (ctx) => {
        const row = await ctx.db.one<{ id: string }>(
          sql`SELECT id FROM composite_checks WHERE slug = ${slug}`,
        );
        if (!row) return null;
        const r = await runAction(ctx, SYSTEM_ACTOR, "composite-check", "evaluate", { id: row.id });
        return String(r.record?.last_verdict ?? "unknown");
      });
      if (verdict === null) {
        stderr(`error: no composite check ${slug}\n`);
        return 1;
      }
      stdout(`${verdict}\n`);
      return 0;
    }
    throw new UsageError("expected create, list or evaluate");
  },
};
