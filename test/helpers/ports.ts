import dgram from "node:dgram";
import net from "node:net";

/**
 * A loopback port free for both TCP and UDP right now (receivers that take a fixed port, such
 * as syslog, are started on it). Another process could take it before the server binds; the
 * window is milliseconds and only ever makes a test fail loudly, never pass wrongly.
 */
export async function freeTcpUdpPort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const server = net.createServer();
    const port = await new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port));
    });
    const udp = dgram.createSocket("udp4");
    const ok = await new Promise<boolean>((resolve) => {
      udp.once("error", () => resolve(false));
      udp.bind(port, "127.0.0.1", () => resolve(true));
    });
    await new Promise<void>((r) => server.close(() => r()));
    await new Promise<void>((r) => {
      try {
        udp.close(() => r());
      } catch {
        r();
      }
    });
    if (ok) return port;
  }
  throw new Error("no free TCP+UDP port found");
}
