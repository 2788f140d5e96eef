/**
 * `netmon dashboard …` as a real child process: keygen and sign locally, publish/enable/disable
 * against a running server (errors printed with their code), trusted keys in the database.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addPublisherKey } from "../../src/dashboards/keys.ts";
import { createUser, tokenFor } from "../helpers/auth.ts";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

const EXAMPLE = path.resolve("examples/dashboards/device-availability");

let server: TestServer;
let ws: CliWorkspace;

beforeAll(async () => {
  server = await startTestServer();
  ws = await cliWorkspace("netmon-dash-cli");
  const admin = await createUser(server, { role: "admin" });
  ws.env.NETMON_TOKEN = await tokenFor(server, { id: admin.id });
}, 120_000);
afterAll(async () => {
  await server?.stop();
  ws?.cleanup();
});

describe("netmon dashboard", () => {
  it("keygen, sign, publish (verified by a trusted key), enable, disable", async () => {
    const prefix = path.join(ws.dir, "publisher");
    const gen = await ws.netmon("dashboard", "keygen", "--out", prefix);
    expect(gen.code, gen.stderr).toBe(0);
    expect(fs.statSync(`${prefix}.key`).mode & 0o777).toBe(0o600);
    expect((await ws.netmon("dashboard", "keygen", "--out", prefix)).code).toBe(2);
    await addPublisherKey(server.ctx, "cli-test", fs.readFileSync(`${prefix}.pub`, "utf8"));

    const manifest = path.join(EXAMPLE, "manifest.json");
    const renderer = path.join(EXAMPLE, "renderer.js");
    const sig = await ws.netmon(
      "dashboard",
      "sign",
      "--manifest",
      manifest,
      "--renderer",
      renderer,
      "--key",
      `${prefix}.key`,
    );
    expect(sig.code, sig.stderr).toBe(0);
    expect(sig.stdout.trim()).toMatch(/^[A-Za-z0-9+/]{86}==$/);

    const bad = await ws.netmon(
      "dashboard",
      "publish",
      "--server",
      server.url,
      "--manifest",
      manifest,
      "--renderer",
      renderer,
      "--route",
      "Not A Slug",
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("error: invalid_route (400)");

    const pub = await ws.netmon(
      "dashboard",
      "publish",
      "--server",
      server.url,
      "--manifest",
      manifest,
      "--renderer",
      renderer,
      "--route",
      "cli-availability",
      "--signature",
      sig.stdout.trim(),
    );
    expect(pub.code, pub.stderr).toBe(0);
    const published = JSON.parse(pub.stdout) as Record<string, string>;
    expect(published).toMatchObject({ status: "staged", result: "written", verification_status: "verified" });

    const en = await ws.netmon("dashboard", "enable", published.id as string, "--server", server.url);
    expect(en.code, en.stderr).toBe(0);
    expect(JSON.parse(en.stdout)).toMatchObject({ status: "enabled", route_slug: "cli-availability" });

    const other = await ws.netmon(
      "dashboard",
      "publish",
      "--server",
      server.url,
      "--manifest",
      manifest,
      "--renderer",
      renderer,
      "--sign-key",
      `${prefix}.key`,
    );
    expect(JSON.parse(other.stdout)).toMatchObject({ result: "idempotent_noop" });

    const dis = await ws.netmon("dashboard", "disable", published.id as string, "--server", server.url);
    expect(dis.code, dis.stderr).toBe(0);
    expect(JSON.parse(dis.stdout)).toMatchObject({ status: "disabled" });
    const missing = await ws.netmon(
      "dashboard",
      "enable",
      "00000000-0000-4000-8000-000000000000",
      "--server",
      server.url,
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("error: not_found (404)");
  }, 180_000);

  it("keys add, list and remove in the installation's database", async () => {
    const prefix = path.join(ws.dir, "second");
    expect((await ws.netmon("dashboard", "keygen", "--out", prefix)).code).toBe(0);
    const add = await ws.netmon(
      "dashboard",
      "keys",
      "add",
      "--name",
      "release",
      "--public-key",
      `${prefix}.pub`,
    );
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toMatch(/^trusted release sha256:[0-9a-f]{64}/);
    const dup = await ws.netmon(
      "dashboard",
      "keys",
      "add",
      "--name",
      "again",
      "--public-key",
      `${prefix}.pub`,
    );
    expect(dup.code).toBe(1);
    const notKey = await ws.netmon(
      "dashboard",
      "keys",
      "add",
      "--name",
      "junk",
      "--public-key",
      `${prefix}.key`,
    );
    expect(notKey.code).toBe(1);
    const list = await ws.netmon("dashboard", "keys", "list");
    expect(list.stdout).toContain("release\tsha256:");
    expect((await ws.netmon("dashboard", "keys", "remove", "release")).code).toBe(0);
    expect((await ws.netmon("dashboard", "keys", "list")).stdout).toContain("(no trusted publisher keys)");
  }, 180_000);
});
