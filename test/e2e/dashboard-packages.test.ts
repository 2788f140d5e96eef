/**
 * Dashboard packages over real HTTP (spec 4.6, 7's dashboard table, 8): every error row, the
 * invariants (one enabled owner per slug under a concurrent race, idempotent re-publish, one
 * audit record per action that survives an audit failure), the per-JWT publish budget, Ed25519
 * verification and the renderer/frames endpoints a browser uses.
 */
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { tableFromIPC } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addPublisherKey } from "../../src/dashboards/keys.ts";
import { generateSigningKeyPair, signPackage } from "../../src/dashboards/signing.ts";
import { authHeaders, createUser, tokenFor } from "../helpers/auth.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { seedAll } from "./srql-seed.ts";

let server: TestServer;
let admin: string;
let adminId: string;
const trusted = generateSigningKeyPair();
const stranger = generateSigningKeyPair();

beforeAll(async () => {
  server = await startTestServer({ env: { NETMON_RATE_LIMIT_API_DEFAULT: "100000/60s" } });
  const user = await createUser(server, { role: "admin" });
  adminId = user.id;
  admin = await tokenFor(server, { id: user.id });
  await addPublisherKey(server.ctx, "ci", trusted.publicKeyPem);
  await seedAll(server.db);
}, 120_000);
afterAll(async () => {
  await server?.stop();
});

const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");
let seq = 0;
const uniqueId = (p = "dash") => `${p}-${Date.now().toString(36)}-${++seq}`;

interface Pkg {
  manifest: Record<string, unknown>;
  renderer: Buffer;
}

function pkg(
  id = uniqueId(),
  opts: { version?: string; body?: string; frames?: unknown[]; caps?: string[] } = {},
): Pkg {
  const renderer = Buffer.from(
    opts.body ??
      `export function mountDashboard(root) { root.textContent = ${JSON.stringify(id)}; return { destroy() {} }; }\n`,
  );
  return {
    renderer,
    manifest: {
      id,
      name: `Dashboard ${id}`,
      version: opts.version ?? "1.0.0",
      renderer: {
        kind: "browser_module",
        interface_version: "dashboard-browser-module-v1",
        artifact: "renderer.js",
        sha256: sha(renderer),
        trust: "trusted",
        entrypoint: "mountDashboard",
      },
      data_frames: opts.frames ?? [
        { id: "devices", query: "in:devices sort:hostname:asc", encoding: "arrow_ipc", limit: 3 },
      ],
      capabilities: opts.caps ?? ["srql.execute"],
    },
  };
}

function signed(p: Pkg, key = trusted.privateKeyPem): string {
  return signPackage(key, p.manifest, sha(p.renderer));
}

interface PublishOpts {
  token?: string | null;
  route?: string;
  signature?: string;
  manifestType?: string;
  rendererType?: string;
  omit?: "manifest" | "renderer";
  manifestBytes?: Buffer;
}

async function publish(
  p: Pkg,
  o: PublishOpts = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const form = new FormData();
  if (o.omit !== "manifest") {
    const bytes = o.manifestBytes ?? Buffer.from(JSON.stringify(p.manifest));
    form.append(
      "manifest",
      new Blob([bytes], { type: o.manifestType ?? "application/json" }),
      "manifest.json",
    );
  }
  if (o.omit !== "renderer") {
    form.append(
      "renderer",
      new Blob([p.renderer], { type: o.rendererType ?? "text/javascript" }),
      "renderer.js",
    );
  }
  if (o.route !== undefined) form.append("route", o.route);
  if (o.signature !== undefined) form.append("signature", o.signature);
  // A fresh JWT per publish unless the test names one: the publish budget is per JWT (10 per 60 s).
  const token = o.token === undefined ? await tokenFor(server, { id: adminId }) : o.token;
  const res = await server.fetch("/api/v1/dashboard-packages", {
    method: "POST",
    headers: token === null ? {} : authHeaders(token),
    body: form,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

async function post(path: string, body?: unknown, token = admin) {
  const res = await server.fetch(path, {
    method: "POST",
    headers: { ...authHeaders(token), ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const enable = (id: unknown, route?: string) =>
  post(`/api/v1/dashboard-packages/${id}/enable`, route === undefined ? undefined : { route });
const disable = (id: unknown) => post(`/api/v1/dashboard-packages/${id}/disable`);

async function auditFor(dashboardId: string) {
  return server.db.many<{
    action: string;
    result: string;
    reason: string | null;
    jti: string | null;
    actor_user_id: string | null;
    content_hash: string | null;
    route_slug: string | null;
    version: string | null;
  }>("SELECT * FROM dashboard_package_audit WHERE dashboard_id = $1 ORDER BY id", [dashboardId]);
}

describe("publishing: the error table (spec 7)", () => {
  it("401 unauthorized without, with an unknown and with a revoked bearer JWT", async () => {
    for (const token of [null, "not-a-jwt"]) {
      const r = await publish(pkg(), { token });
      expect(r.status).toBe(401);
      expect(r.body.error).toBe("unauthorized");
    }
    const user = await createUser(server, { role: "admin" });
    const t = await tokenFor(server, { id: user.id });
    await server.db.query("UPDATE api_tokens SET revoked_at = now() WHERE user_id = $1", [user.id]);
    const r = await publish(pkg(), { token: t });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("unauthorized");
  });

  it("403 insufficient_scope for a JWT without dashboard.publish; 403 forbidden without the permission", async () => {
    const noScope = await tokenFor(server, "admin", { scopes: ["read", "write"] });
    const r1 = await publish(pkg(), { token: noScope });
    expect(r1.status).toBe(403);
    expect(r1.body).toMatchObject({ error: "insufficient_scope", required: "dashboard.publish" });
    const viewer = await tokenFor(server, "viewer");
    const r2 = await publish(pkg(), { token: viewer });
    expect(r2.status).toBe(403);
    expect(r2.body.error).toBe("forbidden");
  });

  it("400 missing_part names the missing part", async () => {
    const m = await publish(pkg(), { omit: "manifest" });
    expect(m.status).toBe(400);
    expect(m.body).toMatchObject({ error: "missing_part", part: "manifest" });
    const r = await publish(pkg(), { omit: "renderer" });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: "missing_part", part: "renderer" });
  });

  it("400 invalid_route for a slug outside the pattern", async () => {
    for (const route of ["-lead", "UPPER", "a", "x".repeat(64), "has space", "ok/../x"]) {
      const r = await publish(pkg(), { route });
      expect(r.status, route).toBe(400);
      expect(r.body.error).toBe("invalid_route");
    }
  });

  it("400 invalid_manifest lists every problem of the closed schema", async () => {
    const p = pkg();
    const m = p.manifest as Record<string, unknown> & { renderer: Record<string, unknown> };
    m.extra = true;
    m.version = "1.0";
    m.capabilities = ["srql.execute", "root.shell"];
    m.renderer.kind = "browser_wasm";
    m.renderer.surprise = 1;
    m.data_frames = [
      { id: "a", query: "in:devices", encoding: "json" },
      { id: "a", query: "in:devices", encoding: "csv" },
    ];
    const r = await publish(p);
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_manifest");
    const errors = (r.body.errors as string[]).join("\n");
    expect(errors).toContain("unsupported key: extra");
    expect(errors).toContain("version must be a valid semver string");
    expect(errors).toContain("manifest.capabilities.1 must be one of");
    expect(errors).toContain("manifest.renderer.kind must be");
    expect(errors).toContain("unsupported key: surprise");
    expect(errors).toContain("manifest.data_frames.1.encoding must be one of");
    expect(errors).toContain("duplicate ids: a");

    const notJson = await publish(pkg(), { manifestBytes: Buffer.from("{nope") });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error).toBe("invalid_manifest");
    const missing = pkg();
    delete missing.manifest.data_frames;
    const r2 = await publish(missing);
    expect(r2.body.errors).toContain("missing required field: manifest.data_frames");
  });

  it("413 payload_too_large names the manifest or the renderer part", async () => {
    const big = Buffer.alloc(262_145, 0x20);
    const m = await publish(pkg(), { manifestBytes: big });
    expect(m.status).toBe(413);
    expect(m.body).toMatchObject({ error: "payload_too_large", part: "manifest" });

    const huge = pkg(uniqueId(), { body: "x".repeat(50 * 1024 * 1024 + 1) });
    const r = await publish(huge);
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ error: "payload_too_large", part: "renderer" });
    const rows = await server.db.many("SELECT 1 FROM dashboard_packages WHERE dashboard_id = $1", [
      huge.manifest.id,
    ]);
    expect(rows).toHaveLength(0);
  }, 120_000);

  it("415 unsupported_media_type for a part outside the allow-list", async () => {
    const r = await publish(pkg(), { rendererType: "text/plain" });
    expect(r.status).toBe(415);
    expect(r.body).toMatchObject({ error: "unsupported_media_type", part: "renderer" });
    const m = await publish(pkg(), { manifestType: "text/plain" });
    expect(m.status).toBe(415);
    expect(m.body).toMatchObject({ error: "unsupported_media_type", part: "manifest" });
    for (const type of ["application/javascript", "application/wasm", "text/javascript; charset=utf-8"]) {
      expect((await publish(pkg(), { rendererType: type })).status, type).toBe(200);
    }
  });

  it("422 unprocessable_renderer when renderer.sha256 differs from the bytes", async () => {
    const p = pkg();
    p.renderer = Buffer.from("export function mountDashboard() { return { destroy() {} }; } // changed");
    const r = await publish(p);
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ error: "unprocessable_renderer", reason: "sha256_mismatch" });
  });

  it("429 rate_limited on the 11th publish within 60 s on one JWT, with Retry-After", async () => {
    const token = await tokenFor(server, { id: adminId });
    const p = pkg();
    for (let i = 0; i < 10; i++) expect((await publish(p, { token })).status).toBe(200);
    const r = await publish(p, { token });
    expect(r.status).toBe(429);
    expect(r.body.error).toBe("rate_limited");
    expect(Number(r.body.retry_after)).toBeGreaterThan(0);
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
    // The budget is the JWT's, not the user's: another token of the same user still publishes.
    expect((await publish(p)).status).toBe(200);
  });
});

describe("publishing: results and invariants", () => {
  it("answers the spec 2.10 fields; the same id@version and bytes is an idempotent no-op", async () => {
    const p = pkg();
    const first = await publish(p, { route: uniqueId("slug") });
    expect(first.status).toBe(200);
    expect(first.headers.get("cache-control")).toBe("no-store");
    expect(first.body).toMatchObject({
      dashboard_id: p.manifest.id,
      version: "1.0.0",
      status: "staged",
      content_hash: sha(p.renderer),
      result: "written",
    });
    const again = await publish(p);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      id: first.body.id,
      result: "idempotent_noop",
      content_hash: sha(p.renderer),
    });
  });

  it("other bytes replace a pending package (verification restarts) and are refused over an enabled or verified one", async () => {
    const id = uniqueId();
    const a = pkg(id);
    const first = await publish(a);
    const b = pkg(id, { body: "export function mountDashboard() { return { destroy() {} }; } // v2 bytes" });
    const over = await publish(b);
    expect(over.status).toBe(200);
    expect(over.body).toMatchObject({
      id: first.body.id,
      result: "written",
      content_hash: sha(b.renderer),
      verification_status: "pending",
    });

    // Verified (not yet enabled): locked.
    const c = pkg(id, { body: "export function mountDashboard() { return { destroy() {} }; } // v3 bytes" });
    expect((await post(`/api/v1/dashboard-packages/${first.body.id}/verify`)).status).toBe(200);
    const locked = await publish(c);
    expect(locked.status).toBe(409);
    expect(locked.body.error).toBe("version_already_published");

    // Enabled: locked.
    expect((await enable(first.body.id, uniqueId("slug"))).status).toBe(200);
    expect((await publish(c)).body.error).toBe("version_already_published");

    // Disabled: replaced, and verification starts again.
    expect((await disable(first.body.id)).status).toBe(200);
    const replaced = await publish(c);
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({
      result: "written",
      verification_status: "pending",
      content_hash: sha(c.renderer),
    });
  });

  it("409 slug_in_use when publishing to a slug another dashboard holds enabled", async () => {
    const slug = uniqueId("held");
    const owner = pkg();
    const o = await publish(owner, { route: slug, signature: signed(owner) });
    expect((await enable(o.body.id)).status).toBe(200);
    const r = await publish(pkg(), { route: slug });
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({
      error: "slug_in_use",
      route: slug,
      owner_dashboard_id: owner.manifest.id,
    });
    // A new version of the owner may take the slug over.
    const next = pkg(owner.manifest.id as string, { version: "1.1.0" });
    const n = await publish(next, { route: slug, signature: signed(next) });
    expect(n.status).toBe(200);
    expect((await enable(n.body.id)).status).toBe(200);
    const old = await server.fetch(`/api/v1/dashboard-packages/${o.body.id}`, {
      headers: authHeaders(admin),
    });
    expect(((await old.json()) as { data: { status: string } }).data.status).toBe("disabled");
  });

  it("a concurrent race for one fresh slug has exactly one winner; the others get 409 slug_in_use", async () => {
    const slug = uniqueId("race");
    const pkgs = Array.from({ length: 20 }, () => pkg());
    const published = await Promise.all(pkgs.map((p) => publish(p, { route: slug, signature: signed(p) })));
    expect(published.map((r) => r.status)).toEqual(Array(20).fill(200));
    const enabled = await Promise.all(published.map((r) => enable(r.body.id)));
    const winners = enabled.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    const losers = enabled.filter((r) => r.status !== 200);
    expect(losers).toHaveLength(19);
    for (const l of losers) expect(l.body).toMatchObject({ error: "slug_in_use", route: slug });
    const owners = await server.db.many(
      "SELECT dashboard_id FROM dashboard_packages WHERE route_slug = $1 AND status = 'enabled'",
      [slug],
    );
    expect(owners).toEqual([{ dashboard_id: winners[0]?.body.dashboard_id }]);
    // After the race, publishes of other dashboards to that slug are refused.
    const late = await Promise.all(Array.from({ length: 5 }, () => publish(pkg(), { route: slug })));
    expect(late.map((r) => r.body.error)).toEqual(Array(5).fill("slug_in_use"));
  }, 120_000);

  it("every publish, enable and disable writes one audit record, refusals included", async () => {
    const token = await tokenFor(server, { id: adminId });
    const jti = (
      JSON.parse(Buffer.from(token.split(".")[1] as string, "base64url").toString()) as { jti: string }
    ).jti;
    const p = pkg();
    const slug = uniqueId("audit");
    const first = await publish(p, { token, route: slug, signature: signed(p) });
    await publish(p, { token });
    const bad = pkg(p.manifest.id as string, { body: "export const x = 1;" });
    (bad.manifest.renderer as Record<string, unknown>).sha256 = sha("something else");
    expect((await publish(bad, { token })).status).toBe(422);
    expect((await enable(first.body.id)).status).toBe(200);
    expect((await disable(first.body.id)).status).toBe(200);
    const rows = await auditFor(p.manifest.id as string);
    expect(rows.map((r) => [r.action, r.result, r.reason])).toEqual([
      ["dashboard_publish", "written", null],
      ["dashboard_publish", "idempotent_noop", null],
      ["dashboard_publish", "rejected", "unprocessable_renderer"],
      ["dashboard_enable", "enabled", null],
      ["dashboard_disable", "disabled", null],
    ]);
    expect(rows[0]).toMatchObject({
      jti,
      actor_user_id: adminId,
      content_hash: sha(p.renderer),
      route_slug: slug,
      version: "1.0.0",
    });
    expect(rows[3]?.actor_user_id).toBe(adminId);
  });

  it("a caller refused by the permission rule is audited too", async () => {
    const viewer = await createUser(server, { role: "viewer" });
    const token = await tokenFor(server, { id: viewer.id });
    expect((await publish(pkg(), { token })).status).toBe(403);
    await expect
      .poll(() =>
        server.db.many(
          "SELECT action, result, reason FROM dashboard_package_audit WHERE actor_user_id = $1",
          [viewer.id],
        ),
      )
      .toEqual([{ action: "dashboard_publish", result: "rejected", reason: "forbidden" }]);
  });

  it("a failing audit write never fails the request", async () => {
    await server.db.query(
      "ALTER TABLE dashboard_package_audit ADD CONSTRAINT audit_broken_for_test CHECK (action = 'never') NOT VALID",
    );
    try {
      const p = pkg();
      const r = await publish(p, { signature: signed(p), route: uniqueId("noaudit") });
      expect(r.status).toBe(200);
      expect((await enable(r.body.id)).status).toBe(200);
      expect((await disable(r.body.id)).status).toBe(200);
      expect(await auditFor(p.manifest.id as string)).toEqual([]);
      expect(server.logs.some((l) => l.includes("audit record could not be written"))).toBe(true);
    } finally {
      await server.db.query("ALTER TABLE dashboard_package_audit DROP CONSTRAINT audit_broken_for_test");
    }
  });
});

describe("verification, lifecycle and the renderer asset", () => {
  it("signed by a trusted key → verified; another key → failed; unsigned → pending until an admin verifies", async () => {
    const good = pkg();
    const g = await publish(good, { signature: signed(good) });
    expect(g.body.verification_status).toBe("verified");

    const other = pkg();
    const o = await publish(other, { signature: signed(other, stranger.privateKeyPem) });
    expect(o.status).toBe(200);
    expect(o.body.verification_status).toBe("failed");
    expect((await enable(o.body.id, uniqueId("s"))).body.error).toBe("verification_required");

    // A signature over other bytes (the manifest changed after signing) does not verify.
    const tampered = pkg();
    const sig = signed(tampered);
    tampered.manifest.name = "renamed after signing";
    expect((await publish(tampered, { signature: sig })).body.verification_status).toBe("failed");

    const unsigned = pkg();
    const u = await publish(unsigned, { route: uniqueId("pending") });
    expect(u.body.verification_status).toBe("pending");
    const refused = await enable(u.body.id);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: "verification_required", id: u.body.id });

    const operator = await tokenFor(server, "operator");
    expect((await post(`/api/v1/dashboard-packages/${u.body.id}/verify`, undefined, operator)).status).toBe(
      403,
    );
    const v = await post(`/api/v1/dashboard-packages/${u.body.id}/verify`);
    expect(v.status).toBe(200);
    expect((await enable(u.body.id)).status).toBe(200);
  });

  it("the renderer is served only while enabled and verified; reject disables", async () => {
    const p = pkg();
    const r = await publish(p, { signature: signed(p), route: uniqueId("asset") });
    const viewer = await tokenFor(server, "viewer");
    const asset = () =>
      server.fetch(`/api/v1/dashboard-packages/${r.body.id}/renderer`, { headers: authHeaders(viewer) });
    expect((await asset()).status).toBe(404); // verified but staged
    expect((await enable(r.body.id)).status).toBe(200);
    const ok = await asset();
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect(Buffer.from(await ok.arrayBuffer())).toEqual(p.renderer);
    // The bytes are in the database: a replica without the local file (or this one after its
    // cache is gone) serves them all the same.
    const hash = createHash("sha256").update(p.renderer).digest("hex");
    fs.rmSync(path.join(server.dataDir, "dashboards", "renderers", hash));
    const again = await asset();
    expect(again.status).toBe(200);
    expect(Buffer.from(await again.arrayBuffer())).toEqual(p.renderer);
    expect(fs.existsSync(path.join(server.dataDir, "dashboards", "renderers", hash))).toBe(true);
    expect((await disable(r.body.id)).status).toBe(200);
    expect((await asset()).status).toBe(404);
    expect((await enable(r.body.id)).status).toBe(200);
    expect((await asset()).status).toBe(200);
    const rej = await post(`/api/v1/dashboard-packages/${r.body.id}/reject`, { reason: "bad vendor" });
    expect(rej.body.data).toMatchObject({
      status: "disabled",
      verification_status: "failed",
      verification_error: "bad vendor",
    });
    expect((await asset()).status).toBe(404);
  });

  it("enable and disable: 404 for an unknown id, invalid_route for a bad slug, permission checked", async () => {
    expect((await enable("00000000-0000-4000-8000-000000000000")).status).toBe(404);
    expect((await enable("not-a-uuid")).status).toBe(404);
    const p = pkg();
    const r = await publish(p, { signature: signed(p) });
    const bad = await enable(r.body.id, "Bad Slug");
    expect(bad.body.error).toBe("invalid_route");
    const noRoute = await enable(r.body.id);
    expect(noRoute.body.error).toBe("invalid_route");
    const viewer = await tokenFor(server, "viewer");
    expect((await post(`/api/v1/dashboard-packages/${r.body.id}/enable`, undefined, viewer)).status).toBe(
      403,
    );
    expect((await post(`/api/v1/dashboard-packages/${r.body.id}/disable`, undefined, viewer)).status).toBe(
      403,
    );
  });

  it("lists packages for dashboards.packages.view_all and installed dashboards for any signed-in user", async () => {
    const p = pkg();
    const slug = uniqueId("listed");
    const r = await publish(p, { signature: signed(p), route: slug });
    await enable(r.body.id);
    const all = await server.fetch("/api/v1/dashboard-packages", { headers: authHeaders(admin) });
    expect(((await all.json()) as { data: { id: string }[] }).data.some((x) => x.id === r.body.id)).toBe(
      true,
    );
    const viewer = await tokenFor(server, "viewer");
    expect((await server.fetch("/api/v1/dashboard-packages", { headers: authHeaders(viewer) })).status).toBe(
      403,
    );
    const mine = await server.fetch(`/api/v1/dashboards/${slug}`, { headers: authHeaders(viewer) });
    expect(mine.status).toBe(200);
    expect(((await mine.json()) as { data: Record<string, unknown> }).data).toMatchObject({
      id: r.body.id,
      route_slug: slug,
      content_hash: sha(p.renderer),
      entrypoint: "mountDashboard",
    });
  });
});

describe("the dashboards SRQL entity", () => {
  it("lists packages through POST /api/query for holders of dashboards.packages.view_all", async () => {
    const p = pkg();
    const r = await publish(p, { signature: signed(p), route: uniqueId("srql") });
    await enable(r.body.id);
    const query = (token: string, q: string) =>
      server.fetch("/api/query", {
        method: "POST",
        headers: { ...authHeaders(token), "content-type": "application/json" },
        body: JSON.stringify({ query: q }),
      });
    const res = await query(admin, `in:dashboards dashboard_id:${p.manifest.id}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { results: Record<string, unknown>[] };
    expect(body.results).toHaveLength(1);
    expect(body.results[0]).toMatchObject({
      id: r.body.id,
      dashboard_id: p.manifest.id,
      status: "enabled",
      verification_status: "verified",
      content_hash: sha(p.renderer),
    });
    const counted = await query(admin, 'in:dashboards stats:"count() by status"');
    expect(counted.status).toBe(200);
    expect((await query(await tokenFor(server, "viewer"), "in:dashboards")).status).toBe(403);
  });
});

describe("data frames", () => {
  it("an arrow_ipc frame is an Arrow IPC stream with its pagination in headers; cursors page it", async () => {
    const p = pkg();
    const r = await publish(p, { signature: signed(p), route: uniqueId("frames") });
    await enable(r.body.id);
    const viewer = await tokenFor(server, "viewer");
    const frame = (body: unknown) =>
      server.fetch(`/api/v1/dashboard-packages/${r.body.id}/frames/devices`, {
        method: "POST",
        headers: { ...authHeaders(viewer), "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const first = await frame({});
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toBe("application/vnd.apache.arrow.stream");
    const t1 = tableFromIPC(new Uint8Array(await first.arrayBuffer()));
    const names1 = t1.toArray().map((row) => row.toJSON().hostname);
    expect(names1).toEqual(["cam-garage", "cam-lobby", "core-sw1"]);
    expect(t1.getChild("is_available")?.toArray()).toBeTruthy();
    expect(first.headers.get("x-srql-limit")).toBe("3");
    const next = first.headers.get("x-srql-next-cursor");
    expect(next).toBeTruthy();
    const second = await frame({ cursor: next });
    const names2 = tableFromIPC(new Uint8Array(await second.arrayBuffer()))
      .toArray()
      .map((row) => row.toJSON().hostname);
    expect(names2.length).toBeGreaterThan(0);
    expect(names2.some((n) => names1.includes(n))).toBe(false);
    // srql.update: another query, from offset 0.
    const updated = await frame({ query: "in:devices vendor_name:cisco sort:hostname:asc" });
    const names3 = tableFromIPC(new Uint8Array(await updated.arrayBuffer()))
      .toArray()
      .map((x) => x.toJSON().hostname);
    expect(names3).toEqual(["core-sw1", "edge-rtr"]);
  });

  it("without srql.execute the frame runs only its manifest query; frames of a disabled package are gone", async () => {
    const p = pkg(uniqueId(), { caps: ["map.basemap.read"] });
    const r = await publish(p, { signature: signed(p), route: uniqueId("nocap") });
    await enable(r.body.id);
    const call = (body: unknown) =>
      server.fetch(`/api/v1/dashboard-packages/${r.body.id}/frames/devices`, {
        method: "POST",
        headers: { ...authHeaders(admin), "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    expect((await call({})).status).toBe(200);
    expect((await call({ query: "in:logs" })).status).toBe(400);
    expect((await call({ cursor: "abc" })).status).toBe(400);
    await disable(r.body.id);
    expect((await call({})).status).toBe(404);
  });
});
