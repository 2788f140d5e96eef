import { describe, expect, it } from "vitest";
import { allResources } from "./registry.ts";
import "./resources.ts";
import { makeAjv, routeSpecs } from "./engine/routes.ts";
import { bodySchema } from "./engine/schemas.ts";

// The routes compile their body schemas on first use, not at start-up; a schema Ajv rejects
// must still fail here rather than on some operator's first write.
describe("JSON:API body schemas", () => {
  it("every route's body schema compiles", () => {
    const ajv = makeAjv();
    const withBody = routeSpecs(allResources()).filter((s) => s.body);
    expect(withBody.length).toBeGreaterThan(0);
    for (const spec of withBody) {
      const body = spec.body as NonNullable<typeof spec.body>;
      expect(
        () => ajv.compile(bodySchema(spec.res, body, "ajv")),
        `${spec.method} ${spec.path}`,
      ).not.toThrow();
    }
  });
});
