import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import { AppError } from "../kernel/errors.ts";
import type { Db } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";
import { runDeviceCleanup } from "./cleanup.ts";
import type { DeviceRow } from "./device.ts";
import { resolveAddresses, resolveBatch, resolveOne } from "./identity.ts";
import { ingestSightings, LAST_SEEN_RESOLUTION_MS } from "./ingest.ts";
import { actorWith, testContext } from "./testing/context.ts";
import { DEVICE_UID_RE, deterministicUid } from "./uid.ts";

let db: Db;
let ctx: ReturnType<typeof testContext>;
const ingester = actorWith(["devices.ingest"]);
const resolver = actorWith(["identity.resolve"]);

beforeEach(async () => {
  db = (await createTestDatabase()).db;
  ctx = testContext(db);
});
afterEach(async () => {
  await db.close();
});

const device = (uid: string) => db.one<DeviceRow>(sql`SELECT * FROM devices WHERE uid = ${uid}`);
const count = async () => (await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM devices`))?.n;

async function errorOf(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof AppError) return e;
    throw e;
  }
  throw new Error("expected an error");
}

describe("ingestion", () => {
  it("creates a device with a deterministic sr: uid and merges later sightings", async () => {
    ctx.setNow(new Date("2026-01-01T00:00:00Z"));
    const r1 = await ingestSightings(ctx, ingester, [
      {
        ip: "10.0.0.1",
        mac: "00:11:22:33:44:55",
        hostname: "a",
        source: "sweep",
        observed_at: "2026-01-01T00:00:00Z",
      },
    ]);
    const uid = r1.results[0]?.uid as string;
    expect(uid).toMatch(DEVICE_UID_RE);
    expect(uid).toBe(deterministicUid("default", { mac: "001122334455" }, "10.0.0.1"));
    expect(r1.created).toBe(1);

    const r2 = await ingestSightings(ctx, ingester, [
      {
        ip: "10.0.0.1",
        source: "snmp",
        vendor_name: "Cisco",
        observed_at: "2026-01-02T00:00:00Z",
        is_available: true,
      },
    ]);
    expect(r2.results[0]?.uid).toBe(uid);
    expect(r2.created).toBe(0);
    expect(r2.updated).toBe(1);
    // An older sighting keeps first_seen and does not move last_seen back.
    await ingestSightings(ctx, ingester, [
      { ip: "10.0.0.1", source: "sweep", observed_at: "2025-12-31T00:00:00Z", metadata: { rack: "r1" } },
    ]);
    const d = (await device(uid)) as DeviceRow;
    expect(d.discovery_sources).toEqual(["sweep", "snmp"]);
    expect(d.first_seen_time.toISOString()).toBe("2025-12-31T00:00:00.000Z");
    expect(d.last_seen_time.toISOString()).toBe("2026-01-02T00:00:00.000Z");
    expect(d.hostname).toBe("a");
    expect(d.vendor_name).toBe("Cisco");
    expect(d.mac).toBe("00:11:22:33:44:55");
    expect(d.is_available).toBe(true);
    expect(d.metadata).toEqual({ rack: "r1" });
    expect(await count()).toBe(1);
  });

  it("keeps first_seen when a later sighting arrives and advances last_seen", async () => {
    const [a] = (
      await ingestSightings(ctx, ingester, [
        { ip: "10.1.0.1", source: "s", observed_at: "2026-02-01T00:00:00Z" },
      ])
    ).results;
    await ingestSightings(ctx, ingester, [
      { ip: "10.1.0.1", source: "s", observed_at: "2026-02-03T00:00:00Z" },
    ]);
    const d = (await device(a?.uid as string)) as DeviceRow;
    expect(d.first_seen_time.toISOString()).toBe("2026-02-01T00:00:00.000Z");
    expect(d.last_seen_time.toISOString()).toBe("2026-02-03T00:00:00.000Z");
  });

  it("moves first_seen back (and keeps last_seen) when an older sighting arrives late", async () => {
    const [a] = (
      await ingestSightings(ctx, ingester, [
        { ip: "10.1.0.2", source: "s", observed_at: "2026-02-03T00:00:00Z" },
      ])
    ).results;
    await ingestSightings(ctx, ingester, [
      { ip: "10.1.0.2", source: "t", observed_at: "2026-02-01T00:00:00Z" },
    ]);
    const d = (await device(a?.uid as string)) as DeviceRow;
    expect(d.first_seen_time.toISOString()).toBe("2026-02-01T00:00:00.000Z");
    expect(d.last_seen_time.toISOString()).toBe("2026-02-03T00:00:00.000Z");
    expect(d.discovery_sources).toEqual(["s", "t"]);
  });

  it("skips re-sightings that change nothing but advance last_seen by less than the resolution", async () => {
    const at = (s: number) => new Date(Date.parse("2026-02-01T00:00:00Z") + s * 1000).toISOString();
    const [a] = (await ingestSightings(ctx, ingester, [{ ip: "10.1.0.3", source: "s", observed_at: at(0) }]))
      .results;
    const uid = a?.uid as string;
    const seen = async () => ((await device(uid)) as DeviceRow).last_seen_time.toISOString();
    expect(LAST_SEEN_RESOLUTION_MS).toBe(60_000);
    const r = await ingestSightings(ctx, ingester, [{ ip: "10.1.0.3", source: "s", observed_at: at(30) }]);
    expect(r.results[0]?.uid).toBe(uid);
    expect(await seen()).toBe(at(0));
    // Any other change is written, with the new last_seen.
    await ingestSightings(ctx, ingester, [
      { ip: "10.1.0.3", source: "s", hostname: "h1", observed_at: at(40) },
    ]);
    expect(await seen()).toBe(at(40));
    // A full resolution later, last_seen advances on its own.
    await ingestSightings(ctx, ingester, [{ ip: "10.1.0.3", source: "s", observed_at: at(100) }]);
    expect(await seen()).toBe(at(100));
    expect(((await device(uid)) as DeviceRow).hostname).toBe("h1");
  });

  it("merges by strong identifier (MAC) when the IP changes: the IP moves with the device", async () => {
    const [a] = (
      await ingestSightings(ctx, ingester, [{ ip: "10.0.0.5", mac: "001122334466", source: "dhcp" }])
    ).results;
    const [b] = (
      await ingestSightings(ctx, ingester, [{ ip: "10.0.0.6", mac: "00-11-22-33-44-66", source: "dhcp" }])
    ).results;
    expect(b?.uid).toBe(a?.uid);
    expect((await device(a?.uid as string))?.ip).toBe("10.0.0.6");
    expect(await count()).toBe(1);
  });

  it("merges by agent_id, and agent_id outranks MAC", async () => {
    const [a] = (
      await ingestSightings(ctx, ingester, [{ ip: "10.0.1.1", agent_id: "agent-1", source: "agent" }])
    ).results;
    const [m] = (
      await ingestSightings(ctx, ingester, [{ ip: "10.0.1.2", mac: "001122334477", source: "sweep" }])
    ).results;
    expect(m?.uid).not.toBe(a?.uid);
    // agent-1 reports the MAC of the other device: the agent's device wins, the MAC stays put.
    const [x] = (
      await ingestSightings(ctx, ingester, [
        { ip: "10.0.1.3", agent_id: "agent-1", mac: "001122334477", source: "agent" },
      ])
    ).results;
    expect(x?.uid).toBe(a?.uid);
    const owner = await db.one<{ device_uid: string }>(
      sql`SELECT device_uid FROM device_identifiers WHERE identifier_type = 'mac' AND identifier_value = '001122334477'`,
    );
    expect(owner?.device_uid).toBe(m?.uid);
  });

  it("treats an IP as weak: a different MAC at a known IP is a different device, which takes the IP", async () => {
    const [a] = (await ingestSightings(ctx, ingester, [{ ip: "10.0.2.1", mac: "001122330001", source: "s" }]))
      .results;
    const [b] = (await ingestSightings(ctx, ingester, [{ ip: "10.0.2.1", mac: "001122330002", source: "s" }]))
      .results;
    expect(b?.uid).not.toBe(a?.uid);
    expect((await device(a?.uid as string))?.ip).toBeNull();
    expect((await device(b?.uid as string))?.ip).toBe("10.0.2.1");
  });

  it("enriches an IP-only device with a MAC seen later at that IP", async () => {
    const [a] = (await ingestSightings(ctx, ingester, [{ ip: "10.0.3.1", source: "sweep" }])).results;
    const [b] = (
      await ingestSightings(ctx, ingester, [{ ip: "10.0.3.1", mac: "001122330003", source: "snmp" }])
    ).results;
    expect(b?.uid).toBe(a?.uid);
    // Later the device moves: the MAC (now an identifier) follows it.
    const [c] = (
      await ingestSightings(ctx, ingester, [{ ip: "10.0.3.9", mac: "001122330003", source: "snmp" }])
    ).results;
    expect(c?.uid).toBe(a?.uid);
  });

  it("never merges on a locally administered MAC", async () => {
    const [a] = (
      await ingestSightings(ctx, ingester, [{ ip: "10.0.4.1", mac: "02:00:00:00:00:01", source: "s" }])
    ).results;
    const [b] = (
      await ingestSightings(ctx, ingester, [{ ip: "10.0.4.2", mac: "02:00:00:00:00:01", source: "s" }])
    ).results;
    expect(b?.uid).not.toBe(a?.uid);
  });

  it("isolates partitions: the same IP is a different device per partition", async () => {
    const res = await ingestSightings(ctx, ingester, [
      { ip: "10.9.9.9", source: "s" },
      { ip: "10.9.9.9", source: "s", partition: "branch" },
    ]);
    expect(res.created).toBe(2);
    expect(res.results[0]?.uid).not.toBe(res.results[1]?.uid);
  });

  it("reconciles sightings of one device inside a batch", async () => {
    const res = await ingestSightings(ctx, ingester, [
      { ip: "10.0.5.1", mac: "001122330005", source: "a" },
      { ip: "10.0.5.1", source: "b" },
      { ip: "10.0.5.2", mac: "001122330005", source: "c" },
    ]);
    const uids = new Set(res.results.map((r) => r.uid));
    expect(uids.size).toBe(1);
    const d = (await device([...uids][0] as string)) as DeviceRow;
    expect(d.discovery_sources).toEqual(["a", "b", "c"]);
    expect(d.ip).toBe("10.0.5.2");
    expect(res.created).toBe(1);
  });

  it("is atomic: one invalid item rejects the batch with per-item errors and writes nothing", async () => {
    const err = await errorOf(
      ingestSightings(ctx, ingester, [
        { ip: "10.0.6.1", source: "s" },
        { ip: "not-an-ip", source: "s" },
        { ip: "10.0.6.3" },
        { ip: "10.0.6.4", source: "s", mac: "zz" },
      ]),
    );
    expect(err.status).toBe(400);
    expect(err.code).toBe("invalid_updates");
    const errors = err.extra.errors as { index: number; error: string }[];
    expect(errors.map((e) => [e.index, e.error])).toEqual([
      [1, "invalid_ip"],
      [2, "missing_source"],
      [3, "invalid_mac"],
    ]);
    expect(await count()).toBe(0);
  });

  it("is atomic when the database fails half-way: nothing is written", async () => {
    await ingestSightings(ctx, ingester, [{ ip: "10.0.7.1", source: "s" }]);
    // A risk_score beyond int4 passes validation but fails in the database.
    const err = await ingestSightings(ctx, ingester, [
      { ip: "10.0.7.2", source: "s" },
      { ip: "10.0.7.1", source: "t", risk_score: 2 ** 40 },
    ]).catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(await count()).toBe(1);
    const d = await db.one<DeviceRow>(sql`SELECT * FROM devices WHERE ip = '10.0.7.1'`);
    expect(d?.discovery_sources).toEqual(["s"]);
  });

  it("rejects batches above 1000 and needs devices.ingest", async () => {
    const big = Array.from({ length: 1001 }, (_, i) => ({ ip: `10.1.${i >> 8}.${i & 255}`, source: "s" }));
    expect((await errorOf(ingestSightings(ctx, ingester, big))).code).toBe("too_many_updates");
    expect(
      (await errorOf(ingestSightings(ctx, actorWith(["devices.view"]), [{ ip: "10.0.0.1", source: "s" }])))
        .status,
    ).toBe(403);
  });

  it("refuses partitions outside the actor's partitions", async () => {
    const limited = actorWith(["devices.ingest"], ["branch"]);
    const err = await errorOf(ingestSightings(ctx, limited, [{ ip: "10.0.8.1", source: "s" }]));
    expect((err.extra.errors as { error: string }[])[0]?.error).toBe("partition_forbidden");
    const ok = await ingestSightings(ctx, limited, [{ ip: "10.0.8.1", source: "s", partition: "branch" }]);
    expect(ok.created).toBe(1);
  });

  it("concurrent batches of the same sightings create each device once (contended ingest lock)", async () => {
    // On PostgreSQL the batches queue on the ingest advisory lock (several pool connections);
    // on PGlite they run one after another. Either way the outcome is the serial one.
    const batch = Array.from({ length: 40 }, (_, k) => ({
      ip: `10.9.0.${k + 1}`,
      mac: `00:16:00:00:09:${(k + 1).toString(16).padStart(2, "0")}`,
      source: "sweep",
    }));
    const rs = await Promise.all([1, 2, 3, 4].map(() => ingestSightings(ctx, ingester, batch)));
    expect(rs.reduce((n, r) => n + r.created, 0)).toBe(40);
    expect(rs.reduce((n, r) => n + r.updated, 0)).toBe(120);
    for (const r of rs.slice(1))
      expect(r.results.map((x) => x.uid)).toEqual(rs[0]?.results.map((x) => x.uid));
    expect(await count()).toBe(40);
    const ids = await db.one<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM device_identifiers WHERE identifier_type = 'mac'`,
    );
    expect(ids?.n).toBe(40);
  });

  it("revives a soft-deleted device seen again by a strong identifier", async () => {
    const [a] = (await ingestSightings(ctx, ingester, [{ ip: "10.0.9.1", mac: "001122330009", source: "s" }]))
      .results;
    await db.query(sql`UPDATE devices SET deleted_at = now() WHERE uid = ${a?.uid}`);
    const [b] = (await ingestSightings(ctx, ingester, [{ ip: "10.0.9.2", mac: "001122330009", source: "s" }]))
      .results;
    expect(b?.uid).toBe(a?.uid);
    expect((await device(a?.uid as string))?.deleted_at).toBeNull();
  });
});

describe("identity resolution", () => {
  async function seed() {
    const res = await ingestSightings(ctx, ingester, [
      { ip: "192.168.1.10", mac: "AA:00:00:00:00:10", source: "s" },
      { ip: "192.168.1.11", mac: "AA:00:00:00:00:11", source: "s" },
      { ip: "192.168.1.10", source: "s", partition: "lab" },
      { ip: "2001:db8::10", source: "s" },
    ]);
    return res.results.map((r) => r.uid);
  }

  it("the IP is authoritative", async () => {
    const [d10] = await seed();
    expect(await resolveOne(ctx, resolver, { ip: "192.168.1.10" })).toEqual({
      ip: "192.168.1.10",
      partition: "default",
      uid: d10,
    });
  });

  it("a MAC held by no device is ignored; the IP's own MAC corroborates", async () => {
    const [d10] = await seed();
    expect((await resolveOne(ctx, resolver, { ip: "192.168.1.10", mac: "BB:BB:BB:BB:BB:BB" })).uid).toBe(d10);
    expect((await resolveOne(ctx, resolver, { ip: "192.168.1.10", mac: "aa00.0000.0010" })).uid).toBe(d10);
  });

  it("a MAC held by a different device is a conflict naming both uids", async () => {
    const [d10, d11] = await seed();
    const err = await errorOf(resolveOne(ctx, resolver, { ip: "192.168.1.10", mac: "AA:00:00:00:00:11" }));
    expect(err.status).toBe(409);
    expect(err.code).toBe("mac_ip_conflict");
    expect(err.extra).toEqual({ ip_uid: d10, mac_uid: d11 });
  });

  it("partitions isolate", async () => {
    const [d10, , lab] = await seed();
    expect((await resolveOne(ctx, resolver, { ip: "192.168.1.10", partition: "lab" })).uid).toBe(lab);
    expect(lab).not.toBe(d10);
    expect((await errorOf(resolveOne(ctx, resolver, { ip: "192.168.1.11", partition: "lab" }))).code).toBe(
      "not_found",
    );
    // An actor limited to other partitions sees nothing there.
    const other = actorWith(["identity.resolve"], ["lab"]);
    expect((await errorOf(resolveOne(ctx, other, { ip: "192.168.1.10" }))).status).toBe(404);
  });

  it("reports missing_ip, invalid_ip and not_found; ignores soft-deleted devices; creates nothing", async () => {
    const [d10] = await seed();
    expect((await errorOf(resolveOne(ctx, resolver, { ip: "" }))).code).toBe("missing_ip");
    expect((await errorOf(resolveOne(ctx, resolver, { ip: "300.1.1.1" }))).code).toBe("invalid_ip");
    expect((await errorOf(resolveOne(ctx, resolver, { ip: "192.168.1.99" }))).status).toBe(404);
    await db.query(sql`UPDATE devices SET deleted_at = now() WHERE uid = ${d10}`);
    expect((await errorOf(resolveOne(ctx, resolver, { ip: "192.168.1.10" }))).code).toBe("not_found");
    expect(await count()).toBe(4);
  });

  it("reports ambiguous with sorted uids when several live devices hold an address", async () => {
    // The schema keeps one live device per IP; the resolver still guards the case (rows written around it).
    const [d10, d11] = await seed();
    await db.query(sql`DROP INDEX devices_partition_ip_live_idx`);
    await db.query(sql`UPDATE devices SET ip = '192.168.1.10' WHERE uid = ${d11}`);
    const err = await errorOf(resolveOne(ctx, resolver, { ip: "192.168.1.10" }));
    expect(err.code).toBe("ambiguous");
    expect(err.extra.uids).toEqual([d10, d11].sort());
  });

  it("batch: echoes each address, is order independent, reports per-entry errors", async () => {
    const [d10, d11, lab, v6] = await seed();
    const body = {
      devices: [
        { ip: " 192.168.1.11 " },
        { ip: "192.168.1.10", partition: "lab" },
        { ip: "bogus" },
        { ip: "192.168.1.77" },
        { ip: "192.168.1.10", mac: "AA:00:00:00:00:11" },
        { ip: "2001:DB8::10" },
        { ip: "" },
      ],
    };
    const out = await resolveBatch(ctx, resolver, body);
    expect(out).toEqual([
      { ip: "192.168.1.11", partition: "default", uid: d11 },
      { ip: "192.168.1.10", partition: "lab", uid: lab },
      { ip: "bogus", partition: "default", error: "invalid_ip" },
      { ip: "192.168.1.77", partition: "default", error: "not_found" },
      { ip: "192.168.1.10", partition: "default", error: "mac_ip_conflict", ip_uid: d10, mac_uid: d11 },
      { ip: "2001:DB8::10", partition: "default", uid: v6 },
    ]);
    const reversed = await resolveBatch(ctx, resolver, { devices: [...body.devices].reverse() });
    const key = (e: { ip: string; partition: string }) => `${e.partition}|${e.ip}`;
    expect(new Map(reversed.map((e) => [key(e), e]))).toEqual(new Map(out.map((e) => [key(e), e])));
  });

  it("batch limits: empty → empty_devices, 129 → too_many_devices, 128 → fine", async () => {
    await seed();
    expect((await errorOf(resolveBatch(ctx, resolver, { devices: [] }))).code).toBe("empty_devices");
    expect((await errorOf(resolveBatch(ctx, resolver, { devices: [{ ip: "" }] }))).code).toBe(
      "empty_devices",
    );
    const many = (n: number) => ({ devices: Array.from({ length: n }, (_, i) => ({ ip: `10.3.0.${i}` })) });
    const err = await errorOf(resolveBatch(ctx, resolver, many(129)));
    expect([err.status, err.code]).toEqual([400, "too_many_devices"]);
    expect(await resolveBatch(ctx, resolver, many(128))).toHaveLength(128);
  });

  it("resolves a batch in one SQL round trip", async () => {
    await seed();
    let queries = 0;
    const counting = {
      query: (...a: Parameters<Db["query"]>) => {
        queries++;
        return db.query(...a);
      },
      one: (...a: Parameters<Db["one"]>) => {
        queries++;
        return db.one(...a);
      },
      many: (...a: Parameters<Db["many"]>) => {
        queries++;
        return db.many(...a);
      },
    } as unknown as Db;
    const qs = Array.from({ length: 128 }, (_, i) => ({
      ip: `192.168.1.${i}`,
      partition: "default",
      mac: i % 2 ? "AA:00:00:00:00:11" : null,
    }));
    const out = await resolveAddresses(counting, resolver, qs);
    expect(out).toHaveLength(128);
    expect(queries).toBe(1);
  });

  it("needs identity.resolve", async () => {
    expect((await errorOf(resolveOne(ctx, ingester, { ip: "10.0.0.1" }))).status).toBe(403);
    expect((await errorOf(resolveBatch(ctx, ingester, { devices: [{ ip: "10.0.0.1" }] }))).status).toBe(403);
  });
});

describe("cleanup", () => {
  it("purges only devices soft-deleted longer than retention_days, in batches", async () => {
    const now = new Date("2026-03-01T00:00:00Z");
    ctx.setNow(now);
    const res = await ingestSightings(
      ctx,
      ingester,
      Array.from({ length: 250 }, (_, i) => ({ ip: `10.50.${i >> 8}.${i & 255}`, source: "s" })),
    );
    const uids = res.results.map((r) => r.uid);
    const days = (n: number) => new Date(now.getTime() - n * 86_400_000);
    // 0..209 deleted 31 days ago (past 30-day retention), 210..219 deleted 29 days ago, the rest live.
    await db.query(
      sql`UPDATE devices SET deleted_at = ${days(31)} WHERE uid = ANY(${uids.slice(0, 210)}::text[])`,
    );
    await db.query(
      sql`UPDATE devices SET deleted_at = ${days(29)} WHERE uid = ANY(${uids.slice(210, 220)}::text[])`,
    );
    await db.query(
      sql`INSERT INTO device_cleanup_settings (key, retention_days, batch_size) VALUES ('default', 30, 100)`,
    );
    const run = await runDeviceCleanup(ctx);
    expect(run).toMatchObject({ ran: true, purged: 210, batches: 3 });
    expect(await count()).toBe(40);
    const left = await db.many<{ uid: string }>(
      sql`SELECT uid FROM devices WHERE deleted_at IS NOT NULL ORDER BY uid`,
    );
    expect(left.map((r) => r.uid)).toEqual(uids.slice(210, 220).sort());
    // Not due again until the interval passes; identifiers of purged devices are gone too.
    expect((await runDeviceCleanup(ctx)).reason).toBe("not_due");
    const ids = await db.one<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM device_identifiers WHERE device_uid = ANY(${uids.slice(0, 210)}::text[])`,
    );
    expect(ids?.n).toBe(0);
    ctx.setNow(new Date(now.getTime() + 2 * 86_400_000));
    expect(await runDeviceCleanup(ctx)).toMatchObject({ ran: true, purged: 10 });
  });

  it("only the lock holder runs", async () => {
    const release = await db.tryAdvisoryLock(0x6e65746d6f6e0201n);
    expect(release).not.toBeNull();
    if (db.kind === "postgres") {
      expect((await runDeviceCleanup(ctx)).reason).toBe("not_leader");
    }
    await release?.();
    expect((await runDeviceCleanup(ctx)).ran).toBe(true);
  });
});
