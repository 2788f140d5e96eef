/**
 * ICMP echo engine on the `raw-socket` native addon (root or CAP_NET_RAW).
 *
 * One raw socket per address family per process (thread), shared by every concurrent caller:
 * - requests carry identifier = this engine's id (pid-derived) and a sequence number that indexes
 *   the table of probes in flight; the 8-byte payload holds a random per-engine nonce and a
 *   per-probe token, so a reply matches a probe only by (source address, identifier, sequence,
 *   nonce, token). Replies to other processes' pings (or to a probe that already timed out and
 *   whose sequence number was reused) are ignored;
 * - a batch is sent in a tight loop (paced to `ratePerSecond` when given), draining the socket
 *   every few packets so replies cannot overflow its receive buffer;
 * - one deadline timer per batch (re-armed for the earliest unanswered probe), not one per target;
 * - RTT is measured with `performance.now()` (monotonic, sub-millisecond);
 * - a send error fails that target only (e.g. EACCES for a broadcast address, ENETUNREACH);
 * - ICMP destination-unreachable / time-exceeded for our probes fail them at once;
 * - when no probe is in flight the socket stops polling (it does not keep the process alive) and
 *   closes after IDLE_CLOSE_MS.
 * The kernel filters what reaches the socket (ICMP_FILTER / ICMP6_FILTER) to echo replies and the
 * error types above, so other ICMP traffic on the host (echo requests on loopback, for one) is not
 * copied to us.
 */
import { createRequire } from "node:module";
import net from "node:net";
import os from "node:os";
import { threadId } from "node:worker_threads";

export interface EchoReply {
  alive: boolean;
  rtt_ms: number | null;
  error?: string;
}

/** Loopback is unpaced by default; any other batch is paced to this many packets per second. */
export const DEFAULT_RATE_PER_SECOND = 10_000;
const IDLE_CLOSE_MS = 1_000;
/** Drain the socket after this many sends so replies never pile up in its receive buffer. */
const DRAIN_EVERY = 32;
const RECV_BUFFER_BYTES = 4 * 1024 * 1024;
const PACKET_BYTES = 16; // 8-byte ICMP header + 8-byte payload (nonce, token)
const SEQ_SPACE = 65_536;

// Linux socket constants the addon does not export.
const SOL_RAW = 255;
const ICMP_FILTER = 1;
const IPPROTO_ICMPV6 = 58;
const ICMP6_FILTER = 1;
const SO_RCVBUFFORCE = 33;

interface SocketWrap {
  send(buf: Buffer, offset: number, length: number, address: string, cb: (bytes: number) => void): void;
  recv(buf: Buffer, cb: (buf: Buffer, bytes: number, source: string) => void): void;
  pause(recvPaused: boolean, sendPaused: boolean): void;
  setOption(level: number, option: number, value: number | Buffer, length?: number): void;
  close(): void;
  on(ev: string, fn: (...args: unknown[]) => void): void;
  removeAllListeners(ev?: string): void;
}
interface RawSocketModule {
  createSocket(o: { protocol: number; addressFamily: number }): { wrap: SocketWrap };
  Protocol: { ICMP: number; ICMPv6: number };
  AddressFamily: { IPv4: number; IPv6: number };
  SocketLevel: { SOL_SOCKET: number };
  SocketOption: { SO_RCVBUF: number };
}

let rawModule: RawSocketModule | null | undefined;
function loadRaw(): RawSocketModule | null {
  if (rawModule !== undefined) return rawModule;
  const req = createRequire(import.meta.url);
  try {
    rawModule = req("raw-socket") as RawSocketModule;
  } catch {
    // The native addon did not build or load here: the fping fallback takes over.
    rawModule = null;
  }
  return rawModule;
}

type Family = 4 | 6;

interface Probe {
  seq: number;
  token: number;
  /** Address as the kernel reports a reply's source (canonical form, no zone). */
  key: string;
  sentAt: number;
  batch: Batch;
  index: number;
}

interface Batch {
  targets: readonly string[];
  keys: readonly string[];
  results: (EchoReply | undefined)[];
  probes: (Probe | undefined)[];
  pending: number;
  next: number; // next target index to send
  timeoutMs: number;
  ratePerSecond: number; // 0 = unpaced
  startedAt: number;
  sendTimer: NodeJS.Timeout | null;
  deadlineTimer: NodeJS.Timeout | null;
  /** Index of the first probe that may still be unanswered (probes are sent in index order). */
  oldest: number;
  resolve: (r: EchoReply[]) => void;
}

const noop = () => {};
let nextToken = 1;

class RawIcmpEngine {
  /** For tests: what a reply to each probe in flight must carry. */
  inspect(): { ident: number; nonce: number; probes: { seq: number; token: number; key: string }[] } {
    const probes: { seq: number; token: number; key: string }[] = [];
    for (const p of this.slots) if (p) probes.push({ seq: p.seq, token: p.token, key: p.key });
    return { ident: this.ident, nonce: this.nonce, probes };
  }

  private wrap: SocketWrap | null = null;
  private readonly slots: (Probe | undefined)[] = new Array(SEQ_SPACE);
  private inFlight = 0;
  private nextSeq = 0;
  private readonly active = new Set<Batch>();
  private idleTimer: NodeJS.Timeout | null = null;
  private readonly ident = (process.pid + threadId * 7919) & 0xffff;
  private readonly nonce = (Math.random() * 0x1_0000_0000) >>> 0;
  private readonly packet = Buffer.alloc(PACKET_BYTES);
  private readonly rbuf = Buffer.alloc(65_536);
  private readonly onPacketBound = (buf: Buffer, bytes: number, source: string) =>
    this.onPacket(buf, bytes, source);

  constructor(
    private readonly family: Family,
    private readonly raw: RawSocketModule,
  ) {
    const p = this.packet;
    p[0] = family === 4 ? 8 : 128; // echo request
    p[1] = 0;
    p.writeUInt16BE(this.ident, 4);
    p.writeUInt32BE(this.nonce, 8);
  }

  /** Opens the socket if needed; throws the OS error (EPERM when unprivileged). */
  open(): SocketWrap {
    if (this.wrap) return this.wrap;
    const raw = this.raw;
    const s = raw.createSocket({
      protocol: this.family === 4 ? raw.Protocol.ICMP : raw.Protocol.ICMPv6,
      addressFamily: this.family === 4 ? raw.AddressFamily.IPv4 : raw.AddressFamily.IPv6,
    });
    const wrap = s.wrap;
    // Take the socket over from raw-socket's JS wrapper (which reads one packet per poll event).
    wrap.removeAllListeners();
    wrap.on("recvReady", () => this.drain());
    wrap.on("sendReady", noop);
    wrap.on("close", noop);
    wrap.on("error", (err) => this.fail(err instanceof Error ? err.message : String(err)));
    try {
      wrap.setOption(raw.SocketLevel.SOL_SOCKET, SO_RCVBUFFORCE, RECV_BUFFER_BYTES);
    } catch {
      try {
        wrap.setOption(raw.SocketLevel.SOL_SOCKET, raw.SocketOption.SO_RCVBUF, RECV_BUFFER_BYTES);
      } catch {
        // keep the default buffer; draining every DRAIN_EVERY sends still keeps up
      }
    }
    try {
      if (this.family === 4) {
        // ICMP_FILTER: a set bit drops that type. Keep echo reply (0), unreachable (3), time exceeded (11).
        wrap.setOption(SOL_RAW, ICMP_FILTER, ~((1 << 0) | (1 << 3) | (1 << 11)) >>> 0);
      } else {
        // ICMP6_FILTER: 256-bit block mask. Keep unreachable (1), time exceeded (3), echo reply (129).
        const f = Buffer.alloc(32, 0xff);
        const le = os.endianness() === "LE";
        for (const t of [1, 3, 129]) {
          const off = (t >> 5) * 4;
          const word = (le ? f.readUInt32LE(off) : f.readUInt32BE(off)) & ~(1 << (t & 31));
          if (le) f.writeUInt32LE(word >>> 0, off);
          else f.writeUInt32BE(word >>> 0, off);
        }
        wrap.setOption(IPPROTO_ICMPV6, ICMP6_FILTER, f, 32);
      }
    } catch {
      // without the filter we just see (and ignore) more packets
    }
    this.wrap = wrap;
    return wrap;
  }

  /** One echo request to each target (distinct, canonical addresses of this family). */
  batch(targets: readonly string[], keys: readonly string[], timeoutMs: number, ratePerSecond: number) {
    return new Promise<EchoReply[]>((resolve) => {
      const b: Batch = {
        targets,
        keys,
        results: new Array(targets.length),
        probes: new Array(targets.length),
        pending: targets.length,
        next: 0,
        timeoutMs,
        ratePerSecond,
        startedAt: performance.now(),
        sendTimer: null,
        deadlineTimer: null,
        oldest: 0,
        resolve,
      };
      if (targets.length === 0) {
        resolve([]);
        return;
      }
      let wrap: SocketWrap;
      try {
        wrap = this.open();
      } catch (err) {
        const error = `raw socket: ${(err as Error).message}`;
        resolve(targets.map(() => ({ alive: false, rtt_ms: null, error })));
        return;
      }
      if (this.idleTimer) {
        clearTimeout(this.idleTimer);
        this.idleTimer = null;
      }
      if (this.active.size === 0) wrap.pause(false, true); // poll for replies
      this.active.add(b);
      this.pump(b);
    });
  }

  private pump(b: Batch): void {
    b.sendTimer = null;
    const wrap = this.wrap;
    if (!wrap) return;
    const n = b.targets.length;
    let limit = n;
    if (b.ratePerSecond > 0) {
      // Token bucket: a burst of up to 10 packets, then ratePerSecond.
      const allowed = Math.floor(((performance.now() - b.startedAt) * b.ratePerSecond) / 1000) + 10;
      limit = Math.min(n, allowed);
    }
    const p = this.packet;
    let sinceDrain = 0;
    let blocked = false;
    while (b.next < limit) {
      if (this.inFlight >= SEQ_SPACE) {
        blocked = true; // every sequence number is in use: retry when some complete
        break;
      }
      let seq = this.nextSeq;
      while (this.slots[seq] !== undefined) seq = (seq + 1) & 0xffff;
      this.nextSeq = (seq + 1) & 0xffff;
      const index = b.next;
      const token = nextToken;
      nextToken = (nextToken + 1) >>> 0 || 1;
      p.writeUInt16BE(seq, 6);
      p.writeUInt32BE(token, 12);
      if (this.family === 4) {
        p.writeUInt16BE(0, 2);
        p.writeUInt16BE(checksum(p), 2);
      } // the kernel computes ICMPv6 checksums
      const probe: Probe = { seq, token, key: b.keys[index] as string, sentAt: 0, batch: b, index };
      this.slots[seq] = probe;
      this.inFlight++;
      b.probes[index] = probe;
      probe.sentAt = performance.now();
      try {
        wrap.send(p, 0, PACKET_BYTES, b.targets[index] as string, noop);
      } catch (err) {
        const msg = (err as Error).message;
        if (/temporarily unavailable|No buffer space/i.test(msg)) {
          // Socket or device queue full: free the slot and retry this target shortly.
          this.slots[seq] = undefined;
          this.inFlight--;
          b.probes[index] = undefined;
          blocked = true;
          break;
        }
        b.next++;
        this.complete(probe, { alive: false, rtt_ms: null, error: msg });
        continue;
      }
      b.next++;
      if (++sinceDrain >= DRAIN_EVERY) {
        sinceDrain = 0;
        this.drain();
        if (this.wrap !== wrap) return; // the socket failed; fail() settled this batch
      }
    }
    if (sinceDrain > 0) this.drain();
    if (this.wrap !== wrap) return;
    if (b.pending === 0) return;
    if (b.next < n) b.sendTimer = setTimeout(() => this.pump(b), blocked ? 2 : 1);
    if (!b.deadlineTimer && b.oldest < b.next) this.armDeadline(b);
  }

  private armDeadline(b: Batch): void {
    let i = b.oldest;
    while (i < b.next && b.results[i] !== undefined) i++;
    b.oldest = i;
    if (i >= b.next) {
      b.deadlineTimer = null;
      return;
    }
    const probe = b.probes[i] as Probe;
    const wait = Math.max(0, probe.sentAt + b.timeoutMs - performance.now());
    b.deadlineTimer = setTimeout(() => this.onDeadline(b), Math.ceil(wait));
  }

  private onDeadline(b: Batch): void {
    b.deadlineTimer = null;
    this.drain(); // replies already queued count, even if the event loop was late to read them
    const now = performance.now();
    for (let i = b.oldest; i < b.next; i++) {
      if (b.results[i] !== undefined) continue;
      const probe = b.probes[i] as Probe;
      if (probe.sentAt + b.timeoutMs > now) break;
      this.complete(probe, { alive: false, rtt_ms: null, error: "timeout" });
    }
    if (b.pending > 0) this.armDeadline(b);
  }

  private complete(probe: Probe, reply: EchoReply): void {
    const b = probe.batch;
    if (b.results[probe.index] !== undefined) return;
    if (this.slots[probe.seq] === probe) {
      this.slots[probe.seq] = undefined;
      this.inFlight--;
    }
    b.results[probe.index] = reply;
    if (--b.pending > 0) return;
    if (b.deadlineTimer) clearTimeout(b.deadlineTimer);
    if (b.sendTimer) clearTimeout(b.sendTimer);
    b.deadlineTimer = b.sendTimer = null;
    this.active.delete(b);
    b.resolve(b.results as EchoReply[]);
    if (this.active.size === 0) this.idle();
  }

  private idle(): void {
    // Stop polling so an idle socket does not keep the process alive; close it a bit later.
    this.wrap?.pause(true, true);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.active.size === 0) this.close();
    }, IDLE_CLOSE_MS);
    this.idleTimer.unref();
  }

  closeIfIdle(): void {
    if (this.active.size === 0) this.close();
  }

  close(): void {
    const w = this.wrap;
    this.wrap = null;
    try {
      w?.close();
    } catch {
      // already closed
    }
  }

  /** The socket failed: fail everything in flight and start afresh on the next batch. */
  private fail(message: string): void {
    this.close();
    for (const b of [...this.active]) {
      for (let i = 0; i < b.targets.length; i++) {
        const probe = b.probes[i];
        if (b.results[i] !== undefined) continue;
        if (probe) this.complete(probe, { alive: false, rtt_ms: null, error: `raw socket: ${message}` });
        else {
          b.results[i] = { alive: false, rtt_ms: null, error: `raw socket: ${message}` };
          if (--b.pending === 0) {
            this.active.delete(b);
            b.resolve(b.results as EchoReply[]);
          }
        }
      }
      if (b.sendTimer) clearTimeout(b.sendTimer);
      if (b.deadlineTimer) clearTimeout(b.deadlineTimer);
      b.next = b.targets.length;
    }
  }

  /** Read every queued packet (non-blocking) and match replies. */
  private drain(): void {
    const wrap = this.wrap;
    if (!wrap) return;
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0; // the addon throws EAGAIN when the queue is empty: keep that cheap
    try {
      for (;;) wrap.recv(this.rbuf, this.onPacketBound);
    } catch (err) {
      const msg = (err as Error).message;
      if (!/temporarily unavailable|would block/i.test(msg) && this.wrap) {
        Error.stackTraceLimit = limit;
        this.fail(msg);
      }
    } finally {
      Error.stackTraceLimit = limit;
    }
  }

  private onPacket(buf: Buffer, bytes: number, source: string): void {
    const now = performance.now();
    let off = 0;
    if (this.family === 4) {
      if (bytes < 20) return;
      off = ((buf[0] as number) & 0x0f) * 4; // IPv4 raw sockets see the IP header
    }
    if (bytes < off + 8) return;
    const type = buf[off] as number;
    if ((this.family === 4 && type === 0) || (this.family === 6 && type === 129)) {
      if (bytes < off + PACKET_BYTES) return;
      const probe = this.match(buf, off, bytes);
      if (!probe || probe.key !== source) return;
      this.complete(probe, { alive: true, rtt_ms: Math.round((now - probe.sentAt) * 1000) / 1000 });
      return;
    }
    // Errors quote our request: [outer ICMP 8][inner IP header][inner ICMP header + payload].
    let inner: number;
    let label: string;
    if (this.family === 4) {
      if (type !== 3 && type !== 11) return;
      if (bytes < off + 8 + 20) return;
      inner = off + 8 + ((buf[off + 8] as number) & 0x0f) * 4;
      if ((buf[off + 8 + 9] as number) !== 1) return; // inner protocol must be ICMP
      label = type === 3 ? "destination unreachable" : "time exceeded";
    } else {
      if (type !== 1 && type !== 3) return;
      inner = off + 8 + 40;
      if ((buf[off + 8 + 6] as number) !== IPPROTO_ICMPV6) return; // no extension headers on our requests
      label = type === 1 ? "destination unreachable" : "time exceeded";
    }
    const requestType = this.family === 4 ? 8 : 128;
    if (bytes < inner + 8 || buf[inner] !== requestType) return;
    const probe = this.match(buf, inner, bytes);
    if (!probe) return;
    this.complete(probe, { alive: false, rtt_ms: null, error: `${label} (from ${source})` });
  }

  /** The probe in flight for the echo header at `off`, if identifier/sequence/payload are ours. */
  private match(buf: Buffer, off: number, bytes: number): Probe | undefined {
    if (buf.readUInt16BE(off + 4) !== this.ident) return undefined;
    const probe = this.slots[buf.readUInt16BE(off + 6)];
    if (!probe) return undefined;
    // Quoted requests may be truncated to 8 bytes (RFC 792); then id+seq is all we can check.
    if (bytes >= off + PACKET_BYTES) {
      if (buf.readUInt32BE(off + 8) !== this.nonce || buf.readUInt32BE(off + 12) !== probe.token)
        return undefined;
    }
    return probe;
  }
}

/** Internet checksum of a 16-byte packet. */
function checksum(p: Buffer): number {
  let sum = 0;
  for (let i = 0; i < PACKET_BYTES; i += 2) sum += ((p[i] as number) << 8) | (p[i + 1] as number);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

const engines = new Map<Family, RawIcmpEngine | null>();

function engine(family: Family): RawIcmpEngine | null {
  let e = engines.get(family);
  if (e !== undefined) return e;
  const raw = loadRaw();
  e = raw ? new RawIcmpEngine(family, raw) : null;
  engines.set(family, e);
  return e;
}

/** For tests: identifier, nonce and probes in flight of this process's engine for `family`. */
export function inspectRawEngine(family: Family) {
  return engine(family)?.inspect() ?? null;
}

let available: boolean | undefined;

/** Whether raw ICMP works in this process (addon present and socket() permitted). Cached. */
export function rawIcmpAvailable(): boolean {
  if (available !== undefined) return available;
  const e = engine(4);
  try {
    e?.open();
    available = e != null;
  } catch {
    available = false;
  }
  // The probe socket is not needed until the first batch (which reopens it).
  if (available) (e as RawIcmpEngine).closeIfIdle();
  return available;
}

/** Canonical form of an address as the kernel reports reply sources (lowercase, compressed, no zone). */
export function canonicalAddress(ip: string): { family: Family; key: string } | null {
  const v = net.isIP(ip);
  if (v === 4) return { family: 4, key: ip };
  if (v === 6) {
    const bare = ip.split("%")[0] as string;
    return { family: 6, key: new net.SocketAddress({ address: bare, family: "ipv6" }).address };
  }
  return null;
}

export function isLoopback(ip: string): boolean {
  const c = canonicalAddress(ip);
  if (!c) return false;
  return c.family === 4 ? c.key.startsWith("127.") : c.key === "::1";
}

/**
 * One echo request to each of `ips` (distinct IP literals) over raw sockets; replies in order.
 * `ratePerSecond` 0 sends as fast as the socket takes them.
 */
export async function rawEchoOnce(
  ips: readonly string[],
  timeoutMs: number,
  ratePerSecond: number,
): Promise<EchoReply[]> {
  const out: EchoReply[] = new Array(ips.length);
  const groups: Record<Family, { idx: number[]; targets: string[]; keys: string[] }> = {
    4: { idx: [], targets: [], keys: [] },
    6: { idx: [], targets: [], keys: [] },
  };
  ips.forEach((ip, i) => {
    const c = canonicalAddress(ip);
    if (!c) {
      out[i] = { alive: false, rtt_ms: null, error: `not an IP address: '${ip}'` };
      return;
    }
    const g = groups[c.family];
    g.idx.push(i);
    g.targets.push(ip);
    g.keys.push(c.key);
  });
  await Promise.all(
    ([4, 6] as const).map(async (family) => {
      const g = groups[family];
      if (g.targets.length === 0) return;
      const e = engine(family);
      const replies = e
        ? await e.batch(g.targets, g.keys, timeoutMs, ratePerSecond)
        : g.targets.map(() => ({ alive: false, rtt_ms: null, error: "raw-socket addon unavailable" }));
      replies.forEach((r, j) => {
        out[g.idx[j] as number] = r;
      });
    }),
  );
  return out;
}
