import { spawn } from "node:child_process";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Db } from "../../src/storage/db.ts";
import { build, type SqlFragment, type SqlQuery } from "../../src/storage/sql.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * MCP at /mcp, driven by the SDK's own client over Streamable HTTP and, through `netmon mcp`,
 * over stdio. Every tool runs as the token's owner.
 */
let server: TestServer;
let operatorToken: string;
let viewerToken: string;
let deviceUids: string[] = [];
let alertId: string;
let checkId: string;

const JSONAPI = "application/vnd.api+json";

async function call(token: string, method: string, url: string, body?: unknown) {
  const res = await server.fetch(url, {
    method,
    headers: {
      ...authHeaders(token),
      ...(body ? { "content-type": url.startsWith("/api/v2") ? JSONAPI : "application/json" } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function connect(token: string): Promise<Client> {
  const client = new Client({ name: "netmon-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", server.url), {
    requestInit: { headers: authHeaders(token) },
  });
  await client.connect(transport);
  return client;
}

type ToolResult = {
  isError?: boolean;
  content: { type: string; text?: string }[];
  structuredContent?: unknown;
};

async function tool(client: Client, name: string, args: Record<string, unknown>): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args })) as ToolResult;
}

function payload(r: ToolResult): Record<string, unknown> {
  const text = r.content.find((c) => c.type === "text")?.text ?? "null";
  return JSON.parse(text);
}

beforeAll(async () => {
  // A generous MCP budget here: the injection test makes ~80 calls; the budget itself is tested below.
  server = await startTestServer({ env: { NETMON_RATE_LIMIT_MCP: "2000/60s" } });
  const admin = await tokenFor(server, "admin");
  operatorToken = await tokenFor(server, "operator", { scopes: ["read", "mcp"] });
  viewerToken = await tokenFor(server, "viewer", { scopes: ["mcp"] });

  const added = await call(admin, "POST", "/api/v1/device-updates", {
    updates: Array.from({ length: 5 }, (_, i) => ({
      ip: `192.0.2.${10 + i}`,
      hostname: `mcp-host-${i}`,
      source: "manual",
    })),
  });
  expect(added.status).toBe(200);
  deviceUids = added.body.data.results.map((r: { uid: string }) => r.uid);

  const check = await call(admin, "POST", "/api/v2/service-checks", {
    data: {
      type: "service-check",
      attributes: {
        name: "mcp-explained",
        check_type: "tcp",
        target: "127.0.0.1",
        port: 9,
        device_uid: deviceUids[0],
        enabled: false,
      },
    },
  });
  expect(check.status).toBe(201);
  checkId = check.body.data.id;

  const alert = await call(admin, "POST", "/api/v2/alerts", {
    data: {
      type: "alert",
      attributes: { title: "mcp test alert", severity: "critical", service_check_id: checkId },
    },
  });
  expect(alert.status).toBe(201);
  alertId = alert.body.data.id;
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

describe("MCP over Streamable HTTP", () => {
  it("lists the tools and resources, each tool with a description and an input schema", async () => {
    const client = await connect(operatorToken);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([
        "alert_acknowledge",
        "alerts_list",
        "check_explain",
        "device_lookup",
        "identity_resolve",
        "srql_catalog",
        "srql_query",
      ]);
      for (const t of tools) {
        expect(t.description?.length ?? 0).toBeGreaterThan(80);
        expect(t.inputSchema.type).toBe("object");
      }
      expect(tools.find((t) => t.name === "alert_acknowledge")?.annotations?.readOnlyHint).toBe(false);

      const { resources } = await client.listResources();
      expect(resources.map((r) => r.uri).sort()).toEqual([
        "netmon://openapi/admin",
        "netmon://openapi/v2",
        "netmon://srql/catalog",
      ]);
      const catalog = await client.readResource({ uri: "netmon://srql/catalog" });
      const doc = JSON.parse((catalog.contents[0] as { text: string }).text);
      expect(Object.keys(doc.entities)).toContain("devices");
      const v2 = await client.readResource({ uri: "netmon://openapi/v2" });
      expect(JSON.parse((v2.contents[0] as { text: string }).text).openapi).toMatch(/^3\./);
    } finally {
      await client.close();
    }
  });

  it("runs SRQL and pages with the cursor it returns", async () => {
    const client = await connect(operatorToken);
    try {
      const first = await tool(client, "srql_query", {
        query: "in:devices hostname:mcp-host-% sort:hostname:asc",
        limit: 2,
      });
      expect(first.isError).toBeFalsy();
      const p1 = payload(first) as { results: { hostname: string }[]; pagination: { next_cursor: string } };
      expect(p1.results.map((r) => r.hostname)).toEqual(["mcp-host-0", "mcp-host-1"]);
      expect(p1.pagination.next_cursor).toBeTruthy();
      const second = await tool(client, "srql_query", {
        query: "in:devices hostname:mcp-host-% sort:hostname:asc",
        limit: 2,
        cursor: p1.pagination.next_cursor,
      });
      const p2 = payload(second) as { results: { hostname: string }[] };
      expect(p2.results.map((r) => r.hostname)).toEqual(["mcp-host-2", "mcp-host-3"]);

      const bad = await tool(client, "srql_query", { query: "in:nosuchentity" });
      expect(bad.isError).toBe(true);
      expect(payload(bad).status).toBe(400);
    } finally {
      await client.close();
    }
  });

  it("describes the catalog, and names the known entities for an unknown one", async () => {
    const client = await connect(operatorToken);
    try {
      const all = payload(await tool(client, "srql_catalog", {})) as { entities: { id: string }[] };
      expect(all.entities.map((e) => e.id)).toContain("alerts");
      const devices = payload(await tool(client, "srql_catalog", { entity: "devices" })) as {
        fields: unknown;
      };
      expect(devices.fields).toBeTruthy();
      const unknown = await tool(client, "srql_catalog", { entity: "nope" });
      expect(unknown.isError).toBe(true);
      expect(String(payload(unknown).error)).toMatch(/^unknown SRQL entity "nope"\. Known ids: .*devices/);
    } finally {
      await client.close();
    }
  });

  it("looks up devices by uid, ip and search, and resolves identities", async () => {
    const client = await connect(operatorToken);
    try {
      const byUid = payload(await tool(client, "device_lookup", { uid: deviceUids[1] })) as {
        devices: { uid: string; hostname: string }[];
      };
      expect(byUid.devices[0]?.hostname).toBe("mcp-host-1");
      const byIp = payload(await tool(client, "device_lookup", { ip: "192.0.2.12" })) as {
        devices: { uid: string }[];
      };
      expect(byIp.devices[0]?.uid).toBe(deviceUids[2]);
      const bySearch = payload(await tool(client, "device_lookup", { search: "mcp-host" })) as {
        devices: unknown[];
      };
      expect(bySearch.devices).toHaveLength(5);
      const two = await tool(client, "device_lookup", { uid: deviceUids[0], ip: "192.0.2.10" });
      expect(two.isError).toBe(true);

      const resolved = payload(
        await tool(client, "identity_resolve", {
          addresses: [{ ip: "192.0.2.13" }, { ip: "198.51.100.1" }, { ip: "not-an-ip" }],
        }),
      ) as { results: { uid?: string; error?: string }[] };
      expect(resolved.results.map((r) => r.uid ?? r.error)).toEqual([
        deviceUids[3],
        "not_found",
        "invalid_ip",
      ]);
    } finally {
      await client.close();
    }
  });

  it("explains a check: disabled, its device, its open alert", async () => {
    const client = await connect(operatorToken);
    try {
      const r = payload(await tool(client, "check_explain", { check_id: checkId })) as {
        check: { name: string; enabled: boolean };
        findings: string[];
        device: { uid: string };
        open_alerts: { id: string }[];
      };
      expect(r.check.name).toBe("mcp-explained");
      expect(r.findings.join(" ")).toMatch(/disabled/);
      expect(r.device.uid).toBe(deviceUids[0]);
      expect(r.open_alerts.map((a) => a.id)).toContain(alertId);
      const missing = await tool(client, "check_explain", {
        check_id: "00000000-0000-4000-8000-000000000000",
      });
      expect(missing.isError).toBe(true);
      expect(payload(missing).status).toBe(404);
    } finally {
      await client.close();
    }
  });

  it("lists alerts; a viewer may not acknowledge, an operator may", async () => {
    const viewer = await connect(viewerToken);
    const operator = await connect(operatorToken);
    try {
      const listed = payload(await tool(viewer, "alerts_list", { severity: "critical" })) as {
        alerts: { id: string; status: string }[];
      };
      expect(listed.alerts.map((a) => a.id)).toContain(alertId);

      const denied = await tool(viewer, "alert_acknowledge", { alert_id: alertId, note: "viewer try" });
      expect(denied.isError).toBe(true);
      expect(payload(denied).status).toBe(403);
      const still = await call(operatorToken, "GET", `/api/v2/alerts/${alertId}`);
      expect(still.body.data.attributes.status).toBe("pending");

      const acked = payload(
        await tool(operator, "alert_acknowledge", { alert_id: alertId, note: "on it" }),
      ) as {
        status: string;
        acknowledged_by: string;
      };
      expect(acked.status).toBe("acknowledged");
      expect(acked.acknowledged_by).toBeTruthy();
      const pending = payload(await tool(operator, "alerts_list", { status: "pending" })) as {
        alerts: { id: string }[];
      };
      expect(pending.alerts.map((a) => a.id)).not.toContain(alertId);
    } finally {
      await viewer.close();
      await operator.close();
    }
  });

  it("pages alerts with next_cursor", async () => {
    const admin = await tokenFor(server, "admin");
    for (let i = 0; i < 3; i++) {
      const r = await call(admin, "POST", "/api/v2/alerts", {
        data: { type: "alert", attributes: { title: `paged ${i}`, severity: "info" } },
      });
      expect(r.status).toBe(201);
    }
    const client = await connect(operatorToken);
    try {
      const p1 = payload(await tool(client, "alerts_list", { severity: "info", limit: 2 })) as {
        alerts: { id: string }[];
        next_cursor: string | null;
      };
      expect(p1.alerts).toHaveLength(2);
      expect(p1.next_cursor).toBeTruthy();
      const p2 = payload(
        await tool(client, "alerts_list", { severity: "info", limit: 2, cursor: p1.next_cursor as string }),
      ) as { alerts: { id: string }[]; next_cursor: string | null };
      expect(p2.alerts).toHaveLength(1);
      expect(p2.alerts[0]?.id).not.toBe(p1.alerts[0]?.id);
      expect(p2.next_cursor).toBeNull();
    } finally {
      await client.close();
    }
  });
});

describe("MCP access", () => {
  it("refuses anonymous callers, tokens without the mcp scope, and API keys", async () => {
    const init = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    };
    const post = (headers: Record<string, string>) =>
      server.fetch("/mcp", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: JSON.stringify(init),
      });
    expect((await post({})).status).toBe(401);

    const readOnly = await tokenFor(server, "admin", { scopes: ["read", "write", "admin"] });
    const r = await post(authHeaders(readOnly));
    expect(r.status).toBe(403);
    expect(((await r.json()) as { error: string }).error).toBe("insufficient_scope");
    await expect(connect(readOnly)).rejects.toThrow();

    const created = await call(readOnly, "POST", "/api/admin/api-keys", { name: "mcp-refused" });
    expect(created.status).toBe(201);
    const k = await post({ "x-api-key": created.body.key });
    expect(k.status).toBe(403);

    const ok = await post(authHeaders(operatorToken));
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { result: { serverInfo: { name: string } } }).result.serverInfo.name).toBe(
      "netmon",
    );
  });

  it("draws from its own per-token budget (NETMON_RATE_LIMIT_MCP)", async () => {
    const small = await startTestServer({ env: { NETMON_RATE_LIMIT_MCP: "3/60s" } });
    try {
      const token = await tokenFor(small, "viewer", { scopes: ["mcp"] });
      const other = await tokenFor(small, "viewer", { scopes: ["mcp"] });
      const list = (t: string) =>
        small.fetch("/mcp", {
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            ...authHeaders(t),
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
        });
      for (let i = 0; i < 3; i++) expect((await list(token)).status).toBe(200);
      const limited = await list(token);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
      expect((await list(other)).status).toBe(200);
    } finally {
      await small.stop();
    }
  });
});

/** Record the SQL text of every statement the server runs (values are sent separately). */
function recordSql(db: Db): { texts: string[]; restore(): void } {
  const texts: string[] = [];
  const textOf = (q: SqlFragment | SqlQuery | string): string =>
    typeof q === "string"
      ? q
      : "text" in q && typeof q.text === "string"
        ? q.text
        : build(q as SqlFragment).text;
  const wrap = (target: Record<string, unknown>) => {
    const saved: [string, unknown][] = [];
    for (const m of ["query", "one", "many"]) {
      const orig = target[m] as (...a: unknown[]) => unknown;
      saved.push([m, orig]);
      target[m] = function (this: unknown, q: SqlFragment | SqlQuery | string, ...rest: unknown[]) {
        texts.push(textOf(q));
        return orig.call(this, q, ...rest);
      };
    }
    return () => {
      for (const [m, f] of saved) target[m] = f;
    };
  };
  const target = db as unknown as Record<string, unknown>;
  const unwrap = wrap(target);
  const origTx = target.transaction as (fn: (tx: unknown) => Promise<unknown>) => Promise<unknown>;
  target.transaction = function (this: unknown, fn: (tx: unknown) => Promise<unknown>) {
    return origTx.call(this, (tx) => {
      wrap(tx as Record<string, unknown>);
      return fn(tx);
    });
  };
  return {
    texts,
    restore() {
      unwrap();
      target.transaction = origTx;
    },
  };
}

describe("MCP injection", () => {
  const MARK = "zq7x";
  const attempts = [
    `${MARK}'; DROP TABLE devices; --`,
    `${MARK}" OR 1=1 --`,
    `${MARK}) UNION SELECT password_hash FROM users --`,
    `${MARK}\\' OR '1'='1`,
    `in:users ${MARK}`,
    `${MARK}$$; SELECT pg_sleep(5); $$`,
  ];

  it("puts hostile strings in every string argument: errors or no rows, and never into SQL text", async () => {
    const client = await connect(await tokenFor(server, "operator", { scopes: ["mcp"] }));
    const before = await server.db.one<{ n: number }>("SELECT count(*)::int AS n FROM devices");
    const recorder = recordSql(server.db);
    let calls = 0;
    try {
      const { tools } = await client.listTools();
      for (const t of tools) {
        const props = (t.inputSchema.properties ?? {}) as Record<string, { type?: string; items?: unknown }>;
        for (const [name, schema] of Object.entries(props)) {
          for (const value of attempts) {
            let args: Record<string, unknown>;
            if (schema.type === "string") args = { [name]: value };
            else if (schema.type === "array")
              args = { [name]: [{ ip: value, mac: value, partition: value }] };
            else continue;
            // Fill a required sibling so the hostile value is what gets judged.
            if (t.name === "alert_acknowledge" && name === "note") args.alert_id = alertId;
            const r = await tool(client, t.name, args).catch((err: Error) => ({
              isError: true,
              content: [{ type: "text", text: JSON.stringify({ error: err.message }) }],
            }));
            calls++;
            // Judged on its own merits, not refused by a budget.
            expect(JSON.stringify(r.content)).not.toMatch(/rate_limited/);
            if (!r.isError) {
              const out = payload(r as ToolResult);
              const rows = (out.results ?? out.devices ?? out.alerts ?? []) as {
                uid?: string;
                error?: string;
              }[];
              // A hostile search matches nothing; a hostile address resolves to an error, never a device.
              for (const row of rows) expect(row.uid === undefined || row.error !== undefined).toBe(true);
              if (t.name === "device_lookup" || t.name === "alerts_list") expect(rows).toHaveLength(0);
            }
          }
        }
      }
    } finally {
      recorder.restore();
      await client.close();
    }
    expect(calls).toBeGreaterThan(40);
    // The hostile text reached the database only as bound values, never as SQL.
    expect(recorder.texts.length).toBeGreaterThan(0);
    expect(recorder.texts.filter((t) => t.includes(MARK))).toEqual([]);
    const after = await server.db.one<{ n: number }>("SELECT count(*)::int AS n FROM devices");
    expect(after?.n).toBe(before?.n);
  });
});

describe("netmon mcp (stdio)", () => {
  it("bridges a full session over stdio to the running server", async () => {
    const root = path.resolve(import.meta.dirname, "../..");
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(root, "bin/netmon.mjs"), "mcp", "--url", server.url],
      env: {
        ...process.env,
        NETMON_MCP_TOKEN: await tokenFor(server, "operator", { scopes: ["mcp"] }),
        NETMON_DATA_DIR: server.dataDir,
      } as Record<string, string>,
      stderr: "pipe",
    });
    const client = new Client({ name: "stdio-test", version: "1.0.0" });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain("srql_query");
      const r = payload(await tool(client, "device_lookup", { uid: deviceUids[4] })) as {
        devices: { hostname: string }[];
      };
      expect(r.devices[0]?.hostname).toBe("mcp-host-4");
    } finally {
      await client.close();
    }
  }, 60_000);

  it("exits with a usage error without a token", async () => {
    const root = path.resolve(import.meta.dirname, "../..");
    const env = { ...process.env };
    delete env.NETMON_MCP_TOKEN;
    const child = spawn(process.execPath, [path.join(root, "bin/netmon.mjs"), "mcp", "--url", server.url], {
      env,
    });
    let err = "";
    child.stderr.on("data", (d) => {
      err += d;
    });
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).not.toBe(0);
    expect(err).toMatch(/NETMON_MCP_TOKEN/);
  }, 60_000);
});
