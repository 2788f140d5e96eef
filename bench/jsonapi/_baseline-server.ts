// The "bare" ceiling for bench/jsonapi/alerts-list.ts: node:http + pg running the equivalent
// hand-written SQL and serialising the same JSON:API document. Not part of netmon.
import http from "node:http";
import pg from "pg";

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.POOL ?? 10) });
pg.types.setTypeParser(20, (v) => Number(v));

const COLUMNS = [
  "title",
  "description",
  "severity",
  "status",
  "source_type",
  "source_id",
  "service_check_id",
  "device_uid",
  "agent_uid",
  "event_id",
  "event_time",
  "metric_name",
  "metric_value",
  "threshold_value",
  "comparison",
  "triggered_at",
  "acknowledged_at",
  "acknowledged_by",
  "resolved_at",
  "resolved_by",
  "resolution_note",
  "escalated_at",
  "escalation_level",
  "escalation_reason",
  "notification_count",
  "last_notification_at",
  "suppressed_until",
  "metadata",
  "tags",
];
const DATES = new Set([
  "event_time",
  "triggered_at",
  "acknowledged_at",
  "resolved_at",
  "escalated_at",
  "last_notification_at",
  "suppressed_until",
]);
const SEVERITIES = new Set(["info", "warning", "critical", "emergency"]);

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url ?? "/", "http://x");
    const severity = url.searchParams.get("filter[severity][eq]") ?? "";
    const limit = Number(url.searchParams.get("page[limit]") ?? 100);
    if (url.pathname !== "/api/v2/alerts" || !SEVERITIES.has(severity) || !(limit >= 1 && limit <= 1000)) {
      res.writeHead(400, { "content-type": "application/vnd.api+json" });
      res.end('{"errors":[{"status":"400"}]}');
      return;
    }
    const { rows } = await pool.query(
      `SELECT r.*, CAST(r.triggered_at AS text) AS _k0, CAST(r.id AS text) AS _k1 FROM alerts r
       WHERE r.severity = $1 ORDER BY r.triggered_at DESC, r.id DESC LIMIT $2`,
      [severity, limit + 1],
    );
    const more = rows.length > limit;
    const page = more ? rows.slice(0, limit) : rows;
    const base = `http://${req.headers.host}/api/v2`;
    const cursor = (r: Record<string, unknown>) =>
      Buffer.from(JSON.stringify({ s: "-triggered_at,-id", v: [r._k0, r._k1] })).toString("base64url");
    const data = page.map((r) => {
      const attributes: Record<string, unknown> = {};
      for (const c of COLUMNS) {
        const v = r[c];
        attributes[c] = v instanceof Date ? v.toISOString() : (v ?? null);
        if (DATES.has(c) && v instanceof Date) attributes[c] = v.toISOString();
      }
      return {
        type: "alert",
        id: r.id,
        attributes,
        links: { self: `${base}/alerts/${r.id}` },
        meta: { cursor: cursor(r) },
      };
    });
    const self = `${base}/alerts?${url.searchParams.toString()}`;
    const last = page[page.length - 1];
    const doc = {
      data,
      links: {
        self,
        first: `${base}/alerts?filter[severity][eq]=${severity}&page[limit]=${limit}`,
        next:
          more && last
            ? `${base}/alerts?filter[severity][eq]=${severity}&page[limit]=${limit}&page[after]=${cursor(last)}`
            : null,
        prev: null,
      },
      meta: { page: { limit, style: "keyset", max_limit: 1000 } },
      jsonapi: { version: "1.1" },
    };
    res.writeHead(200, { "content-type": "application/vnd.api+json" });
    res.end(JSON.stringify(doc));
  } catch (err) {
    res.writeHead(500);
    res.end(String(err));
  }
});
server.listen(0, "127.0.0.1", () => {
  const a = server.address();
  console.log(`baseline at http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`);
});
