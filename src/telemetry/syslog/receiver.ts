import dgram from "node:dgram";
import net from "node:net";
import tls from "node:tls";
import type { AppContext } from "../../kernel/context.ts";
import type { Intake } from "../sink.ts";
import type { LogRow } from "../write.ts";
import { syslogToLog } from "./parse.ts";

/**
 * The syslog receiver: UDP (one message per datagram) and TCP (RFC 6587: octet counting
 * "LEN SP MSG" or newline framing, chosen per frame by its first character) on one port.
 *
 * Messages are written in batches (one transaction, multi-row INSERT) every FLUSH_MS or
 * BATCH_MAX messages, with the sender linked to a device by its address, then promoted
 * through the event rules. Bounds: MAX_FRAME bytes per frame (a longer TCP frame closes the
 * connection), MAX_CONNECTIONS TCP clients, an idle timeout, QUEUE_MAX queued messages.
 * Back-pressure: when the queue is full TCP sockets are paused (the sender's TCP window
 * fills, nothing is lost); UDP has no such channel, so datagrams beyond it are counted as
 * dropped and logged (never silently). A failed write is retried, not discarded.
 */
export const FLUSH_MS = 200;
export const BATCH_MAX = 1000;
export const QUEUE_MAX = 20_000;
/** Batches written at once on PostgreSQL. */
export const WRITERS_POSTGRES = 4;
export const MAX_FRAME = 64 * 1024;
export const MAX_CONNECTIONS = 512;
export const IDLE_TIMEOUT_MS = 10 * 60_000;

export interface SyslogStats {
  received: number;
  stored: number;
  dropped: number;
}

export interface SyslogReceiver {
  readonly udpPort: number;
  readonly tcpPort: number;
  /** The RFC 5425 TLS port, when TLS is on. */
  readonly tlsPort: number | null;
  readonly stats: SyslogStats;
  /** Resolves when everything received so far is stored (tests, shutdown). */
  flush(): Promise<void>;
  close(): Promise<void>;
}

function plainIp(addr: string | undefined): string {
  const a = addr ?? "";
  return a.startsWith("::ffff:") && a.includes(".") ? a.slice(7) : a;
}

class Writer {
  queue: LogRow[] = [];
  stats: SyslogStats = { received: 0, stored: 0, dropped: 0 };
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #paused = new Set<net.Socket>();
  #lastDropLog = 0;
  #closed = false;

  constructor(
    readonly ctx: AppContext,
    readonly intake: Intake,
  ) {}

  push(row: LogRow, socket: net.Socket | null): void {
    this.stats.received++;
    if (this.queue.length >= QUEUE_MAX) {
      if (socket === null) {
        this.stats.dropped++;
        const now = Date.now();
        if (now - this.#lastDropLog > 10_000) {
          this.#lastDropLog = now;
          this.ctx.log.warn(
            { dropped: this.stats.dropped },
            "syslog UDP datagrams dropped: ingest queue full",
          );
        }
        return;
      }
    }
    this.queue.push(row);
    if (socket && this.queue.length >= QUEUE_MAX && !this.#paused.has(socket)) {
      socket.pause();
      this.#paused.add(socket);
    }
    if (this.queue.length >= BATCH_MAX) this.kick();
    else this.#timer ??= setTimeout(() => this.kick(), FLUSH_MS);
  }

  forget(socket: net.Socket): void {
    this.#paused.delete(socket);
  }

  kick(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#running || this.queue.length === 0) return;
    this.#running = this.#drain().finally(() => {
      this.#running = null;
      if (this.queue.length > 0 && !this.#closed) this.#timer ??= setTimeout(() => this.kick(), FLUSH_MS);
    });
  }

  async #drain(): Promise<void> {
    // PostgreSQL takes several batches at once (one connection each); PGlite has one connection,
    // so more in flight would only queue there.
    const parallel = this.ctx.db.kind === "postgres" ? WRITERS_POSTGRES : 1;
    const { gate, sink } = this.intake;
    while (this.queue.length > 0) {
      const batches: LogRow[][] = [];
      while (batches.length < parallel && this.queue.length > 0) {
        const batch = this.queue.slice(0, BATCH_MAX);
        if (!gate.tryAcquire(batch.length)) break; // at capacity: retried on the next tick
        this.queue.splice(0, batch.length);
        batches.push(batch);
      }
      if (batches.length === 0) return;
      // Stored (or durably queued) with the senders linked to devices, then promoted.
      const results = await Promise.allSettled(
        batches.map((rows) => sink.accept({ kind: "syslog", rows }).finally(() => gate.release(rows.length))),
      );
      let failed = false;
      results.forEach((r, i) => {
        const rows = batches[i] as LogRow[];
        if (r.status === "fulfilled") {
          this.stats.stored += rows.length;
        } else {
          // Back to the front of the queue: nothing acknowledged is dropped; retried next tick.
          failed = true;
          this.queue.unshift(...rows);
          this.ctx.log.warn({ err: r.reason, queued: this.queue.length }, "syslog write failed; will retry");
        }
      });
      if (this.queue.length < QUEUE_MAX / 2) {
        for (const s of this.#paused) s.resume();
        this.#paused.clear();
      }
      if (failed) return;
    }
  }

  async flush(): Promise<void> {
    for (let i = 0; i < 10_000 && (this.queue.length > 0 || this.#running); i++) {
      this.kick();
      if (this.#running) await this.#running;
      else await new Promise((r) => setTimeout(r, 20));
    }
  }

  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}

/** Split a TCP stream into frames (RFC 6587 octet counting or LF/NUL-terminated). */
function tcpFramer(onFrame: (frame: string) => void, onError: (why: string) => void) {
  let buf: Buffer = Buffer.alloc(0);
  let skipping = false;
  return (chunk: Buffer) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    for (;;) {
      if (buf.length === 0) return;
      const first = buf[0] as number;
      if (!skipping && first >= 0x31 && first <= 0x39) {
        // Octet counting: digits, one space, then exactly that many bytes.
        const sp = buf.indexOf(0x20);
        if (sp === -1) {
          if (buf.length > 10) return onError("octet count without a space");
          return;
        }
        const len = Number(buf.subarray(0, sp).toString("latin1"));
        if (!Number.isInteger(len) || sp > 10) return onError("malformed octet count");
        if (len > MAX_FRAME) return onError(`frame of ${len} bytes is larger than ${MAX_FRAME}`);
        if (buf.length < sp + 1 + len) return;
        onFrame(buf.subarray(sp + 1, sp + 1 + len).toString("utf8"));
        buf = buf.subarray(sp + 1 + len);
        continue;
      }
      let end = buf.indexOf(0x0a);
      const nul = buf.indexOf(0x00);
      if (nul !== -1 && (end === -1 || nul < end)) end = nul;
      if (end === -1) {
        if (buf.length > MAX_FRAME) {
          // An over-long line: keep its first MAX_FRAME bytes (truncated later), drop the rest.
          if (!skipping) onFrame(buf.subarray(0, MAX_FRAME).toString("utf8"));
          skipping = true;
          buf = Buffer.alloc(0);
        }
        return;
      }
      if (!skipping) {
        const line = buf.subarray(0, end).toString("utf8").replace(/\r$/, "");
        if (line.trim() !== "") onFrame(line);
      }
      skipping = false;
      buf = buf.subarray(end + 1);
    }
  };
}

/** Syslog over TLS (RFC 5425): its own port, a certificate and key (PEM). */
export interface SyslogTlsOptions {
  port: number;
  cert: string;
  key: string;
}

/**
 * Start UDP and TCP listeners on `host:port` (port 0: an ephemeral port each, for tests), and
 * with `tls` a TLS listener (RFC 5425: octet-counted frames inside TLS 1.2+).
 */
export async function startSyslogReceiver(
  ctx: AppContext,
  intake: Intake,
  host: string,
  port: number,
  tlsOptions?: SyslogTlsOptions,
): Promise<SyslogReceiver> {
  const writer = new Writer(ctx, intake);
  const udp = dgram.createSocket({
    type: host.includes(":") ? "udp6" : "udp4",
    recvBufferSize: 4 * 1024 * 1024,
  });
  udp.on("message", (msg, rinfo) => {
    writer.push(
      syslogToLog(msg.subarray(0, MAX_FRAME).toString("utf8"), plainIp(rinfo.address), "udp", ctx.now()),
      null,
    );
  });
  udp.on("error", (err) => ctx.log.warn({ err }, "syslog UDP socket error"));
  await new Promise<void>((resolve, reject) => {
    udp.once("error", reject);
    udp.bind(port, host, () => {
      udp.off("error", reject);
      resolve();
    });
  });

  const sockets = new Set<net.Socket>();
  // One stream handler for TCP and TLS: the same framing (octet counting or newlines), the
  // same back-pressure (a socket is paused while its frames wait for the database).
  const stream = (transport: "tcp" | "tls") => (socket: net.Socket) => {
    sockets.add(socket);
    socket.setTimeout(IDLE_TIMEOUT_MS, () => socket.destroy());
    const ip = plainIp(socket.remoteAddress);
    const feed = tcpFramer(
      (frame) => writer.push(syslogToLog(frame, ip, transport, ctx.now()), socket),
      (why) => {
        ctx.log.warn({ source_ip: ip, why, transport }, "syslog stream closed: framing error");
        socket.destroy();
      },
    );
    socket.on("data", feed);
    socket.on("error", () => socket.destroy());
    socket.on("close", () => {
      sockets.delete(socket);
      writer.forget(socket);
      writer.kick();
    });
  };
  const tcp = net.createServer(stream("tcp"));
  tcp.maxConnections = MAX_CONNECTIONS;
  // The same port number for TCP as UDP got (an ephemeral UDP port may be taken on TCP: retry).
  const udpPort = udp.address().port;
  try {
    await new Promise<void>((resolve, reject) => {
      tcp.once("error", reject);
      tcp.listen(port === 0 ? 0 : udpPort, host, () => {
        tcp.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    udp.close();
    throw err;
  }
  const tcpPort = (tcp.address() as net.AddressInfo).port;
  let tlsServer: tls.Server | null = null;
  if (tlsOptions) {
    tlsServer = tls.createServer(
      { cert: tlsOptions.cert, key: tlsOptions.key, minVersion: "TLSv1.2", handshakeTimeout: 10_000 },
      stream("tls"),
    );
    tlsServer.maxConnections = MAX_CONNECTIONS;
    // A failed handshake (a plain-TCP sender, a bad client) is the sender's problem, logged once.
    tlsServer.on("tlsClientError", (err, socket) => {
      ctx.log.info(
        { source_ip: plainIp(socket.remoteAddress), err: err.message },
        "syslog TLS handshake failed",
      );
    });
    const server = tlsServer;
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(tlsOptions.port, host, () => {
          server.off("error", reject);
          resolve();
        });
      });
    } catch (err) {
      udp.close();
      tcp.close();
      throw err;
    }
  }
  const tlsPort = tlsServer ? (tlsServer.address() as net.AddressInfo).port : null;
  ctx.log.info(
    { host, udp_port: udpPort, tcp_port: tcpPort, tls_port: tlsPort },
    "syslog receiver listening",
  );

  return {
    udpPort,
    tcpPort,
    tlsPort,
    stats: writer.stats,
    flush: () => writer.flush(),
    async close() {
      await new Promise<void>((r) => udp.close(() => r()));
      await new Promise<void>((r) => {
        tcp.close(() => r());
        for (const s of sockets) s.destroy();
      });
      if (tlsServer) {
        const server = tlsServer;
        await new Promise<void>((r) => server.close(() => r()));
      }
      await writer.flush();
      writer.close();
    },
  };
}
