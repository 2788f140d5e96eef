import http from "node:http";
import { afterAll, describe, expect, it } from "vitest";
import { PostgresDb } from "../../src/storage/postgres/client.ts";
import { authHeaders } from "../helpers/auth.ts";
import { type CliWorkspace, cliWorkspace } from "../helpers/cli.ts";
import { testBackend } from "../helpers/database.ts";
import { startReplica, stopReplicas } from "../helpers/replica.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Issue 19: kill -9 of a replica mid-notification. Two `netmon serve` replicas share one
 * PostgreSQL database. Replica A routes five alerts to a webhook and starts sending them; the
 * receiver holds every request open, so A dies with all five claimed (`dispatching`) and none
 * answered. The survivor B must send each of them — at least once, and since none was answered
 * before the kill, exactly once with a 2xx — after the claim timeout (12 s here).
 */
const CLAIM_TIMEOUT_S = 12;
const ALERTS = 5;

let ws: CliWorkspace | undefined;
afterAll(() => {
  stopReplicas();
  ws?.cleanup();
});

const replica = (env: Record<string, string>) =>
  startReplica({ ...env, NETMON_NOTIFY_CLAIM_TIMEOUT: `${CLAIM_TIMEOUT_S}s` }, "netmon-notify-kill-");

describe.skipIf(testBackend() !== "postgres")("kill -9 mid-notification (two replicas on PostgreSQL)", () => {
  it("the survivor sends every notification the dead replica had claimed", async () => {
    ws = await cliWorkspace("netmon-notify-kill");
    expect((await ws.netmon("users", "create", "--email", "n@example.test", "--role", "admin")).code).toBe(0);
    const tok = await ws.netmon("tokens", "create", "--user", "n@example.test");
    expect(tok.code, tok.stderr).toBe(0);
    const token = tok.stdout.trim();

    // The receiver holds requests open until the kill, then answers 200 at once.
    let holding = true;
    const held: http.ServerResponse[] = [];
    const answered: string[] = [];
    const receiver = http.createServer((req, res) => {
      let body = "";
      req.on("data", (d) => {
        body += d;
      });
      req.on("end", () => {
        if (holding) {
          held.push(res);
          return;
        }
        answered.push(body);
        res.writeHead(200).end("ok");
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;

    const env = { ...ws.env, NETMON_LOG_LEVEL: "info" };
    const a = await replica(env);
    const b = await replica(env);
    const J = "application/vnd.api+json";
    const v2 = async (method: string, p: string, body: unknown) => {
      const res = await fetch(`${a.url}/api/v2${p}`, {
        method,
        headers: { ...authHeaders(token), accept: J, "content-type": J },
        body: JSON.stringify(body),
      });
      const doc = (await res.json()) as { data: { id: string } };
      expect(res.status, JSON.stringify(doc)).toBe(201);
      return doc.data.id;
    };
    const db = await PostgresDb.open({ connectionString: ws.dbUrl as string, poolSize: 2 });
    try {
      const channel = await v2("POST", "/notification-channels", {
        data: {
          type: "notification-channel",
          attributes: { name: "hook", provider: "webhook", config: { url: hook } },
        },
      });
      await v2("POST", "/notification-routes/quick", {
        data: { type: "notification-route", attributes: { name: "all", channel_ids: [channel] } },
      });
      const alertIds: string[] = [];
      for (let i = 0; i < ALERTS; i++) {
        alertIds.push(
          await v2("POST", "/alerts", {
            data: { type: "alert", attributes: { title: `kill test ${i}`, severity: "critical" } },
          }),
        );
      }
      // A claimed and is sending all of them (the receiver holds each request).
      await waitFor(async () => held.length >= ALERTS, "replica A to send every notification", 60_000);
      const claimed = await db.one<{ n: number }>(
        "SELECT count(*)::int AS n FROM notification_deliveries WHERE status = 'dispatching' AND alert_id = ANY($1::uuid[])",
        [alertIds],
      );
      expect(claimed?.n).toBe(ALERTS);

      const killedAt = Date.now();
      a.child.kill("SIGKILL");
      await new Promise((r) => a.child.once("exit", r));
      holding = false;
      for (const r of held) r.destroy();

      // B sends each one after the claim timeout; every alert reaches the receiver once.
      await waitFor(
        async () => alertIds.every((id) => answered.some((body) => body.includes(id))),
        "the survivor to send every claimed notification",
        90_000,
        250,
      );
      const redeliveredAfterMs = Date.now() - killedAt;
      for (const id of alertIds)
        expect(
          answered.filter((body) => body.includes(id)),
          id,
        ).toHaveLength(1);
      await waitFor(async () => {
        const r = await db.one<{ n: number }>(
          "SELECT count(*)::int AS n FROM notification_deliveries WHERE status = 'sent' AND alert_id = ANY($1::uuid[])",
          [alertIds],
        );
        return r?.n === ALERTS;
      }, "every delivery recorded as sent");
      console.log(
        `notify kill: all ${ALERTS} notifications sent by the survivor ${redeliveredAfterMs} ms after the kill`,
      );
      b.child.kill("SIGTERM");
      await new Promise((r) => b.child.once("exit", r));
    } finally {
      await db.close();
      receiver.closeAllConnections();
      receiver.close();
    }
  }, 240_000);
});
