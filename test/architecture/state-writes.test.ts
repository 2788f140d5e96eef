/**
 * "No state change outside an action" (issue 11), held by CI: a state column — the attribute of
 * any declared state machine (`status`, `verification_status`, …) — is assigned in SQL only by
 * the action runner (src/jsonapi/engine/: the v2 operations' update and the state writer of
 * transitions.ts). Every other file moves a record's state by naming a declared transition.
 *
 * The scan reads every production file in src/ for `UPDATE … SET` (and `ON CONFLICT … DO
 * UPDATE SET`) statements and reports any that assign a state column. It is checked against
 * sources that must be caught, so a scan that finds nothing cannot pass by being blind.
 */
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import "../../src/features.ts";
import { stateTables } from "../../src/jsonapi/engine/transitions.ts";
import { allResources } from "../../src/jsonapi/registry.ts";

const root = path.resolve(import.meta.dirname, "../..");
const RUNNER = /^src\/jsonapi\/engine\//;

function productionFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) out.push(...productionFiles(rel));
    else if (
      /\.ts$/.test(e.name) &&
      !/\.test\.ts$|test-context\.ts$/.test(e.name) &&
      !rel.includes("/testing/")
    )
      out.push(rel);
  }
  return out;
}

/** The SET list of every UPDATE in `text` that assigns one of `columns`, with its line. */
function stateAssignments(text: string, columns: readonly string[]): { line: number; sql: string }[] {
  const found: { line: number; sql: string }[] = [];
  const assign = new RegExp(`(?:^|[\\s,(.])"?(?:${columns.join("|")})"?\\s*=(?!=)`);
  for (const m of text.matchAll(/\bUPDATE\b/g)) {
    const rest = text.slice(m.index, m.index + 2000);
    const set = /\bSET\b/.exec(rest);
    // The table (and an alias) sit between UPDATE and SET; farther away is another statement.
    if (!set || set.index > 120) continue;
    // The statement's SET list ends at its WHERE/FROM/RETURNING, or at the end of the literal.
    const tail = rest.slice(set.index + 3);
    const end = tail.search(/\bWHERE\b|\bFROM\b|\bRETURNING\b|`|;/);
    const list = end < 0 ? tail : tail.slice(0, end);
    if (assign.test(list)) {
      found.push({ line: text.slice(0, m.index).split("\n").length, sql: `UPDATE … SET${list}`.trim() });
    }
  }
  return found;
}

describe("state columns are written only by the action runner", () => {
  const columns = [
    ...new Set([
      ...stateTables().map((t) => t.state),
      ...allResources().flatMap((r) => (r.stateMachine ? [r.stateMachine.attribute] : [])),
    ]),
  ];

  it("knows the declared state columns", () => {
    expect(columns).toContain("status");
    // Tables whose jobs move state below a declared operation declare it with stateTable().
    expect(stateTables().map((t) => t.table)).toEqual(
      expect.arrayContaining(["alerts", "gateways", "agents"]),
    );
  });

  it("no file outside src/jsonapi/engine assigns a state column", () => {
    const offenders: string[] = [];
    for (const file of productionFiles("src")) {
      if (RUNNER.test(file)) continue;
      for (const f of stateAssignments(fs.readFileSync(path.join(root, file), "utf8"), columns)) {
        offenders.push(`${file}:${f.line}: ${f.sql.replace(/\s+/g, " ").slice(0, 160)}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("the scan catches the forms a hand-written state change takes", () => {
    const caught = (src: string) => stateAssignments(src, columns).length;
    expect(caught("sql`UPDATE users SET status = 'disabled', updated_at = $1 WHERE id = $1`")).toBe(1);
    expect(caught("`UPDATE poll_jobs SET $1, status = $2 WHERE id = $1`")).toBe(1);
    expect(caught("sql`UPDATE alerts SET updated_at = now(),\n  status = $1 WHERE id = $1`")).toBe(1);
    expect(caught('sql`UPDATE t AS p SET "status" = v.s FROM unnest($1) AS v(s)`')).toBe(1);
    expect(
      caught("sql`INSERT INTO x (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status`"),
    ).toBe(1);
    // Not state writes: reading or filtering by state, or other columns.
    expect(caught("sql`UPDATE alerts SET notification_count = 1 WHERE status = 'pending'`")).toBe(0);
    expect(caught("sql`SELECT * FROM alerts WHERE status = $1`")).toBe(0);
    expect(caught("sql`UPDATE channels SET health = 'healthy', last_status_code = 1 WHERE id = $1`")).toBe(0);
  });
});
