import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../test/helpers/database.ts";
import { InvalidTransitionError, NotFoundError } from "../../kernel/errors.ts";
import type { Db } from "../../storage/db.ts";
import { sql } from "../../storage/sql.ts";
import { defineStateMachine } from "../state-machine.ts";
import { stateTable, transitionRow, transitionRows, writeTransitions } from "./transitions.ts";

const machine = defineStateMachine({
  name: "widget",
  attribute: "status",
  states: ["new", "busy", "done", "failed"],
  initial: ["new"],
  transitions: {
    start: { from: ["new"], to: "busy" },
    finish: { from: ["busy"], to: "done" },
    fail: { from: ["new", "busy"], to: "failed" },
    touch: { from: "*", to: null },
  },
});

const WIDGETS = stateTable({
  machine,
  table: "t_widgets",
  key: "id",
  keyType: "text",
  touch: "updated_at",
  columns: { note: "text", attempts: "integer", data: "jsonb", seen_at: "timestamptz" },
});

const T0 = new Date("2026-03-01T10:00:00Z");
let db: Db;

beforeAll(async () => {
  db = (await createTestDatabase()).db;
  await db.query(`CREATE TABLE t_widgets (id text PRIMARY KEY, status text NOT NULL, note text,
    attempts integer NOT NULL DEFAULT 0, data jsonb, seen_at timestamptz, updated_at timestamptz)`);
}, 60_000);
afterAll(async () => {
  await db?.close();
});

async function seed(rows: [string, string][]): Promise<void> {
  await db.query("DELETE FROM t_widgets");
  for (const [id, status] of rows)
    await db.query(sql`INSERT INTO t_widgets (id, status) VALUES (${id}, ${status})`);
}
const statusOf = async (id: string) =>
  (await db.one<{ status: string }>(sql`SELECT status FROM t_widgets WHERE id = ${id}`))?.status;

describe("the state writer", () => {
  it("transitionRow checks the machine, writes the state, the changes and the touch column", async () => {
    await seed([["a", "new"]]);
    const row = await db.transaction((tx) =>
      transitionRow(
        tx,
        WIDGETS,
        "a",
        "start",
        { note: "go", data: { k: [1] }, attempts: sql`attempts + 2` },
        T0,
      ),
    );
    expect(row).toMatchObject({ id: "a", status: "busy", note: "go", data: { k: [1] }, attempts: 2 });
    expect(new Date(row.updated_at as string).toISOString()).toBe(T0.toISOString());
    // A transition not allowed from the current state changes nothing.
    await expect(
      db.transaction((tx) => transitionRow(tx, WIDGETS, "a", "start", { note: "x" }, T0)),
    ).rejects.toThrow(InvalidTransitionError);
    expect(await statusOf("a")).toBe("busy");
    await expect(transitionRow(db, WIDGETS, "zz", "start", {}, T0)).rejects.toThrow(NotFoundError);
    // A transition without a target state keeps it; changes may depend on the locked row.
    const touched = await transitionRow<{ note: string }>(
      db,
      WIDGETS,
      "a",
      "touch",
      (r) => ({ note: `${r.note}!` }),
      T0,
    );
    expect(touched).toMatchObject({ status: "busy", note: "go!" });
  });

  it("refuses an undeclared column or transition instead of writing it", async () => {
    await seed([["a", "new"]]);
    await expect(transitionRow(db, WIDGETS, "a", "start", { status: "done" }, T0)).rejects.toThrow(
      /not writable/,
    );
    await expect(transitionRow(db, WIDGETS, "a", "explode", {}, T0)).rejects.toThrow(/unknown transition/);
    expect(await statusOf("a")).toBe("new");
    expect(() => stateTable({ ...WIDGETS, columns: { status: "text" } })).toThrow(
      /written by transitions only/,
    );
  });

  it("transitionRows moves only records in a source state, by id or by condition with a limit", async () => {
    await seed([
      ["a", "new"],
      ["b", "busy"],
      ["c", "new"],
      ["d", "new"],
    ]);
    const byId = await transitionRows(db, WIDGETS, "start", { ids: ["a", "b"] }, { note: "n" }, T0);
    expect(byId.map((r) => r.id)).toEqual(["a"]);
    expect(await statusOf("b")).toBe("busy");
    const claimed = await transitionRows(
      db,
      WIDGETS,
      "fail",
      { where: sql`id <> 'd'`, orderBy: sql`id`, limit: 2, skipLocked: true },
      { attempts: sql`attempts + 1` },
      T0,
    );
    expect(claimed.map((r) => r.id).sort()).toEqual(["a", "b"]);
    expect(claimed.every((r) => r.status === "failed" && r.attempts === 1)).toBe(true);
    expect(await statusOf("c")).toBe("new");
    expect(await transitionRows(db, WIDGETS, "start", { ids: [] }, {}, T0)).toEqual([]);
  });

  it("writeTransitions writes locked rows set-based and reports each refusal in place", async () => {
    await seed([
      ["a", "new"],
      ["b", "new"],
      ["c", "busy"],
      ["d", "done"],
    ]);
    const out = await db.transaction(async (tx) => {
      await tx.query("SELECT * FROM t_widgets FOR UPDATE");
      return writeTransitions(
        tx,
        WIDGETS,
        [
          { id: "a", seen: "new", transitions: ["start", "finish"], changes: { note: "x", data: { n: 1 } } },
          { id: "b", seen: "new", transitions: ["start"], changes: { note: "y", data: [2] } },
          { id: "c", seen: "busy", transitions: ["finish"], changes: { seen_at: T0 } },
          { id: "d", seen: "done", transitions: ["start"], changes: {} },
        ],
        T0,
      );
    });
    expect(out[0]).toMatchObject({ id: "a", status: "done", note: "x", data: { n: 1 } });
    expect(out[1]).toMatchObject({ id: "b", status: "busy", note: "y", data: [2] });
    expect(out[2]).toMatchObject({ id: "c", status: "done" });
    expect(out[3]).toBeInstanceOf(InvalidTransitionError);
    expect(await statusOf("d")).toBe("done");
  });
});
