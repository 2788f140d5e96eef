import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testBackend } from "../helpers/database.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Every README CLI recipe while `netmon serve` runs on the embedded database (issue 13): the
 * commands find the database held by the server and run inside it over the local channel
 * (src/cli/cli-channel.ts), with the caller's working directory and environment.
 */
const BIN = path.resolve(import.meta.dirname, "../../bin/netmon.mjs");
const pglite = testBackend() === "pglite";

let dir: string;
let work: string;
let server: ChildProcess | undefined;
let url = "";
let env: Record<string, string>;

function cli(args: string[], extraEnv: Record<string, string> = {}) {
  return new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const p = spawn(process.execPath, [BIN, ...args], { cwd: work, env: { ...env, ...extraEnv } });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => {
      out += d;
    });
    p.stderr.on("data", (d) => {
      err += d;
    });
    p.on("close", (code) => resolve({ code, out, err }));
  });
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

beforeAll(async () => {
  if (!pglite) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "nm-cli-"));
  work = path.join(dir, "work");
  fs.mkdirSync(work);
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dir,
    PORT: String(port),
    HOST: "127.0.0.1",
    NETMON_DATA_DIR: path.join(dir, "data"),
    NETMON_EMBEDDED_AGENT: "false",
    NETMON_INITIAL_ADMIN: "false",
    NETMON_LOG_LEVEL: "warn",
  };
  server = spawn(process.execPath, [BIN, "serve"], { env, stdio: "ignore" });
  await waitFor(
    async () => fs.existsSync(path.join(dir, "data", "cli.sock")) && (await fetch(`${url}/health`)).ok,
    "the server and its local channel",
    90_000,
  );
}, 120_000);

afterAll(async () => {
  if (server && server.exitCode === null) {
    const done = new Promise((r) => server?.once("exit", r));
    server.kill("SIGTERM");
    await done;
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(!pglite)("README CLI recipes while the server runs (embedded database)", () => {
  it("create users and tokens, import devices, query, manage channels and migrate, with the server up", async () => {
    const sock = path.join(dir, "data", "cli.sock");
    expect(fs.statSync(sock).mode & 0o777).toBe(0o600);

    const user = await cli([
      "users",
      "create",
      "--email",
      "ops@example.test",
      "--role",
      "admin",
      "--password",
      "pw-cli-recipes-1",
    ]);
    expect(user.code, user.err).toBe(0);
    expect(user.out).toMatch(/created user ops@example\.test/);
    const reset = await cli(["users", "set-password", "--email", "ops@example.test"]);
    expect(reset.out).toMatch(/password: \S{12,}/);

    const token = await cli([
      "tokens",
      "create",
      "--user",
      "ops@example.test",
      "--scope",
      "read",
      "--scope",
      "write",
    ]);
    expect(token.code, token.err).toBe(0);
    const t = token.out.trim();
    const me = await fetch(`${url}/api/v1/me`, { headers: { authorization: `Bearer ${t}` } });
    expect(((await me.json()) as { user: { email: string } }).user.email).toBe("ops@example.test");
    const gw = await cli(["tokens", "create", "--control-plane", "gateway", "--name", "edge-1"]);
    expect(gw.code).toBe(0);
    expect(gw.out.trim().split(".")).toHaveLength(3);

    // A path relative to the caller's directory, read by the server.
    fs.writeFileSync(
      path.join(work, "devices.jsonl"),
      '{"ip":"192.0.2.10","hostname":"core-1"}\n{"ip":"192.0.2.11","hostnme":"typo"}\n',
    );
    const imported = await cli(["devices", "import", "devices.jsonl"]);
    expect(imported.code, imported.err).toBe(0);
    expect(imported.out).toMatch(/imported 2 rows: 2 devices created/);
    expect(imported.err).toMatch(/unknown field 'hostnme' in 1 row/);
    const missing = await cli(["devices", "import", "nope.jsonl"]);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/no such file: nope\.jsonl/);

    const query = await cli(["query", "in:devices hostname:CORE-1", "--json"]);
    expect(query.code, query.err).toBe(0);
    expect((JSON.parse(query.out) as { results: { ip: string }[] }).results.map((r) => r.ip)).toEqual([
      "192.0.2.10",
    ]);

    // A secret named by an environment variable of the caller, not of the server.
    const channel = await cli(
      [
        "notifications",
        "channel",
        "create",
        "--name",
        "ops hook",
        "--provider",
        "webhook",
        "--url",
        "https://hooks.example.net/x",
        "--secret-env",
        "HOOK_SECRET",
      ],
      { HOOK_SECRET: "from-the-caller" },
    );
    expect(channel.code, channel.err).toBe(0);
    const list = await cli(["notifications", "channel", "list"]);
    expect(list.out).toContain("ops hook");
    const unset = await cli([
      "notifications",
      "channel",
      "create",
      "--name",
      "x",
      "--provider",
      "webhook",
      "--url",
      "https://h.example.net/",
      "--secret-env",
      "NOT_SET_ANYWHERE",
    ]);
    expect(unset.code).toBe(2);
    expect(unset.err).toMatch(/NOT_SET_ANYWHERE is not set/);

    const migrated = await cli(["migrate"]);
    expect(migrated.out).toBe("database is up to date\n");

    // Long-running commands are never run inside the server.
    const serve = await cli(["serve"]);
    expect(serve.code).toBe(1);
    expect(serve.err).toMatch(/in use by another netmon process/);
  }, 120_000);

  it("answers a malformed request on the socket with a usage error and keeps serving", async () => {
    const sock = path.join(dir, "data", "cli.sock");
    const reply = await new Promise<string>((resolve) => {
      const c = net.connect(sock);
      let got = "";
      c.on("data", (d) => {
        got += d;
      });
      c.on("close", () => resolve(got));
      c.write('{"argv":"users","cwd":"relative"}\n');
    });
    expect(reply).toContain('"exit":2');
    expect((await cli(["query", "in:devices", "--json"])).code).toBe(0);
  });

  it("works directly again once the server stopped, and the socket is gone", async () => {
    const done = new Promise((r) => server?.once("exit", r));
    server?.kill("SIGTERM");
    await done;
    expect(fs.existsSync(path.join(dir, "data", "cli.sock"))).toBe(false);
    const q = await cli(["query", "in:devices", "--json"]);
    expect(q.code, q.err).toBe(0);
    expect((JSON.parse(q.out) as { results: unknown[] }).results).toHaveLength(2);
  }, 60_000);
});
