/**
 * `netmon dashboard …`: publish, enable and disable packages on a running server (over its
 * HTTP API, with a bearer JWT carrying the dashboard.publish scope in NETMON_TOKEN), make and
 * use Ed25519 signing keys, and manage the trusted publisher keys (in the database, as the
 * operator of this installation).
 */
import { createHash } from "node:crypto";
import fs from "node:fs";
import { flag, type ParsedArgs, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { withContext } from "../cli/database.ts";
import { cliIo, cliPath, stderr, stdout } from "../cli/io.ts";
import { isAppError } from "../kernel/errors.ts";
import { parseUntrustedJson } from "../kernel/json.ts";
import { addPublisherKey, listPublisherKeys, removePublisherKey, serializeKey } from "./keys.ts";
import { generateSigningKeyPair, signPackage } from "./signing.ts";

const USAGE = `netmon dashboard <subcommand>

On a running server (--server URL or NETMON_CORE_URL; bearer JWT in NETMON_TOKEN, with the
dashboard.publish scope for publish):
  publish --manifest FILE --renderer FILE [--route SLUG] [--signature B64 | --sign-key FILE]
  enable ID [--route SLUG]
  disable ID

Signing (local files only):
  keygen --out PREFIX          writes PREFIX.key (private, 0600) and PREFIX.pub
  sign --manifest FILE --renderer FILE --key FILE   prints the base64 signature

Trusted publisher keys (this installation's database):
  keys add --name NAME --public-key FILE
  keys list
  keys remove NAME|FINGERPRINT

A package signed by a trusted key is verified when published; enable needs a verified package.
Errors print the server's code (e.g. error: slug_in_use (409): ...) and exit 1.`;

function need(args: ParsedArgs, name: string): string {
  const v = flag(args, name);
  if (!v || v === "true") throw new UsageError(`--${name} is required`);
  return v;
}

function read(file: string): Buffer {
  try {
    return fs.readFileSync(cliPath(file));
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

function rendererType(file: string): string {
  return file.endsWith(".wasm") ? "application/wasm" : "text/javascript";
}

function server(args: ParsedArgs): { base: URL; token: string } {
  const raw = flag(args, "server") ?? cliIo().env.NETMON_CORE_URL;
  if (!raw) throw new UsageError("--server URL (or NETMON_CORE_URL) is required");
  let base: URL;
  try {
    base = new URL(raw);
  } catch {
    throw new UsageError(`--server is not a URL: ${raw}`);
  }
  const token = cliIo().env.NETMON_TOKEN;
  if (!token) throw new UsageError("put a bearer token (with the dashboard.publish scope) in NETMON_TOKEN");
  return { base, token };
}

/** Print the server's answer: the JSON on success, `error: <code> (<status>): …` otherwise. */
async function report(res: Response): Promise<number> {
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    body = { error: "unexpected_response", message: text.slice(0, 300) };
  }
  if (res.ok) {
    stdout(`${JSON.stringify(body, null, 2)}\n`);
    return 0;
  }
  const { error, message, ...rest } = body;
  stderr(`error: ${String(error)} (${res.status})${message ? `: ${String(message)}` : ""}\n`);
  if (Array.isArray(rest.errors)) {
    for (const e of rest.errors) stderr(`  - ${String(e)}\n`);
    delete rest.errors;
  }
  if (Object.keys(rest).length > 0) stderr(`  ${JSON.stringify(rest)}\n`);
  return 1;
}

async function call(args: ParsedArgs, path: string, init: RequestInit): Promise<number> {
  const { base, token } = server(args);
  let res: Response;
  try {
    res = await fetch(new URL(path, base), {
      ...init,
      headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` },
    });
  } catch (err) {
    stderr(`error: cannot reach ${base.origin}: ${(err as Error).message}\n`);
    return 1;
  }
  return report(res);
}

function signatureFor(manifestBytes: Buffer, renderer: Buffer, keyFile: string): string {
  let manifest: unknown;
  try {
    manifest = parseUntrustedJson(manifestBytes.toString("utf8"));
  } catch (err) {
    throw new UsageError(`the manifest is not JSON: ${(err as Error).message}`);
  }
  const hash = createHash("sha256").update(renderer).digest("hex");
  try {
    return signPackage(read(keyFile).toString("utf8"), manifest, hash);
  } catch (err) {
    throw new UsageError(`cannot sign with ${keyFile}: ${(err as Error).message}`);
  }
}

async function publish(args: ParsedArgs): Promise<number> {
  const manifestFile = need(args, "manifest");
  const rendererFile = need(args, "renderer");
  const manifest = read(manifestFile);
  const renderer = read(rendererFile);
  const form = new FormData();
  form.append("manifest", new Blob([manifest], { type: "application/json" }), "manifest.json");
  form.append(
    "renderer",
    new Blob([renderer], { type: rendererType(rendererFile) }),
    rendererFile.split("/").pop(),
  );
  const route = flag(args, "route");
  if (route) form.append("route", route);
  const keyFile = flag(args, "sign-key");
  const signature = keyFile ? signatureFor(manifest, renderer, keyFile) : flag(args, "signature");
  if (signature) form.append("signature", signature);
  return call(args, "/api/v1/dashboard-packages", { method: "POST", body: form });
}

async function lifecycle(args: ParsedArgs, action: "enable" | "disable"): Promise<number> {
  const id = args.positionals[1];
  if (!id) throw new UsageError(`netmon dashboard ${action} ID`);
  const route = action === "enable" ? flag(args, "route") : undefined;
  return call(args, `/api/v1/dashboard-packages/${encodeURIComponent(id)}/${action}`, {
    method: "POST",
    ...(route ? { headers: { "content-type": "application/json" }, body: JSON.stringify({ route }) } : {}),
  });
}

function keygen(args: ParsedArgs): number {
  const out = cliPath(need(args, "out"));
  const pair = generateSigningKeyPair();
  if (fs.existsSync(`${out}.key`)) throw new UsageError(`${out}.key exists; refusing to overwrite a key`);
  fs.writeFileSync(`${out}.key`, pair.privateKeyPem, { mode: 0o600, flag: "wx" });
  fs.writeFileSync(`${out}.pub`, pair.publicKeyPem, { mode: 0o644 });
  stdout(`wrote ${out}.key (keep it secret) and ${out}.pub (add it with: netmon dashboard keys add)\n`);
  return 0;
}

async function keys(args: ParsedArgs): Promise<number> {
  const sub = args.positionals[1];
  try {
    if (sub === "add") {
      const name = need(args, "name");
      const pub = read(need(args, "public-key")).toString("utf8");
      const row = await withContext((ctx) => addPublisherKey(ctx, name, pub));
      stdout(`trusted ${row.name} ${row.fingerprint}\n`);
      return 0;
    }
    if (sub === "list") {
      const rows = await withContext((ctx) => listPublisherKeys(ctx));
      if (rows.length === 0) stdout("(no trusted publisher keys)\n");
      for (const r of rows.map(serializeKey)) stdout(`${r.name}\t${r.fingerprint}\t${r.created_at}\n`);
      return 0;
    }
    if (sub === "remove") {
      const which = args.positionals[2];
      if (!which) throw new UsageError("netmon dashboard keys remove NAME|FINGERPRINT");
      const row = await withContext((ctx) => removePublisherKey(ctx, which));
      stdout(`removed ${row.name} ${row.fingerprint}\n`);
      return 0;
    }
  } catch (err) {
    if (isAppError(err)) {
      stderr(`error: ${err.code}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  throw new UsageError("netmon dashboard keys add|list|remove");
}

export const dashboardCommand: Command = {
  name: "dashboard",
  summary: "Publish, enable, disable and sign dashboard packages; manage trusted publisher keys",
  usage: USAGE,
  async run(args: ParsedArgs): Promise<number> {
    switch (args.positionals[0]) {
      case "publish":
        return publish(args);
      case "enable":
        return lifecycle(args, "enable");
      case "disable":
        return lifecycle(args, "disable");
      case "keygen":
        return keygen(args);
      case "sign": {
        const manifest = read(need(args, "manifest"));
        const renderer = read(need(args, "renderer"));
        stdout(`${signatureFor(manifest, renderer, need(args, "key"))}\n`);
        return 0;
      }
      case "keys":
        return keys(args);
      default:
        throw new UsageError(USAGE);
    }
  },
};
