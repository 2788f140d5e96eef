/**
 * The v2 OpenAPI document: valid per a real validator (@apidevtools/swagger-parser), complete
 * (every registered v2 route is documented and vice versa), and usable: a client generated
 * from it (openapi-typescript types + openapi-fetch) drives gateways end to end.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import SwaggerParser from "@apidevtools/swagger-parser";
import createClient from "openapi-fetch";
import openapiTS, { astToString } from "openapi-typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listRoutes } from "../../src/access/registry.ts";
import { tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import type { paths } from "./generated/jsonapi-v2.d.ts";

const J = "application/vnd.api+json";

describe("v2 OpenAPI document", () => {
  let server: TestServer;
  let token: string;
  let doc: Record<string, unknown>;

  beforeAll(async () => {
    server = await startTestServer({ env: { NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" } });
    token = await tokenFor(server, "admin");
    const res = await server.fetch("/api/v2/open_api", { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    doc = (await res.json()) as Record<string, unknown>;
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("requires authentication", async () => {
    const res = await server.fetch("/api/v2/open_api");
    expect(res.status).toBe(401);
  });

  it("is OpenAPI 3.0.0 titled 'API version 2' and validates", async () => {
    expect(doc.openapi).toBe("3.0.0");
    expect((doc.info as { title: string }).title).toBe("API version 2");
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeTruthy();
  });

  it("documents every v2 route the server registered, with tags and parameters", async () => {
    const documented = new Set<string>();
    for (const [p, item] of Object.entries(doc.paths as Record<string, Record<string, { tags: string[] }>>)) {
      for (const [method, op] of Object.entries(item)) {
        documented.add(`${method.toUpperCase()} ${p}`);
        expect(op.tags?.length, `${method} ${p}`).toBeGreaterThan(0);
      }
    }
    const registered = new Set<string>();
    const routes = server.app.printRoutes({ commonPrefix: false, includeMeta: false });
    void routes;
    // Re-derive from fastify's route list via the hasRoute API for each documented path.
    for (const entry of documented) {
      const [method, p] = entry.split(" ") as [string, string];
      const url = p.replace(/\{([a-z_]+)\}/g, ":$1");
      expect(server.app.hasRoute({ method: method as "GET", url }), entry).toBe(true);
      registered.add(entry);
    }
    // And the other way round: every served v2 route is in the document (issue 20).
    const served = listRoutes(server.app).filter(
      (r) => r.url.startsWith("/api/v2/") && !r.url.startsWith("/api/v2/swaggerui") && r.method !== "HEAD",
    );
    expect(served.length).toBeGreaterThan(100);
    for (const r of served) {
      const key = `${r.method} ${r.url.replace(/:([A-Za-z0-9_]+)/g, "{$1}")}`;
      expect(documented.has(key), `${key} is served but not documented`).toBe(true);
    }
    for (const must of [
      "GET /api/v2/gateways",
      "POST /api/v2/gateways",
      "GET /api/v2/gateways/active",
      "GET /api/v2/gateways/{id}",
      "PATCH /api/v2/gateways/{id}/drain/start",
      "PATCH /api/v2/gateways/{id}/maintenance/end",
      "GET /api/v2/agents/by-gateway/{gateway_id}",
      "PATCH /api/v2/agents/{id}/heartbeat",
      "GET /api/v2/logs",
      "GET /api/v2/capacity_forecasts",
      "GET /api/v2/cpu_metrics",
      "GET /api/v2/device-cleanup-settings",
    ]) {
      expect(documented.has(must), must).toBe(true);
    }
    const gw = (
      doc.paths as Record<
        string,
        Record<string, { parameters: { name: string; style?: string; schema: unknown }[] }>
      >
    )["/api/v2/gateways"]?.get;
    const filter = gw?.parameters.find((p) => p.name === "filter");
    expect(filter?.style).toBe("deepObject");
    expect(filter?.schema).toEqual({ $ref: "#/components/schemas/gateway-filter" });
    const schemas = (
      doc.components as {
        schemas: Record<string, { properties: Record<string, unknown>; additionalProperties: boolean }>;
      }
    ).schemas;
    expect(Object.keys(schemas["gateway-filter"]?.properties ?? {}).sort()).toEqual(
      ["and", "agents", "id", "last_seen", "not", "or", "updated_at"].sort(),
    );
    expect(schemas["gateway-filter"]?.additionalProperties).toBe(false);
    expect(Object.keys(schemas["agent-filter-name"]?.properties ?? {})).toContain("ilike");
    expect(Object.keys(schemas["agent-filter-port"]?.properties ?? {})).not.toContain("ilike");
    const page = gw?.parameters.find((p) => p.name === "page") as {
      schema: { properties: { limit: { maximum: number } } };
    };
    expect(page.schema.properties.limit.maximum).toBe(1000);
  });

  it("is served as application/json, as it declares itself", async () => {
    const res = await server.fetch("/api/v2/open_api", { headers: { authorization: `Bearer ${token}` } });
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    const self = (
      doc.paths as Record<string, Record<string, { responses: Record<string, { content: object }> }>>
    )["/api/v2/open_api"]?.get;
    expect(Object.keys(self?.responses["200"]?.content ?? {})).toEqual(["application/json"]);
  });

  it("serves Swagger UI under the same rule as the document", async () => {
    expect((await server.fetch("/api/v2/swaggerui")).status).toBe(401);
    const auth = { headers: { authorization: `Bearer ${token}` } };
    const page = await server.fetch("/api/v2/swaggerui", auth);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("swagger-ui-bundle.js");
    const js = await server.fetch("/api/v2/swaggerui/swagger-ui-bundle.js", auth);
    expect(js.status).toBe(200);
    expect((await js.text()).length).toBeGreaterThan(100_000);
    expect((await server.fetch("/api/v2/swaggerui/init.js", auth)).status).toBe(200);
    expect((await server.fetch("/api/v2/swaggerui/package.json", auth)).status).toBe(404);
  });

  it("the committed generated client types are the live document's (regenerated, not stale)", async () => {
    const generated = astToString(await openapiTS(structuredClone(doc) as never));
    const committed = fs.readFileSync(path.join(import.meta.dirname, "generated", "jsonapi-v2.d.ts"), "utf8");
    // Compare content, not formatting (the committed file is biome-formatted).
    const norm = (t: string) =>
      t
        .replace(/^\/\/.*\n/gm, "")
        .replace(/[\s,;]+/g, "")
        .replace(/([:=(<[])\|/g, "$1");
    expect(norm(committed), "run: node --import tsx scripts/jsonapi-openapi-types.ts").toBe(norm(generated));
  });

  it("lints clean with Redocly (no errors)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-oas-"));
    try {
      const file = path.join(dir, "v2.json");
      fs.writeFileSync(file, JSON.stringify(doc));
      const r = spawnSync(
        process.execPath,
        [
          path.join(import.meta.dirname, "../../node_modules/@redocly/cli/bin/cli.js"),
          "lint",
          file,
          "--format=json",
        ],
        {
          encoding: "utf8",
          env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
          timeout: 120_000,
        },
      );
      const report = JSON.parse(r.stdout.slice(r.stdout.indexOf("{"))) as {
        totals: { errors: number };
        problems: { severity: string; message: string }[];
      };
      expect(report.problems.filter((p) => p.severity === "error")).toEqual([]);
      expect(report.totals.errors).toBe(0);
      expect(r.status).toBe(0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 150_000);

  it("a client generated from the document lists, filters, pages and creates with openapi-fetch's defaults", async () => {
    // No custom querySerializer: filter[id]=… is equality, page[…] one level deep (issue 20).
    const client = createClient<paths>({
      baseUrl: server.url,
      headers: { authorization: `Bearer ${token}`, accept: J, "content-type": J },
    });
    for (const id of ["gen-gw-1", "gen-gw-2", "gen-gw-3"]) {
      const created = await client.POST("/api/v2/gateways", {
        body: { data: { type: "gateway", id, attributes: { component_id: "generated" } } },
      });
      expect(created.response.status).toBe(201);
      expect(created.data?.data?.attributes?.status).toBe("healthy");
    }

    const drained = await client.PATCH("/api/v2/gateways/{id}/drain/start", {
      params: { path: { id: "gen-gw-1" } },
    });
    expect(drained.response.status).toBe(200);
    expect(drained.data?.data?.attributes?.status).toBe("draining");

    const refused = await client.PATCH("/api/v2/gateways/{id}/maintenance/end", {
      params: { path: { id: "gen-gw-1" } },
    });
    expect(refused.response.status).toBe(400);
    expect((refused.error as { errors: { code: string }[] }).errors[0]?.code).toBe("invalid_transition");

    const filtered = await client.GET("/api/v2/gateways", {
      params: { query: { filter: { id: "gen-gw-2" }, page: { limit: 10 }, sort: "-updated_at" } },
    });
    expect(filtered.response.status).toBe(200);
    expect(filtered.data?.data?.map((g) => g.id)).toEqual(["gen-gw-2"]);

    // Keyset pages of one, following the cursor the server hands out.
    const seen: string[] = [];
    let after: string | undefined;
    for (let i = 0; i < 5; i++) {
      const page = await client.GET("/api/v2/gateways", {
        params: { query: { sort: "id", page: after ? { limit: 1, after } : { limit: 1 } } },
      });
      expect(page.response.status).toBe(200);
      const ids = page.data?.data?.map((g) => g.id) ?? [];
      seen.push(...ids.filter((id) => id.startsWith("gen-gw-")));
      const next = page.data?.links?.next;
      if (!next) break;
      after = new URL(next).searchParams.get("page[after]") ?? undefined;
    }
    expect(seen).toEqual(["gen-gw-1", "gen-gw-2", "gen-gw-3"]);

    const one = await client.GET("/api/v2/gateways/{id}", { params: { path: { id: "gen-gw-1" } } });
    expect(one.data?.data?.attributes?.component_id).toBe("generated");
  });
});
