import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { testBackend } from "../helpers/database.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";

/** A first start with nothing configured leaves a way in: a generated admin password in a 0600 file. */
let server: TestServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

describe("first start", () => {
  it("creates admin@localhost with a generated password in a private file, never in the log", async () => {
    server = await startTestServer({ env: { NETMON_INITIAL_ADMIN: "true" } });
    const file = path.join(server.dataDir, "initial-admin-password");
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const password = fs.readFileSync(file, "utf8").trim();
    expect(password.length).toBeGreaterThanOrEqual(20);
    expect(server.logs.join("\n")).not.toContain(password);
    expect(server.logs.some((l) => l.includes("initial-admin-password"))).toBe(true);

    const page = await (await server.fetch("/users/log-in")).text();
    expect(page).toContain("First start");
    expect(page).toContain(file);
    const res = await server.fetch("/users/log-in", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "admin@localhost", password }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { user: { role: string } }).user.role).toBe("admin");

    // Once the operator deletes the file, the sign-in page stops pointing at it.
    fs.rmSync(file);
    expect(await (await server.fetch("/users/log-in")).text()).not.toContain("First start");
  });

  it("generates nothing when the operator chose a password", async () => {
    server = await startTestServer({
      env: { NETMON_INITIAL_ADMIN: "true", SERVICE_ADMIN_PASSWORD: "chosen-by-the-operator" },
    });
    expect(fs.existsSync(path.join(server.dataDir, "initial-admin-password"))).toBe(false);
  });

  it.skipIf(testBackend() !== "pglite")(
    "`netmon serve` creates and migrates a new embedded database in a child process, not in itself",
    async () => {
      // PGlite's memory only grows: done in the server's own process, a first start idled
      // ~100 MB above every later one (bench/ops/startup.ts reports both).
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-first-"));
      const child = spawn(process.execPath, [path.resolve("bin/netmon.mjs"), "serve"], {
        env: {
          ...process.env,
          NETMON_DATA_DIR: dir,
          PORT: "0",
          HOST: "127.0.0.1",
          NETMON_LOG_LEVEL: "info",
          NETMON_EMBEDDED_AGENT: "false",
          NETMON_OTLP_GRPC_PORT: "0",
          NETMON_SYSLOG_PORT: "0",
          NETMON_SNMP_TRAP_PORT: "0",
        },
      });
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
      });
      child.stderr.on("data", (d) => {
        out += d;
      });
      try {
        const url = await new Promise<string>((resolve, reject) => {
          const t = setInterval(() => {
            const m = /netmon listening on (http:\/\/[\d.:]+)/.exec(out);
            if (m) {
              clearInterval(t);
              resolve(m[1] as string);
            }
          }, 50);
          child.on("exit", (code) => {
            clearInterval(t);
            reject(new Error(`serve exited (${code}): ${out}`));
          });
        });
        const health = await fetch(`${url}/health`);
        expect(health.status).toBe(200);
        expect(fs.existsSync(path.join(dir, "pg", "PG_VERSION"))).toBe(true);
        // The child applied every migration; the server found nothing left to do.
        expect(out).not.toContain("migrations applied");
      } finally {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
