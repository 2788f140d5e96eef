// Check runners in a worker thread, so the embedded agent's checks never run on the core's
// event loop (issue 10: a check must not be able to stall the API). Plain JavaScript that
// registers tsx itself when beside the sources, so it loads under `npm start`, vitest and plain node.
// Protocol: parent posts {id, spec}; worker answers {id, ok, result} or {id, ok:false, error}.
import { existsSync } from "node:fs";
import { parentPort, workerData } from "node:worker_threads";

// Beside the sources (vitest, tsx) load the .ts files through tsx; in the compiled dist/ the .js.
const fromSource = existsSync(new URL("../checks/index.ts", import.meta.url));
if (fromSource) (await import("tsx/esm/api")).register();
const ext = fromSource ? "ts" : "js";
const { runCheck } = await import(`../checks/index.${ext}`);
const { TargetPolicy } = await import(`../target-policy.${ext}`);

const policy = new TargetPolicy(workerData.policy);
const customAllowList = workerData.customAllowList ?? [];

parentPort.on("message", async (msg) => {
  if (msg.op === "block") {
    // Test hook: hold this thread's event loop, as a runaway check would.
    const until = Date.now() + msg.ms;
    while (Date.now() < until) {}
    parentPort.postMessage({ id: msg.id, ok: true, result: { status: "success", response_time_ms: msg.ms } });
    return;
  }
  try {
    const result = await runCheck(msg.spec, { policy, customAllowList });
    parentPort.postMessage({ id: msg.id, ok: true, result });
  } catch (err) {
    parentPort.postMessage({ id: msg.id, ok: false, error: String(err?.message ?? err) });
  }
});
parentPort.postMessage({ id: 0, ok: true, result: "ready" });
