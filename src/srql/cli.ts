import { SYSTEM_ACTOR } from "../access/actor.ts";
import { flag, type ParsedArgs, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { withContext } from "../cli/database.ts";
import { stderr, stdout } from "../cli/io.ts";
import { type QueryResponse, runQuery } from "./run.ts";

function cell(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (v instanceof Date) return v.toISOString();
  if (typeof v === "object") return JSON.stringify(v);
  return String(v).replace(/\s+/g, " ");
}

const MAX_CELL = 48;

/** Render rows as an aligned text table (columns in first-row order). */
export function formatTable(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return "(no rows)\n";
  const cols = Object.keys(rows[0] as object);
  const cells = rows.map((r) =>
    cols.map((c) => {
      const s = cell(r[c]);
      return s.length > MAX_CELL ? `${s.slice(0, MAX_CELL - 1)}…` : s;
    }),
  );
  const widths = cols.map((c, i) => Math.max(c.length, ...cells.map((r) => (r[i] as string).length)));
  const line = (xs: string[]) =>
    xs
      .map((x, i) => x.padEnd(widths[i] as number))
      .join("  ")
      .trimEnd();
  return [line(cols), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n") + "\n";
}

export const queryCommand: Command = {
  name: "query",
  summary: "Run an SRQL query and print the results",
  usage: `netmon query "<srql>" [--json] [--limit N] [--cursor C]

Runs the query against the configured database as the system actor and prints a table,
or the full response ({results, pagination, viz, error}) with --json. Examples:
  netmon query "in:devices is_available:false sort:last_seen:desc limit:20"
  netmon query 'in:logs severity:error time:last_24h stats:"count() by service_name"' --json`,
  booleanFlags: ["json"],
  async run(args: ParsedArgs): Promise<number> {
    const query = args.positionals.join(" ").trim();
    if (!query) throw new UsageError('a query is required, e.g. netmon query "in:devices limit:10"');
    const limitText = flag(args, "limit");
    let limit: number | null = null;
    if (limitText !== undefined) {
      if (!/^\d+$/.test(limitText) || Number(limitText) <= 0)
        throw new UsageError("--limit must be a positive integer");
      limit = Number(limitText);
    }
    const cursor = flag(args, "cursor") ?? null;
    const json = flag(args, "json") === "true";
    const res: QueryResponse = await withContext((ctx) =>
      runQuery(ctx, SYSTEM_ACTOR, { query, limit, cursor }),
    );
    if (json) {
      stdout(`${JSON.stringify(res, null, 2)}\n`);
      return 0;
    }
    stdout(formatTable(res.results));
    if (res.pagination.next_cursor) stdout(`next cursor: ${res.pagination.next_cursor}\n`);
    return 0;
  },
};
