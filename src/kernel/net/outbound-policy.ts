import type { LookupAddress } from "node:dns";
import { lookup } from "node:dns/promises";
import os from "node:os";
import type { AppContext } from "../context.ts";
import { ValidationError } from "../errors.ts";
import { type Address, canonical, classify, parseAddress, sameAddress } from "./address.ts";

/**
 * The one guard for every connection netmon opens on a user's behalf: checks (http, tcp, dns,
 * grpc, snmp, ping, mtr), sweeps, webhook and email channels. Refused unless allowed:
 *  - "this host" addresses (0.0.0.0/8, ::) — they reach the local machine;
 *  - link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata services live there);
 *  - the core's own listening endpoints (its admin surface); when the core binds 0.0.0.0 or ::
 *    that is every loopback and every local interface address on the core's port.
 * Addresses are compared after parsing and unwrapping (address.ts), and callers vet the address
 * they actually connect to (`resolve()` then connect to the result, or `lookupFor()` as the
 * socket's lookup), on every redirect hop — so DNS answers and redirects cannot slip past.
 */
export interface OutboundPolicyOptions {
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

function localAddresses(): Address[] {
  const out: Address[] = [];
  for (const list of Object.values(os.networkInterfaces())) {
    for (const i of list ?? []) {
      const a = parseAddress(i.address);
      if (a) out.push(a);
    }
  }
  return out;
}

export class OutboundPolicy {
  readonly allowLinkLocal: boolean;
  readonly allowCore: boolean;
  private readonly core: { host: string; port: number }[];

  constructor(opts: OutboundPolicyOptions = {}) {
    this.allowLinkLocal = opts.allowLinkLocal ?? false;
    this.allowCore = opts.allowCore ?? false;
    this.core = opts.coreEndpoints ?? [];
  }

  /** Whether `a` on `port` is one of the core's own endpoints. */
  private isCore(a: Address, port: number): boolean {
    for (const c of this.core) {
      if (c.port !== port) continue;
      const host = c.host === "localhost" ? "127.0.0.1" : c.host;
      const bound = parseAddress(host);
      if (!bound) continue;
      const wildcard = classify(bound) === "unspecified";
      if (wildcard) {
        if (classify(a) === "loopback") return true;
        if (localAddresses().some((l) => sameAddress(l, a))) return true;
      } else if (sameAddress(bound, a) || (classify(bound) === "loopback" && classify(a) === "loopback")) {
        return true;
      }
    }
    return false;
  }

  /** Throws TargetRefusedError when `ip` (already resolved) with `port` may not be reached. */
  vet(ip: string, port?: number | null): void {
    const a = parseAddress(ip);
    if (!a) throw new TargetRefusedError(`'${ip}' is not an IP address`);
    const shown = canonical(a) === ip ? ip : `${ip} (${canonical(a)})`;
    const kind = classify(a);
    if (kind === "unspecified") {
      throw new TargetRefusedError(`target address ${shown} means "this host" and is refused`);
    }
    if (kind === "link-local" && !this.allowLinkLocal) {
      throw new TargetRefusedError(
        `target address ${shown} is link-local (metadata services live there) and is refused`,
      );
    }
    if (!this.allowCore && port != null && this.isCore(a, port)) {
      throw new TargetRefusedError(`target ${shown}:${port} is this netmon core and is refused`);
    }
  }

  /** Resolve `host` (name or literal in any spelling) to one vetted address to connect to. */
  async resolve(host: string, port?: number | null): Promise<string> {
    const literal = parseAddress(host);
    if (literal) {
      const ip = canonical(literal);
      this.vet(ip, port);
      return ip;
    }
    const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
    const answers = await lookup(bare, { all: true });
    if (answers.length === 0) throw new TargetRefusedError(`${host} does not resolve`);
    // Every answer is vetted: a name that resolves to a refused address is refused outright,
    // rather than hoping the connection picks another one.
    for (const a of answers) this.vet(a.address, port);
    return (answers[0] as LookupAddress).address;
  }

  /**
   * A `lookup` for net/http/tls sockets: the address the socket connects to is the one vetted
   * here, at connect time (DNS rebinding cannot swap it afterwards).
   */
  lookupFor(
    port: number,
  ): (
    hostname: string,
    options: unknown,
    callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void,
  ) => void {
    return (hostname, options, callback) => {
      this.resolve(hostname, port).then(
        (ip) => {
          const family = ip.includes(":") ? 6 : 4;
          if ((options as { all?: boolean } | null)?.all) callback(null, [{ address: ip, family }]);
          else callback(null, ip, family);
        },
        (err: Error) => callback(err, ""),
      );
    };
  }

  /**
   * Syntactic check at create/update time (no DNS): literal refused addresses and obviously
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
    const literal = parseAddress(host);
    if (literal) {
      this.vet(canonical(literal), null);
      return;
    }
    const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
    if (!/^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$/i.test(bare)) {
      throw new TargetRefusedError(`target '${target}' is not a valid host name or IP address`);
    }
  }
}

/** True when `ip` is link-local (kept for callers that only classify). */
export function isLinkLocal(ip: string): boolean {
  const a = parseAddress(ip);
  return a !== null && classify(a) === "link-local";
}

/** The guard as configured for this core (its real listening endpoints, the operator's knobs). */
export function outboundPolicyFor(ctx: AppContext): OutboundPolicy {
  return new OutboundPolicy({
    allowLinkLocal: ctx.config.monitoring.allowLinkLocal,
    allowCore: ctx.config.monitoring.allowCore,
    coreEndpoints: ctx.listening ?? [{ host: ctx.config.host, port: ctx.config.port }],
  });
}
