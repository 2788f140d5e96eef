import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Role } from "../../src/access/actor.ts";
import { ACCESS_DENIED_HEADER, createAccessFeature } from "../../src/access/feature.ts";
import { effectivePermissions, roleDefaults } from "../../src/access/permissions.ts";
import { listRoutes, type RouteRecord } from "../../src/access/registry.ts";
import { issueControlPlaneToken } from "../../src/access/tokens.ts";
import type { AccessRule } from "../../src/http/route-config.ts";
import { authHeaders, createRoleProfile, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * The authorization matrix, generated from the live route table: every route registered by
 * every feature × {anonymous, viewer, operator, admin, a custom profile, a gateway credential}.
 * The expected outcome is derived from the route's declared AccessRule, and a real request
 * checks it. A new route appears here automatically.
 */
type Who = "anonymous" | "viewer" | "operator" | "admin" | "custom" | "gateway";
type Outcome = "401" | "403" | "allowed" | "not-401";

interface Principal {
  who: Who;
  role: Role | null;
  permissions: ReadonlySet<string>;
  headers: Record<string, string>;
}

const RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

// The custom profile: a viewer that gains some operator/admin keys and loses some viewer keys.
const CUSTOM_GRANT = [
  "devices.create",
  "devices.update",
  "observability.rules.create",
  "alerts.acknowledge",
  "settings.rbac.manage",
];
const CUSTOM_REVOKE = ["devices.view", "analytics.view", "observability.logs.view", "services.view"];

function expected(rule: AccessRule, p: Principal): Outcome {
  if ("public" in rule) return "allowed";
  if ("optional" in rule) return "not-401";
  if (p.who === "anonymous") return "401";
  if ("controlPlane" in rule) {
    if (p.who === "gateway") return "allowed";
    if (rule.permission) return p.permissions.has(rule.permission) ? "allowed" : "403";
    return p.role === "admin" ? "allowed" : "403";
  }
  if (p.who === "gateway") return "403";
  if ("authenticated" in rule) return "allowed";
  if ("permission" in rule) return p.permissions.has(rule.permission) ? "allowed" : "403";
  if ("role" in rule) return RANK[p.role as Role] >= RANK[rule.role] ? "allowed" : "403";
  throw new Error(`unknown access rule ${JSON.stringify(rule)}`);
}

const DUMMY_ID = "00000000-0000-4000-8000-000000000000";

function fillPath(url: string): string {
  return url
    .split("/")
    .map((seg) => {
      if (seg === "*") return "x";
      if (!seg.includes(":")) return seg;
      // `:id`, `:id(^\\d+)`, `prefix-:id`, `:a-:b`
      return seg.replace(/:[A-Za-z0-9_]+(\([^)]*\))?/g, (_m, re: string | undefined) =>
        re ? "1" : DUMMY_ID,
      );
    })
    .join("/");
}

async function call(
  server: TestServer,
  route: RouteRecord,
  headers: Record<string, string>,
): Promise<{ status: number; byRule: boolean }> {
  const hasBody = !["GET", "HEAD", "DELETE", "OPTIONS"].includes(route.method);
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 5000);
  try {
    const res = await server.fetch(fillPath(route.url), {
      method: route.method,
      headers: { ...headers, ...(hasBody ? { "content-type": "application/json" } : {}) },
      body: hasBody ? "{}" : undefined,
      signal: controller.signal,
      redirect: "manual",
    });
    await res.arrayBuffer().catch(() => undefined);
    return { status: res.status, byRule: res.headers.get(ACCESS_DENIED_HEADER) === "rule" };
  } catch (err) {
    // Still running after 5 s (long poll, stream): it got past the access hook.
    if ((err as Error).name === "AbortError") return { status: 0, byRule: false };
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

describe("authorization matrix (every route × every kind of caller)", () => {
  let server: TestServer;
  let routes: readonly RouteRecord[];
  const principals: Principal[] = [];

  beforeAll(async () => {
    server = await startTestServer({
      env: {
        NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s",
        NETMON_RATE_LIMIT_ADMIN: "100000/60s",
        NETMON_RATE_LIMIT_CONTROL: "100000/60s",
      },
    });
    routes = listRoutes(server.app).filter((r) => r.method !== "HEAD" && r.method !== "OPTIONS");
    principals.push({ who: "anonymous", role: null, permissions: new Set(), headers: {} });
    for (const role of ["viewer", "operator", "admin"] as const) {
      principals.push({
        who: role,
        role,
        permissions: roleDefaults(role),
        headers: authHeaders(await tokenFor(server, role)),
      });
    }
    const profile = await createRoleProfile(server, {
      baseRole: "viewer",
      grant: CUSTOM_GRANT,
      revoke: CUSTOM_REVOKE,
    });
    const custom = await createUser(server, { role: "viewer", roleProfileId: profile.id });
    principals.push({
      who: "custom",
      role: "viewer",
      permissions: effectivePermissions("viewer", CUSTOM_GRANT, CUSTOM_REVOKE),
      headers: authHeaders(await tokenFor(server, { id: custom.id })),
    });
    const gw = await issueControlPlaneToken(server.ctx, { kind: "gateway", name: "matrix-gw" });
    principals.push({ who: "gateway", role: null, permissions: new Set(), headers: authHeaders(gw.token) });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("every route declares a policy that follows the conventions", () => {
    expect(routes.length).toBeGreaterThan(10);
    const problems: string[] = [];
    for (const r of routes) {
      const name = `${r.method} ${r.url}`;
      const a = r.access as Record<string, unknown>;
      const kinds = ["public", "optional", "authenticated", "permission", "role", "controlPlane"].filter(
        (k) => k in a && !(k === "permission" && ("optional" in a || "controlPlane" in a)),
      );
      if (kinds.length !== 1)
        problems.push(`${name}: access rule ${JSON.stringify(a)} is not exactly one kind`);
      if (
        "permission" in a &&
        !effectivePermissions("admin").has(a.permission as string) &&
        !roleDefaults("admin").has(a.permission as string)
      ) {
        problems.push(`${name}: unknown permission key ${a.permission}`);
      }
      const isAdmin = r.url === "/api/admin" || r.url.startsWith("/api/admin/");
      if (isAdmin && r.rateLimit !== "admin")
        problems.push(`${name}: /api/admin routes use rateLimit "admin"`);
      // Control-plane-only routes budget per credential; shared ones (`permission` set) use the
      // route's scope for users (gateway/agent callers are always budgeted in "control").
      const controlOnly = "controlPlane" in a && !("permission" in a);
      if (controlOnly && r.rateLimit !== "control")
        problems.push(`${name}: control-plane routes use rateLimit "control"`);
      if (
        !isAdmin &&
        r.url.startsWith("/api/") &&
        !("public" in a) &&
        !controlOnly &&
        r.rateLimit !== "api_default"
      ) {
        problems.push(`${name}: /api routes use rateLimit "api_default" (got ${r.rateLimit})`);
      }
    }
    expect(problems).toEqual([]);
  });

  it("every route answers each caller as its access rule says", async () => {
    const failures: string[] = [];
    const cases: { route: RouteRecord; p: Principal; want: Outcome }[] = [];
    for (const route of routes)
      for (const p of principals) cases.push({ route, p, want: expected(route.access, p) });
    // Bounded concurrency: the machine is shared.
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const c = cases[next++] as (typeof cases)[number];
        const { status, byRule } = await call(server, c.route, c.p.headers);
        // "allowed": the access rule let it through; the handler may still answer anything,
        // including its own 403 (e.g. a gateway acting for another gateway), but not 401.
        const ok =
          c.want === "401"
            ? status === 401
            : c.want === "403"
              ? status === 403 && byRule
              : c.want === "not-401"
                ? status !== 401
                : status !== 401 && !byRule;
        if (!ok) {
          failures.push(
            `${c.route.method} ${c.route.url} as ${c.p.who}: expected ${c.want}, got ${status} (rule ${JSON.stringify(c.route.access)})`,
          );
        }
      }
    };
    await Promise.all(Array.from({ length: 4 }, worker));
    expect(failures).toEqual([]);
  }, 600_000);

  it("a route without config.access stops the server from starting", async () => {
    const bad = {
      name: "bad",
      routes(app: import("fastify").FastifyInstance) {
        app.get("/api/v1/no-policy", async () => ({}));
      },
    };
    await expect(startTestServer({ features: [createAccessFeature(), bad] })).rejects.toThrow(
      /declares no config\.access/,
    );
  });
});
