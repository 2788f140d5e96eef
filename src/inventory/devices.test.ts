import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/helpers/database.ts";
import type { AppError } from "../kernel/errors.ts";
import type { Db } from "../storage/db.ts";
import { getDevice, listDevices, parseListParams, softDeleteDevice } from "./devices.ts";
import { ingestSightings } from "./ingest.ts";
import { exportOcsf, parseExportParams } from "./ocsf.ts";
import { actorWith, testContext } from "./testing/context.ts";

let db: Db;
let ctx: ReturnType<typeof testContext>;
let uids: { def: string; lab: string };

beforeAll(async () => {
  db = (await createTestDatabase()).db;
  ctx = testContext(db);
  const r = await ingestSightings(ctx, actorWith(["devices.ingest"]), [
    { ip: "10.1.1.1", source: "s", hostname: "in-default" },
    { ip: "10.1.1.1", source: "s", hostname: "in-lab", partition: "lab" },
  ]);
  uids = { def: r.results[0]?.uid as string, lab: r.results[1]?.uid as string };
});
afterAll(async () => {
  await db.close();
});

const statusOf = (p: Promise<unknown>) =>
  p.then(
    () => 200,
    (e: AppError) => e.status,
  );

describe("device reads respect actor.partitions", () => {
  const labOnly = actorWith(["devices.view", "devices.delete", "devices.export"], ["lab"]);
  const all = actorWith(["devices.view", "devices.export"]);

  it("lists only visible partitions", async () => {
    const mine = await listDevices(db, labOnly, parseListParams({ limit: "500" }));
    expect(mine.data.map((d) => d.uid)).toEqual([uids.lab]);
    const everything = await listDevices(db, all, parseListParams({ limit: "500" }));
    expect(everything.data.map((d) => d.uid).sort()).toEqual([uids.def, uids.lab].sort());
  });

  it("answers 404 for a device outside the actor's partitions", async () => {
    expect(await statusOf(getDevice(db, labOnly, uids.def))).toBe(404);
    expect((await getDevice(db, labOnly, uids.lab)).hostname).toBe("in-lab");
    expect(await statusOf(softDeleteDevice(ctx, labOnly, uids.def))).toBe(404);
  });

  it("exports only visible partitions", async () => {
    const out = await exportOcsf(db, labOnly, parseExportParams({}));
    expect(out.devices.map((d) => d.uid)).toEqual([uids.lab]);
  });

  it("needs devices.view / devices.export", async () => {
    const none = actorWith([]);
    expect(await statusOf(listDevices(db, none, parseListParams({})))).toBe(403);
    expect(await statusOf(getDevice(db, none, uids.def))).toBe(403);
    expect(await statusOf(exportOcsf(db, actorWith(["devices.view"]), parseExportParams({})))).toBe(403);
  });
});
