/** Loopback HTTP + TCP targets in their own process (so they do not share the bench's event loop). */
import { startHttpTarget, startTcpTarget } from "../../src/monitoring/testing/targets.ts";

const [h, t] = await Promise.all([startHttpTarget(), startTcpTarget()]);
process.stdout.write(`${JSON.stringify({ http: h.port, tcp: t.port })}\n`);
process.on("SIGTERM", () => process.exit(0));
setInterval(() => {}, 1 << 30);
