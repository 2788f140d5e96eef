/**
 * SSRF guard for check targets. Every runner resolves its destination through `resolve()`
 * and connects to the vetted address (never re-resolving the name), so a DNS answer cannot
 * swap a refused address in after the check. Refused unless explicitly allowed:
 *  - link-local / cloud metadata addresses: 169.254.0.0/16, fe80::/10 (and their IPv4-mapped forms);
 *  - the core's own HTTP endpoint (its admin surface), given as host:port pairs.
 */
import { lookup } from "node:dns/promises";
import net from "node:net";
import os from "node:os";
import { ValidationError } from "../kernel/errors.ts";

export interface TargetPolicyOptions {
  allowLinkLocal?: boolean;
  allowCore?: boolean;
  /** The core's listen endpoints; host "0.0.0.0"/"::" means every local address. */
  coreEndpoints?: { host: string; port: number }[];
}

export class TargetRefusedError extends ValidationError {
  constructor(message: string) {
    super(message, { code: "target_refused", source: { pointer: "/data/attributes/target" } });
  }
}

export function isLinkLocal(ip: string): boolean {
  let addr = ip.toLowerCase();
  if (addr.startsWith("::ffff:") && net.isIPv4(addr.slice(7))) addr = addr.slice(7);
  if (net.isIPv4(addr)) {
    const [a, b] = addr.split(".").map(Number);
    return a === 169 && b === 254;
  }
  if (net.isIPv6(addr)) {
    // fe80::/10 → first 10 bits 1111111010: fe80–febf.
    const first = Number.parseInt(addr.split(":")[0] || "0", 16);
    return (first & 0xffc0) === 0xfe80;
  }
  return false;
}

function localAddresses(): Set<string> {
  const out = new Set<string>(["127.0.0.1", "::1", "0.0.0.0", "::"]);
  for (const list of Object.values(os.networkInterfaces())) {
    for (const i of list ?? []) out.add(i.address.toLowerCase());
  }
  return out;
}

function isLoopback(ip: string): boolean {
  return ip.startsWith("127.") || ip === "::1" || ip.startsWith("::ffff:127.");
}

export class TargetPolicy {
  readonly allowLinkLocal: boolean;
  readonly allowCore: boolean;
  private readonly core: { host: string; port: number }[];

  constructor(opts: TargetPolicyOptions = {}) {
    this.allowLinkLocal = opts.allowLinkLocal ?? false;
    this.allowCore = opts.allowCore ?? false;
    this.core = opts.coreEndpoints ?? [];
  }

  /** Throws TargetRefusedError when `ip` (already resolved) with `port` is not allowed. */
  vet(ip: string, port?: number | null): void {
    if (!this.allowLinkLocal && isLinkLocal(ip)) {
      throw new TargetRefusedError(
        `target address ${ip} is link-local (metadata services live there) and is refused`,
      );
    }
    if (!this.allowCore && port != null) {
      for (const c of this.core) {
        if (c.port !== port) continue;
        const wildcard = c.host === "0.0.0.0" || c.host === "::";
        const same =
          c.host === ip ||
          (wildcard && (localAddresses().has(ip.toLowerCase()) || isLoopback(ip))) ||
          (c.host === "localhost" && isLoopback(ip)) ||
          (isLoopback(c.host) && isLoopback(ip) && c.host === ip);
        if (same) throw new TargetRefusedError(`target ${ip}:${port} is this netmon core and is refused`);
      }
    }
  }

  /** Resolve `host` (name or literal) to one vetted address. */
  async resolve(host: string, port?: number | null): Promise<string> {
    const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
    const ip = net.isIP(bare) ? bare : (await lookup(bare)).address;
    this.vet(ip, port);
    return ip;
  }

  /**
   * Syntactic check at create/update time (no DNS): literal link-local addresses and obviously
   * malformed targets are refused before the check is stored.
   */
  validateTarget(checkType: string, target: string): void {
    if (typeof target !== "string" || target.trim() === "" || target.length > 2048) {
      throw new TargetRefusedError("target must be a non-empty host, IP address or URL");
    }
    let host = target.trim();
    if (checkType === "http") {
      try {
        const u = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(host) ? host : `http://${host}`);
        if (u.protocol !== "http:" && u.protocol !== "https:") {
          throw new TargetRefusedError("http check targets must be http:// or https:// URLs");
        }
        host = u.hostname;
      } catch (err) {
        if (err instanceof TargetRefusedError) throw err;
        throw new TargetRefusedError(`target '${target}' is not a valid URL`);
      }
    } else if (checkType === "custom") {
      return;
    }
    const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
    if (net.isIP(bare)) {
      if (!this.allowLinkLocal && isLinkLocal(bare)) {
        throw new TargetRefusedError(
          `target address ${bare} is link-local (metadata services live there) and is refused`,
        );
      }
      return;
    }
    if (!/^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$/i.test(bare)) {
      throw new TargetRefusedError(`target '${target}' is not a valid host name or IP address`);
    }
  }
}
