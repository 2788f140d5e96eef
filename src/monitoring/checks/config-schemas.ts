/**
 * The JSON Schema of each check type's `config` (issue 13: a typo such as `expect_status` must
 * be refused, not silently give a green check). Closed schemas: an unknown member is an error
 * that names it. Published in the v2 OpenAPI document as `service-check-config-<type>`.
 * Keep in step with the runners in this folder (each documents its options in its header).
 */
import type { CheckType } from "./types.ts";

type Schema = Record<string, unknown>;

const closed = (properties: Record<string, Schema>, description: string): Schema => ({
  type: "object",
  additionalProperties: false,
  description,
  properties,
});

const int = (minimum: number, maximum: number, description: string): Schema => ({
  type: "integer",
  minimum,
  maximum,
  description,
});
const percent = (description: string): Schema => ({ type: "number", minimum: 0, maximum: 100, description });

export const CHECK_CONFIG_SCHEMAS: Record<CheckType, Schema> = {
  ping: closed(
    {
      count: int(1, 20, "echo requests per run (3)"),
      interval_ms: int(0, 10_000, "pause between requests (0)"),
      loss_warning_percent: percent("loss at or above which the result is warning (1)"),
      loss_critical_percent: percent("loss at or above which the result is critical (100)"),
    },
    "ICMP echo: response time is the average round trip",
  ),
  http: closed(
    {
      method: { type: "string", enum: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] },
      headers: { type: "object", additionalProperties: { type: "string" }, description: "request headers" },
      body: { type: "string", maxLength: 65_536 },
      expected_status: {
        description: 'status code, list of codes, a class such as "2xx", or "200,204" (default 200–399)',
        anyOf: [
          { type: "integer", minimum: 100, maximum: 599 },
          { type: "array", items: { type: "integer", minimum: 100, maximum: 599 }, minItems: 1 },
          { type: "string", pattern: "^ *([1-5]xx|[1-5][0-9]{2})( *, *([1-5]xx|[1-5][0-9]{2}))* *$" },
        ],
      },
      body_match: { type: "string", maxLength: 2048, description: "RE2 pattern the body must match" },
      body_contains: { type: "string", maxLength: 2048 },
      follow_redirects: { type: "boolean" },
      max_redirects: int(0, 20, "(5)"),
      tls_warning_days: int(0, 3650, "certificate expiry warning (30)"),
      tls_critical_days: int(0, 3650, "certificate expiry critical (7)"),
      insecure: { type: "boolean", description: "skip certificate verification (false)" },
    },
    "HTTP(S) request",
  ),
  tcp: closed(
    {
      port: int(1, 65_535, "used when the check has no port"),
      send: { type: "string", maxLength: 4096, description: "written after connecting" },
      expect: { type: "string", maxLength: 4096, description: "must appear in the reply" },
    },
    "TCP connect (optionally send and expect)",
  ),
  snmp: closed(
    {
      version: { type: "string", enum: ["1", "2c", "3"] },
      community: { type: "string", maxLength: 255 },
      user: {
        type: "object",
        additionalProperties: false,
        required: ["name"],
        properties: {
          name: { type: "string", minLength: 1, maxLength: 255 },
          level: { type: "string", enum: ["noAuthNoPriv", "authNoPriv", "authPriv"] },
          auth_protocol: { type: "string", maxLength: 32 },
          auth_key: { type: "string", maxLength: 255 },
          priv_protocol: { type: "string", maxLength: 32 },
          priv_key: { type: "string", maxLength: 255 },
        },
      },
      oids: {
        type: "array",
        maxItems: 256,
        items: {
          anyOf: [
            { type: "string", pattern: "^\\.?[0-9]+(\\.[0-9]+)*$" },
            {
              type: "object",
              additionalProperties: false,
              required: ["oid"],
              properties: {
                oid: { type: "string", pattern: "^\\.?[0-9]+(\\.[0-9]+)*$" },
                name: { type: "string" },
              },
            },
          ],
        },
      },
      expected: { type: "object", additionalProperties: true, description: "{oid: value}" },
      discover_interfaces: { type: "boolean" },
    },
    "SNMP get (v1, v2c, v3)",
  ),
  grpc: closed(
    {
      service: { type: "string", maxLength: 255, description: '"" = the whole server' },
      tls: { type: "boolean" },
      insecure: { type: "boolean" },
    },
    "gRPC health protocol",
  ),
  dns: closed(
    {
      record_type: {
        type: "string",
        enum: ["A", "AAAA", "CNAME", "MX", "NS", "PTR", "SOA", "SRV", "TXT", "CAA"],
      },
      query_type: { type: "string", description: "alias of record_type" },
      server: { type: "string", maxLength: 255, description: 'resolver "ip[:port]"' },
      expected: {
        anyOf: [{ type: "string" }, { type: "array", items: { type: "string" } }],
        description: "every value must be among the answers",
      },
    },
    "DNS lookup of the target name",
  ),
  mtr: closed(
    {
      count: int(1, 10, "probes per hop (3)"),
      max_hops: int(1, 64, "(30)"),
      loss_critical_percent: percent("loss at the last hop that is critical (100)"),
    },
    "Path trace with per-hop loss and latency",
  ),
  custom: closed(
    {
      command: {
        type: "string",
        maxLength: 4096,
        description: "absolute path in NETMON_CUSTOM_CHECK_ALLOWLIST",
      },
      args: { type: "array", maxItems: 64, items: { type: "string", maxLength: 4096 } },
    },
    "A Nagios-style plugin",
  ),
};
