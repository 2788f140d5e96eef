// Syslog over UDP: the highest send rate the receiver stores without loss, next to a bare
// `dgram` socket counting the same datagrams in the same run (the machine's UDP ceiling).
// A separate sender process paces RFC 5424 messages at each rate for SYSLOG_BENCH_SECONDS.
// Run: node --import tsx bench/telemetry/syslog-udp.ts
//   SYSLOG_BENCH_RATES (default "2000,5000,10000,20000,40000" messages/s),
//   SYSLOG_BENCH_SECONDS (default 3), SYSLOG_BENCH_DATABASE_URL (PostgreSQL; default PGlite).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import dgram from "node:dgram";
import os from "node:os";
import { loadConfig } from "../../src/config/config.ts";
import { startServer } from "../../src/server.ts";
import { receiversOf } from "../../src/telemetry/feature.ts";

const RATES = (process.env.SYSLOG_BENCH_RATES ?? "2000,5000,10000,20000,40000").split(",").map(Number);
const SECONDS = Number(process.env.SYSLOG_BENCH_SECONDS ?? 3);
const DATABASE_URL = process.env.SYSLOG_BENCH_DATABASE_URL;

/** Sends `rate` datagrams/s for `seconds` to `port` from a child process; resolves with the count. */
function send(port: number, rate: number, seconds: number, tag: string): Promise<number> {
  const code = `
    import dgram from "node:dgram";
    const s = dgram.createSocket("udp4");
    const [port, rate, seconds, tag] = process.argv.slice(1);
    const total = Number(rate) * Number(seconds);
    const t0 = performance.now();
    let sent = 0;
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * Number(rate)));
      while (sent < due) {
        const msg = "<134>1 " + new Date().toISOString() + " bench-host app 1 ID47 - " + tag + " message " + sent;
        s.send(msg, Number(port), "127.0.0.1");
        sent++;
      }
      if (sent < total) setTimeout(tick, 5);
      else setTimeout(() => { console.log(sent); s.close(); }, 200);
    };
    tick();`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [
      "--input-type=module",
      "-e",
      code,
      String(port),
      String(rate),
      String(seconds),
      tag,
    ]);
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.on("exit", (c) =>
      c === 0 ? resolve(Number(out.trim())) : reject(new Error(`sender exited ${c}`)),
    );
  });
}

async function bareCeiling(rate: number): Promise<{ sent: number; received: number }> {
  const sock = dgram.createSocket("udp4");
  let received = 0;
  sock.on("message", () => {
    received++;
  });
  await new Promise<void>((r) => sock.bind(0, "127.0.0.1", r));
  const sent = await send(sock.address().port, rate, SECONDS, "bare");
  await new Promise((r) => setTimeout(r, 300));
  sock.close();
  return { sent, received };
}

const dataDir = `${os.tmpdir()}/netmon-bench-syslog-${randomBytes(4).toString("hex")}`;
const server = await startServer(
  loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    NETMON_DATA_DIR: dataDir,
    NETMON_LOG_LEVEL: "error",
    NETMON_EMBEDDED_AGENT: "false",
    NETMON_INITIAL_ADMIN: "false",
    NETMON_OTLP_GRPC_PORT: "0",
    NETMON_SNMP_TRAP_PORT: "0",
    NETMON_INGEST_HOST: "127.0.0.1",
    // An ephemeral port of our choosing: bind a socket to learn a free one.
    NETMON_SYSLOG_PORT: String(
      await new Promise<number>((r) => {
        const s = dgram.createSocket("udp4");
        s.bind(0, "127.0.0.1", () => {
          const p = s.address().port;
          s.close(() => r(p));
        });
      }),
    ),
    ...(DATABASE_URL ? { DATABASE_URL } : {}),
  }),
);
const receiver = receiversOf(server.ctx).syslog;
if (!receiver) throw new Error("syslog receiver did not start");

const rows: string[] = [];
for (const rate of RATES) {
  const bare = await bareCeiling(rate);
  const before = { ...receiver.stats };
  const tag = `r${rate}`;
  const sent = await send(receiver.udpPort, rate, SECONDS, tag);
  await receiver.flush();
  const received = receiver.stats.received - before.received;
  const stored =
    (
      await server.ctx.db.one<{ n: number }>(
        "SELECT count(*)::int AS n FROM logs WHERE source = 'syslog' AND body LIKE $1",
        [`${tag} message %`],
      )
    )?.n ?? 0;
  const lossless = stored === sent;
  rows.push(
    `| ${rate.toLocaleString("en-US")} | ${bare.received.toLocaleString("en-US")} / ${bare.sent.toLocaleString("en-US")} | ${received.toLocaleString("en-US")} | ${stored.toLocaleString("en-US")} | ${receiver.stats.dropped - before.dropped} | ${lossless ? "yes" : "no"} |`,
  );
}
await server.close();

console.log(`## Syslog over UDP (${DATABASE_URL ? "PostgreSQL" : "PGlite"})

\`node --import tsx bench/telemetry/syslog-udp.ts\` — a sender process paces RFC 5424 datagrams at each
rate for ${SECONDS} s to netmon's syslog port and, in the same run, to a bare \`dgram\` socket (the
machine's own ceiling for receiving them).

| rate (msg/s) | bare socket received / sent | netmon received | stored | dropped (queue full) | lossless |
|---|---|---|---|---|---|
${rows.join("\n")}
`);
