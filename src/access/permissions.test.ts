import { describe, expect, it } from "vitest";
import { hashPassword, verifyPassword } from "./passwords.ts";
import { effectivePermissions, PERMISSION_KEYS, PERMISSIONS, roleDefaults } from "./permissions.ts";

const REQUIRED = `devices.view devices.ingest devices.create devices.update devices.delete devices.import
devices.export identity.resolve analytics.view services.view services.create services.update
services.delete services.run infrastructure.view infrastructure.manage observability.logs.view
observability.metrics.view observability.traces.view observability.events.view
observability.alerts.view observability.alerts.manage alerts.acknowledge observability.rules.view
observability.rules.create observability.rules.update observability.rules.delete
notifications.channels.view notifications.channels.manage notifications.routes.view
notifications.routes.manage settings.view settings.jobs.manage settings.networks.manage
settings.rbac.manage settings.auth.manage cli.dashboard.publish cli.dashboard.enable
cli.dashboard.disable`.split(/\s+/);

describe("permission catalog", () => {
  it("contains every key the other domains use, once", () => {
    for (const k of REQUIRED) expect(PERMISSION_KEYS.has(k), k).toBe(true);
    expect(PERMISSION_KEYS.size).toBe(PERMISSIONS.length);
  });

  it("roles are cumulative: viewer ⊂ operator ⊂ admin, admin holds everything", () => {
    const v = roleDefaults("viewer");
    const o = roleDefaults("operator");
    const a = roleDefaults("admin");
    for (const k of v) expect(o.has(k)).toBe(true);
    for (const k of o) expect(a.has(k)).toBe(true);
    expect(a.size).toBe(PERMISSIONS.length);
    expect(v.has("devices.view")).toBe(true);
    expect(v.has("devices.create")).toBe(false);
    expect(o.has("alerts.acknowledge")).toBe(true);
    expect(o.has("settings.rbac.manage")).toBe(false);
    for (const k of ["cli.dashboard.publish", "cli.dashboard.enable", "cli.dashboard.disable"]) {
      expect(o.has(k)).toBe(false);
      expect(a.has(k)).toBe(true);
    }
  });

  it("a profile is the base role plus grants minus revokes; unknown grants are ignored", () => {
    const p = effectivePermissions("viewer", ["devices.create", "made.up"], ["devices.view"]);
    expect(p.has("devices.create")).toBe(true);
    expect(p.has("devices.view")).toBe(false);
    expect(p.has("made.up")).toBe(false);
    // A revoke wins over a grant of the same key.
    expect(effectivePermissions("viewer", ["devices.create"], ["devices.create"]).has("devices.create")).toBe(
      false,
    );
  });
});

describe("password hashing", () => {
  it("uses argon2id and verifies only the right password", async () => {
    const h = await hashPassword("correct horse");
    expect(h.startsWith("$argon2id$")).toBe(true);
    expect(await verifyPassword(h, "correct horse")).toBe(true);
    expect(await verifyPassword(h, "wrong horse")).toBe(false);
    expect(await verifyPassword(null, "anything")).toBe(false);
    expect(await verifyPassword("not-a-hash", "anything")).toBe(false);
  });
});
