import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { createTestDatabase } from "../helpers/database.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/**
 * Issue 10 item 7: a full disk gets a clear answer (507, /health degraded), and netmon recovers
 * when space returns. Uses a real small file system (tmpfs; needs root, as on CI).
 */
const mnt = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-full-"));
const canMount =
  !process.env.NETMON_TEST_DATABASE_URL &&
  process.getuid?.() === 0 &&
  spawnSync("mount", ["-t", "tmpfs", "-o", "size=96m", "tmpfs", mnt]).status === 0;

describe.runIf(canMount)("disk full", () => {
  let server: TestServer;
  let operator: Record<string, string>;
  const filler = path.join(mnt, "filler");

  beforeAll(async () => {
    const { db } = await createTestDatabase({ dataDir: path.join(mnt, "pg") });
    server = await startTestServer({ db });
    operator = authHeaders(await tokenFor(server, "operator"));
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    await server?.db.close().catch(() => undefined);
    spawnSync("umount", ["-l", mnt]);
  });

  const createGroup = (name: string) =>
    server.fetch("/api/v2/device-groups", {
      method: "POST",
      headers: { ...operator, "content-type": "application/vnd.api+json" },
      body: JSON.stringify({
        data: { type: "device-group", attributes: { name } },
      }),
    });

  it("answers 507 with a clear message while full, says so in /health, and recovers", async () => {
    const first = await createGroup("before");
    expect(first.status, await first.text()).toBe(201);
    // Fill the file system to the last byte.
    const fd = fs.openSync(filler, "w");
    const chunk = Buffer.alloc(1024 * 1024, 1);
    try {
      for (;;) fs.writeSync(fd, chunk);
    } catch {
      for (;;) {
        try {
          fs.writeSync(fd, Buffer.alloc(512, 1));
        } catch {
          break;
        }
      }
    } finally {
      fs.closeSync(fd);
    }
    let full: Response | null = null;
    for (let i = 0; i < 200 && !full; i++) {
      const res = await createGroup(`while-full-${i}`);
      if (res.status !== 201) full = res;
    }
    expect(full?.status).toBe(507);
    const body = (await full?.json()) as { errors: { code: string; detail: string }[] };
    expect(body.errors[0]?.code).toBe("storage_full");
    expect(body.errors[0]?.detail).toMatch(/disk/);
    const health = (await (await server.fetch("/health")).json()) as {
      status: string;
      storage?: { status: string };
    };
    expect(health.status).toBe("degraded");
    expect(health.storage?.status).toBe("full");

    fs.rmSync(filler);
    let recovered = 0;
    for (let i = 0; i < 50 && recovered === 0; i++) {
      const res = await createGroup(`after-${i}`);
      if (res.status === 201) recovered = 1;
      else await new Promise((r) => setTimeout(r, 200));
    }
    expect(recovered).toBe(1);
  }, 120_000);
});
