import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echo, icmpBackend } from "./icmp.ts";
import { inspectRawEngine } from "./icmp-raw.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const isRoot = process.getuid?.() === 0;

/** 127.0.<x>.<y> loopback addresses, `n` of them starting at 127.0.<x0>.1. */
function loopbacks(n: number, x0 = 0): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) out.push(`127.0.${x0 + Math.floor(i / 254)}.${(i % 254) + 1}`);
  return out;
}

// TEST-NET-2/3 (documentation ranges) and the IPv6 documentation prefix: nothing answers there.
// (TEST-NET-1, 192.0.2.0/24, is this VM's own subnet, so it is not used.)
const DEAD_V4 = ["198.51.100.7", "203.0.113.9"];
const DEAD_V6 = "2001:db8::1";

function expectAlive(
  res: Map<string, { alive: boolean; rtt_ms: number | null }[]>,
  ips: string[],
  count = 1,
) {
  for (const ip of ips) {
    const r = res.get(ip);
    expect(r, ip).toHaveLength(count);
    for (const x of r ?? []) {
      expect(x.alive, ip).toBe(true);
      expect(typeof x.rtt_ms).toBe("number");
      expect(x.rtt_ms as number).toBeGreaterThanOrEqual(0);
    }
  }
}

function expectDead(
  res: Map<string, { alive: boolean; rtt_ms: number | null; error?: string }[]>,
  ips: string[],
) {
  for (const ip of ips) {
    const r = res.get(ip);
    expect(r, ip).toHaveLength(1);
    expect(r?.[0]?.alive, ip).toBe(false);
    expect(r?.[0]?.rtt_ms).toBeNull();
    expect(r?.[0]?.error).toBeTruthy();
  }
}

const backends = [
  { name: "raw", env: undefined, skip: !isRoot },
  { name: "fping", env: "fping", skip: false },
] as const;

for (const b of backends) {
  describe.skipIf(b.skip)(`ICMP echo, ${b.name} backend${b.skip ? " (skipped: needs root)" : ""}`, () => {
    const saved = process.env.NETMON_ICMP_BACKEND;
    beforeAll(() => {
      if (b.env) process.env.NETMON_ICMP_BACKEND = b.env;
      else delete process.env.NETMON_ICMP_BACKEND;
    });
    afterAll(() => {
      if (saved === undefined) delete process.env.NETMON_ICMP_BACKEND;
      else process.env.NETMON_ICMP_BACKEND = saved;
    });

    it("selects the backend", () => {
      expect(icmpBackend()).toBe(b.name);
    });

    it("gets an RTT from every one of 300 loopback addresses", async () => {
      const ips = loopbacks(300);
      const res = await echo(ips, { count: 1, timeoutMs: 2000 });
      expect(res.size).toBe(300);
      expectAlive(res, ips);
    });

    it("reports an address that does not answer as dead", async () => {
      const res = await echo([DEAD_V4[0] as string], { count: 1, timeoutMs: 200 });
      expectDead(res, [DEAD_V4[0] as string]);
    });

    it("sorts out a mixed IPv4/IPv6 batch", async () => {
      const alive = ["127.0.0.1", "::1", "127.0.0.2"];
      const dead = [...DEAD_V4, DEAD_V6];
      const res = await echo([alive[0], dead[0], alive[1], dead[2], alive[2], dead[1]] as string[], {
        timeoutMs: 300,
      });
      expect(res.size).toBe(6);
      expectAlive(res, alive);
      expectDead(res, dead);
    });

    it("keeps concurrent sweeps' replies apart", async () => {
      // Sizes stay well under the raw socket's receive buffer: on a starved CPU, hundreds of
      // loopback replies at once can overflow it and drop replies (a 1-in-N CI flake at 200+200).
      const a = loopbacks(60, 1); // 127.0.1.1 ..
      const bIps = loopbacks(90, 1).slice(30); // overlaps a
      const dead = Array.from({ length: 20 }, (_, i) => `198.51.100.${i + 1}`);
      const [ra, rb, rc, rd] = await Promise.all([
        echo(a, { count: 2, timeoutMs: 2000 }),
        echo(bIps, { count: 1, timeoutMs: 2000 }),
        echo(dead, { count: 1, timeoutMs: 300 }),
        echo(["127.0.0.1"], { count: 3, timeoutMs: 2000 }),
      ]);
      expectAlive(ra, a, 2);
      expectAlive(rb, bIps, 1);
      expectDead(rc, dead);
      expectAlive(rd, ["127.0.0.1"], 3);
    });

    it("probes a duplicated target once per round", async () => {
      const res = await echo(["127.0.0.1", "127.0.0.5", "127.0.0.1"], { count: 2, timeoutMs: 2000 });
      expect([...res.keys()]).toEqual(["127.0.0.1", "127.0.0.5"]);
      expectAlive(res, ["127.0.0.1", "127.0.0.5"], 2);
    });

    it("paces a batch when asked to", async () => {
      const ips = loopbacks(40, 2);
      const res = await echo(ips, { timeoutMs: 2000, ratePerSecond: 200 });
      expectAlive(res, ips);
    });
  });
}

describe.skipIf(!isRoot)(`raw ICMP engine${isRoot ? "" : " (skipped: needs root)"}`, () => {
  beforeAll(() => {
    delete process.env.NETMON_ICMP_BACKEND;
  });

  it("turns a send error into that target's error, not a crash", async () => {
    // Broadcast without SO_BROADCAST: sendto() fails with EACCES.
    const res = await echo(["127.0.0.1", "255.255.255.255", "not-an-ip"], { timeoutMs: 1000 });
    expectAlive(res, ["127.0.0.1"]);
    expect(res.get("255.255.255.255")?.[0]).toMatchObject({ alive: false, rtt_ms: null });
    expect(res.get("255.255.255.255")?.[0]?.error).toMatch(/permission denied/i);
    expect(res.get("not-an-ip")?.[0]?.error).toMatch(/not an IP address/);
  });

  it("ignores replies to another process's pings of the same targets", async () => {
    const ips = loopbacks(100, 3);
    // fping (its own identifier) pings the same addresses 5 times while we ping them 3 times
    // and wait for a silent address: every reply reaches both raw sockets.
    const other = spawn("fping", ["-q", "-c", "5", "-p", "20", "-i", "0", ...ips], { stdio: "ignore" });
    const exited = new Promise((r) => other.on("close", r));
    const [mine, dead] = await Promise.all([
      echo(ips, { count: 3, timeoutMs: 2000 }),
      echo([DEAD_V4[1] as string], { timeoutMs: 300 }),
    ]);
    await exited;
    expectAlive(mine, ips, 3);
    expectDead(dead, [DEAD_V4[1] as string]);
  });

  it("matches a reply only by source address, identifier, sequence number and payload", async () => {
    // Forge echo replies "from" a target that cannot answer, with a raw IPPROTO_RAW socket (we
    // write the IP header, so we choose the source); the kernel hands them to every raw ICMP
    // socket. The targets are multicast groups: nothing replies *from* a group address and no
    // router sends back an unreachable (unlike TEST-NET addresses here), so the only candidate
    // replies are ours.
    const req = createRequire(import.meta.url);
    const raw = req("raw-socket") as {
      createSocket(o: { protocol: number }): {
        wrap: { send(b: Buffer, o: number, l: number, a: string, cb: () => void): void };
        close(): void;
      };
    };
    const forger = raw.createSocket({ protocol: 255 });
    const sum = (b: Buffer) => {
      let s = 0;
      for (let i = 0; i < b.length; i += 2) s += ((b[i] as number) << 8) | (b[i + 1] ?? 0);
      while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
      return ~s & 0xffff;
    };
    const forge = (src: string, ident: number, seq: number, nonce: number, token: number) => {
      const icmp = Buffer.alloc(16);
      icmp.writeUInt16BE(ident, 4);
      icmp.writeUInt16BE(seq, 6);
      icmp.writeUInt32BE(nonce, 8);
      icmp.writeUInt32BE(token, 12);
      icmp.writeUInt16BE(sum(icmp), 2);
      const ip = Buffer.alloc(20);
      ip[0] = 0x45;
      ip.writeUInt16BE(36, 2);
      ip[8] = 64;
      ip[9] = 1;
      Buffer.from(src.split(".").map(Number)).copy(ip, 12);
      Buffer.from([127, 0, 0, 1]).copy(ip, 16);
      ip.writeUInt16BE(sum(ip), 10);
      forger.wrap.send(Buffer.concat([ip, icmp]), 0, 36, "127.0.0.1", () => {});
    };
    const inFlight = (ip: string) => {
      const st = inspectRawEngine(4);
      const p = st?.probes.find((x) => x.key === ip);
      if (!st || !p) throw new Error(`no probe in flight for ${ip}`);
      return { ...st, ...p };
    };
    try {
      // Every field but one right: none of these is the reply.
      const silent = "239.255.77.77";
      const pending = echo([silent], { timeoutMs: 1000 }); // the request is sent synchronously
      const p = inFlight(silent);
      forge(silent, (p.ident + 1) & 0xffff, p.seq, p.nonce, p.token); // another process's id
      forge(silent, p.ident, (p.seq + 1) & 0xffff, p.nonce, p.token); // another sequence number
      forge(silent, p.ident, p.seq, (p.nonce + 1) >>> 0, p.token); // another engine (thread)
      forge(silent, p.ident, p.seq, p.nonce, (p.token + 1) >>> 0); // an earlier probe's late reply
      forge("127.0.0.9", p.ident, p.seq, p.nonce, p.token); // another source address
      expectDead(await pending, [silent]);
      // Control: the same forgery with every field right is taken as the reply.
      const other = "239.255.77.78";
      const pending2 = echo([other], { timeoutMs: 1000 });
      const q = inFlight(other);
      forge(other, q.ident, q.seq, q.nonce, q.token);
      expectAlive(await pending2, [other]);
    } finally {
      forger.close();
    }
  });

  it("does not keep an idle process alive", () => {
    // A script that pings and returns without process.exit(): it must end on its own.
    const icmp = path.join(here, "icmp.ts");
    const script = `import { echo } from ${JSON.stringify(icmp)};
      const r = await echo(["127.0.0.1", "::1"], { timeoutMs: 1000 });
      console.log(JSON.stringify([...r.values()].map((x) => x[0].alive)));`;
    const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 20_000,
      env: { ...process.env, NETMON_ICMP_BACKEND: "" },
    });
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe("[true,true]");
  });
});
