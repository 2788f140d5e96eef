import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";

/** `netmon checks composite …` against a real database, through the declared actions. */
describe("netmon checks composite CLI", () => {
  let ws: CliWorkspace;
  const netmon = (...args: string[]) => ws.netmon(...args);

  beforeAll(async () => {
    ws = await cliWorkspace("netmon-composite-cli", 60000);
  });
  afterAll(() => {
    ws?.cleanup();
  });

  it("creates, lists and evaluates a composite; refuses bad inputs with the validation message", async () => {
    const inputs = JSON.stringify([
      { key: "lat", kind: "metric", metric: "response_time_ms", op: ">", threshold: 500, critical: true },
    ]);
    const created = await netmon(
      "checks",
      "composite",
      "create",
      "--slug",
      "edge-lat",
      "--name",
      "Edge latency",
      "--inputs",
      inputs,
    );
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);

    const bad = await netmon(
      "checks",
      "composite",
      "create",
      "--slug",
      "bad",
      "--inputs",
      '[{"key":"a","kind":"check"}]',
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("a check input names its check by check_id or check_name");
    const dup = await netmon("checks", "composite", "create", "--slug", "edge-lat", "--inputs", inputs);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain("slug 'edge-lat' already exists");

    // No samples in the window: the only input is unknown, and so is the verdict.
    const evaluated = await netmon("checks", "composite", "evaluate", "edge-lat");
    expect(evaluated.code, evaluated.stderr).toBe(0);
    expect(evaluated.stdout.trim()).toBe("unknown");
    const list = await netmon("checks", "composite", "list");
    expect(list.stdout).toBe("edge-lat\tEdge latency\tenabled\tunknown\n");
    const missing = await netmon("checks", "composite", "evaluate", "nope");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("no composite check nope");

    const rows = await netmon("query", "in:composite_results check:edge-lat", "--json");
    expect(rows.code, rows.stderr).toBe(0);
    const results = JSON.parse(rows.stdout).results as { verdict: string; check_name: string }[];
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ verdict: "unknown", check_name: "Edge latency" });
  }, 240_000);
});
