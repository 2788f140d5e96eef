import { describe, expect, it } from "vitest";
import { build, ident, join, raw, sql } from "./sql.ts";

describe("sql template", () => {
  it("turns every interpolated value into a numbered parameter", () => {
    const name = "x'; DROP TABLE users; --";
    const q = build(sql`SELECT * FROM t WHERE name = ${name} AND n > ${3}`);
    expect(q.text).toBe("SELECT * FROM t WHERE name = $1 AND n > $2");
    expect(q.values).toEqual([name, 3]);
    expect(q.text).not.toContain("DROP");
  });

  it("inlines nested fragments and renumbers their parameters", () => {
    const where = join([sql`a = ${1}`, sql`b = ${"two"}`], " AND ");
    const q = build(sql`SELECT ${ident("t", "a")} FROM t WHERE ${where} LIMIT ${10}`);
    expect(q.text).toBe('SELECT "t"."a" FROM t WHERE a = $1 AND b = $2 LIMIT $3');
    expect(q.values).toEqual([1, "two", 10]);
  });

  it("refuses identifiers that are not plain lower-case names", () => {
    expect(() => ident('a"; drop')).toThrow(/unsafe SQL identifier/);
    expect(() => ident("Users")).toThrow();
  });

  it("joins an empty list to nothing and keeps raw text as is", () => {
    expect(build(sql`SELECT 1${join([])}`).text).toBe("SELECT 1");
    expect(build(raw("now()")).text).toBe("now()");
  });
});
