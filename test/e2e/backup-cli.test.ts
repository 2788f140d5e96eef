import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgliteDb } from "../../src/storage/pglite/client.ts";
import { authHeaders, tokenFor } from "../helpers/auth.ts";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";
import { testBackend } from "../helpers/database.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** The real `netmon backup`, `restore` and `db copy` commands, as an operator runs them. */
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-backup-cli-"));
let source: CliWorkspace;
let restored: CliWorkspace;
const file = path.join(tmp, "netmon.jsonl.gz");

beforeAll(async () => {
  source = await cliWorkspace("nm-bk-src");
  restored = await cliWorkspace("nm-bk-dst");
  const made = await source.netmon(
    "users",
    "create",
    "--email",
    "ops@example.test",
    "--role",
    "admin",
    "--password",
    "a-long-password-1",
  );
  expect(made.code, made.stderr).toBe(0);
});
afterAll(() => {
  source?.cleanup();
  restored?.cleanup();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe(`netmon backup / restore / db copy (${testBackend()})`, { timeout: 180_000 }, () => {
  it("backs up with the secret key and restores into a fresh database, verified per table", async () => {
    const b = await source.netmon("backup", file);
    expect(b.code, b.stderr).toBe(0);
    expect(b.stdout).toContain("with the secret key");
    expect(b.stderr).toMatch(/users\s+\d+ rows/);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);

    const r = await restored.netmon("restore", file);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^users\s+1\s+1\s+ok$/m);
    expect(r.stdout).toMatch(/\d+ tables, \d+ rows verified/);
    expect(r.stdout).toContain("secret key restored");
    expect(fs.readFileSync(path.join(restored.dir, "secret.key"), "utf8")).toBe(
      fs.readFileSync(path.join(source.dir, "secret.key"), "utf8"),
    );
    // The restored user is there.
    const t = await restored.netmon("tokens", "create", "--user", "ops@example.test");
    expect(t.code, t.stderr).toBe(0);

    const again = await restored.netmon("restore", file);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("already holds users");
  });

  it("db copy moves every table into an embedded database directory, with the key", async () => {
    const target = path.join(tmp, "moved");
    const c = await source.netmon("db", "copy", "--to", target);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stderr).toContain(`copying to pglite:${target}/pg`);
    expect(c.stdout).toMatch(/^users\s+1\s+1\s+ok$/m);
    expect(c.stdout).not.toContain("MISMATCH");
    expect(fs.existsSync(path.join(target, "secret.key"))).toBe(true);
    const db = await PgliteDb.open({ dataDir: path.join(target, "pg") });
    try {
      expect(await db.one("SELECT email FROM users")).toEqual({ email: "ops@example.test" });
    } finally {
      await db.close();
    }
  });

  it("answers usage mistakes with exit 2 and one line", async () => {
    for (const args of [
      ["backup"],
      ["restore", path.join(tmp, "missing.gz")],
      ["db", "copy"],
      ["db", "move", "--to", tmp],
      ["db", "copy", "--to", "mysql://x/y"],
    ]) {
      const r = await source.netmon(...args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
    }
  });

  it.skipIf(testBackend() !== "pglite")(
    "backs up while the server runs: the command is forwarded to it over the local channel",
    async () => {
      const child = spawn(process.execPath, [path.resolve("bin/netmon.mjs"), "serve"], {
        env: {
          ...process.env,
          ...source.env,
          PORT: "0",
          HOST: "127.0.0.1",
          NETMON_EMBEDDED_AGENT: "false",
          NETMON_LOG_LEVEL: "info",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      try {
        let out = "";
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 60_000);
          const onData = (d: Buffer) => {
            out += d.toString();
            if (out.includes("netmon listening on")) {
              clearTimeout(t);
              resolve();
            }
          };
          child.stdout?.on("data", onData);
          child.stderr?.on("data", onData);
        });
        const live = path.join(tmp, "while-running.gz");
        const b = await source.netmon("backup", live);
        expect(b.code, b.stderr).toBe(0);
        expect(b.stdout).toContain("with the secret key");
        const r = await restored.netmon("restore", live, "--force");
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toMatch(/^users\s+1\s+1\s+ok$/m);
        // restore and db copy are never run inside a running server.
        const refused = await source.netmon("restore", live, "--force");
        expect(refused.code).toBe(1);
        expect(refused.stderr).toContain("in use by another netmon process");
      } finally {
        child.kill("SIGTERM");
        await new Promise((r) => child.once("exit", r));
      }
    },
  );

  it.skipIf(testBackend() !== "pglite")(
    "says how to back up an embedded database a running server holds",
    async () => {
      const held = await PgliteDb.open({ dataDir: path.join(source.dir, "pg") });
      try {
        const r = await source.netmon("backup", path.join(tmp, "locked.gz"));
        expect(r.code).toBe(1);
        expect(r.stderr).toContain("--server");
      } finally {
        await held.close();
      }
    },
  );
});

describe("netmon backup --server (a running server streams GET /api/admin/backup)", {
  timeout: 180_000,
}, () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("is admin-only and never sends the server's secret key", async () => {
    expect((await server.fetch("/api/admin/backup")).status).toBe(401);
    const operator = await tokenFor(server, "operator");
    expect((await server.fetch("/api/admin/backup", { headers: authHeaders(operator) })).status).toBe(403);
    const admin = await tokenFor(server, "admin");
    const res = await server.fetch("/api/admin/backup", { headers: authHeaders(admin) });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/gzip");
    const text = (await import("node:zlib"))
      .gunzipSync(Buffer.from(await res.arrayBuffer()))
      .toString("utf8");
    expect(JSON.parse(text.split("\n")[0] as string)).toMatchObject({ netmon_backup: 1, secret_key: null });
    expect(text.trim().split("\n").pop()).toContain('"done":true');
  });

  it("a client leaving mid-download releases the snapshot: the database keeps answering", async () => {
    await server.db.query(
      `INSERT INTO logs ("timestamp", body)
       SELECT now(), md5(g::text) || md5((g * 7)::text) || md5((g * 13)::text) || md5((g * 31)::text)
       FROM generate_series(1, 40000) g`,
    );
    const admin = await tokenFor(server, "admin");
    // node:http, not fetch: undici keeps an aborted response's socket open, which a real
    // client that goes away does not.
    const got = await new Promise<number>((resolve, reject) => {
      const req = http.get(
        new URL("/api/admin/backup", server.url),
        { headers: authHeaders(admin) },
        (res) => {
          expect(res.statusCode).toBe(200);
          res.once("data", (chunk: Buffer) => {
            req.destroy();
            resolve(chunk.length);
          });
        },
      );
      req.on("error", () => {});
      setTimeout(() => reject(new Error("no data from /api/admin/backup")), 15_000);
    });
    expect(got).toBeGreaterThan(0);
    const t0 = Date.now();
    const after = await server.fetch("/api/devices", {
      headers: authHeaders(admin),
      signal: AbortSignal.timeout(15_000),
    });
    expect(after.status).toBe(200);
    await after.arrayBuffer();
    expect(Date.now() - t0).toBeLessThan(15_000);
    await server.db.query(`DELETE FROM logs WHERE length(body) = 128`);
    // The export gave up: the snapshot transaction is gone, nothing waits for the database.
    const end = Date.now() + 10_000;
    while (!server.logs.some((l) => l.includes("backup failed while streaming")) && Date.now() < end)
      await new Promise((r) => setTimeout(r, 100));
    expect(server.logs.some((l) => l.includes("the backup stream was closed before the end"))).toBe(true);
  });

  it("downloads a complete backup, adds the local key file, and it restores", async () => {
    const admin = await tokenFor(server, "admin");
    const out = path.join(tmp, "from-server.gz");
    const ws = await cliWorkspace("nm-bk-srv");
    try {
      fs.writeFileSync(path.join(ws.dir, "secret.key"), `${Buffer.alloc(48, 7).toString("base64")}\n`, {
        mode: 0o600,
      });
      const noToken = await ws.netmon("backup", out, "--server", server.url);
      expect(noToken.code).toBe(2);
      ws.env.NETMON_TOKEN = admin;
      const b = await ws.netmon("backup", out, "--server", server.url);
      expect(b.code, b.stderr).toBe(0);
      const header = JSON.parse(
        (await import("node:zlib"))
          .gunzipSync(fs.readFileSync(out))
          .toString("utf8")
          .split("\n")[0] as string,
      ) as { secret_key: string };
      expect(header.secret_key).toBe(Buffer.alloc(48, 7).toString("base64"));
      const r = await ws.netmon("restore", out, "--force");
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^users\s+\d+\s+\d+\s+ok$/m);
    } finally {
      ws.cleanup();
    }
  });
});
