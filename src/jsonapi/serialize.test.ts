import { describe, expect, it } from "vitest";
import type { Row } from "../storage/db.ts";
import { type AttributeDecl, columnOf, defineResource } from "./define.ts";
import { allResources } from "./registry.ts";
import "./resources.ts";
import { attributesOf } from "./engine/serialize.ts";

/** A row holding, for each attribute's column, a value of the awkward kinds the database hands back. */
function rowFor(attrs: Record<string, AttributeDecl>, variant: number): Row {
  const row: Row = {};
  for (const [name, a] of Object.entries(attrs)) {
    const col = columnOf(name, a);
    const pick = [
      null,
      undefined,
      new Date(Date.UTC(2026, 10, 26, 3, 4, 5, 678)),
      "12.5",
      7,
      { nested: [1, "two"] },
      ["x"],
      "text",
      true,
    ];
    row[col] = pick[(name.length + variant) % pick.length];
  }
  return row;
}

describe("attributesOf: the compiled per-declaration path", () => {
  it("renders every registered resource exactly as the generic path does (values and key order)", () => {
    const resources = allResources();
    expect(resources.length).toBeGreaterThan(10);
    let compared = 0;
    for (const res of resources) {
      // A fieldset naming every attribute takes the generic loop; no fieldset takes the compiled one.
      const every = new Set(Object.keys(res.attributes));
      for (let variant = 0; variant < 9; variant++) {
        const row = rowFor(res.attributes, variant);
        let generic: unknown;
        try {
          generic = attributesOf(res, row, every);
        } catch (err) {
          // A computed attribute may refuse a nonsense row; the compiled path must refuse it too.
          expect(() => attributesOf(res, row)).toThrow((err as Error).constructor as never);
          continue;
        }
        const compiledOut = attributesOf(res, row);
        expect(JSON.stringify(compiledOut), `${res.type} variant ${variant}`).toBe(JSON.stringify(generic));
        expect(Object.keys(compiledOut as object)).toEqual(Object.keys(generic as object));
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(resources.length * 5);
  });

  it("applies computed, redacted, unstored and typed attributes", () => {
    const res = defineResource({
      type: "serialize_probe",
      base: "/serialize-probes",
      table: "serialize_probes",
      id: { column: "id" },
      attributes: {
        when: { type: "datetime" },
        count: { type: "integer" },
        secret: { type: "object", redact: () => "[redacted]" },
        later: { type: "string", stored: false },
        label: { type: "string", column: "label_text" },
        shout: { type: "string", computed: (r: Row) => String(r.label_text).toUpperCase() },
        hidden: { type: "string", public: false },
      },
    } as never);
    const out = attributesOf(res, {
      id: "1",
      when: new Date(Date.UTC(2026, 0, 2)),
      count: "42",
      secret: { k: "v" },
      label_text: "abc",
      hidden: "nope",
    });
    expect(out).toEqual({
      when: "2026-01-02T00:00:00.000Z",
      count: 42,
      secret: "[redacted]",
      later: null,
      label: "abc",
      shout: "ABC",
    });
    expect(Object.keys(out)).toEqual(["when", "count", "secret", "later", "label", "shout"]);
  });
});
