import { describe, expect, it } from "vitest";
import { canonicalJson, catalogDocument, ENTITIES, findEntity } from "./catalog.ts";
import { decodeCursor, encodeCursor, queryDigest } from "./cursor.ts";
import { SrqlError } from "./errors.ts";
import { etagMatches } from "./feature.ts";
import { tokenize } from "./lexer.ts";
import { parse } from "./parser.ts";
import { translate } from "./run.ts";

const now = new Date("2026-03-10T12:00:00Z");

/** Every construct of the language, each rendered as query → AST → SQL + params in one golden file. */
const GOLDEN: string[] = [
  "in:devices",
  "in:devices hostname:%cam% limit:50 sort:last_seen:desc",
  "in:devices !hostname:%test%",
  'in:devices site_name:"%Denver International%"'.replace("site_name", "hostname"),
  "in:devices vendor_name:Cisco",
  "in:devices vendor_name!=Cisco",
  "in:devices vendor_name:!=Cisco",
  "in:devices hostname:contains:a_b%",
  'in:devices hostname:equals:"100%"',
  "in:devices service_type:(ssh,sftp)".replace("service_type", "type"),
  "in:devices !type:(Camera,Switch)",
  "in:devices type_id:[1,2]",
  "in:devices risk_score:>80 risk_score:<=95",
  "in:devices risk_score:>=4 risk_score:<9",
  "in:devices is_available:false sort:last_seen:desc limit:20",
  "in:devices is_available:(yes,0)",
  "in:devices os.name:%OS% is_available:true",
  "in:devices metadata.site:dfw-edge",
  "in:devices tags.Role:edge",
  "in:devices ip:10.0.0.0/8",
  "in:devices ip:10.0.0.10-10.0.0.50",
  "in:devices ip:10.0.0.%",
  "in:devices mac:aa-bb-cc-dd-ee-ff",
  "in:devices discovery_sources:(sweep) discovery_sources:(armis)",
  "in:devices discovery_sources:(sweep,armis)",
  "in:devices include_deleted:true",
  "in:devices time:last_7d",
  "in:devices time:today",
  "in:devices time:yesterday",
  "in:devices time:[2026-03-01T00:00:00Z,2026-03-02T00:00:00Z]",
  "in:devices time:[2026-03-01T00:00:00Z,]",
  "in:devices time:[,2026-03-02 00:00:00]",
  'in:services timeFrame:"7 Days"',
  "in:devices first_seen:last_30d",
  "in:devices sort:vendor_name:asc,hostname",
  "in:devices sort:type:asc sort:uid:desc",
  "in:devices stats:count() as count by type",
  'in:devices stats:"count() as total"',
  'in:devices stats:"count() by type,vendor_name" sort:count:asc',
  "in:devices stats:count() as n by tags.role",
  "in:devices by:vendor_name",
  "in:devices group:type,is_available",
  "in:devices where hostname:x",
  "in:logs severity:error time:last_24h",
  "in:logs attributes.http.method:GET",
  "in:logs severity_number:%1%",
  "in:alerts status:pending",
  "in:interfaces ip_addresses:(10.0.0.1,10.0.0.2)",
  "in:agents capabilities:(icmp,snmp)",
  "in:capacity_forecasts has_exhaustion:true",
  "in:timeseries_metrics uid:sr:abc metric_type:icmp",
  "in:memory_metrics time:last_7d bucket:5m agg:avg value_field:used_bytes limit:10",
  "in:timeseries_metrics time:last_7d bucket:5m agg:rate series:metric_name",
  "in:cpu_metrics bucket:1h agg:max by:host_id sort:timestamp:desc",
  "in:logs window:5m bounded:true mode:fast",
  "in:composite_results verdict:(down,unknown) check:core-path",
  'in:composite_results stats:"count() as n by verdict"',
  "in:composite_results stats:count() as n by check,input_stale time:last_24h",
  "in:composite_results by:status",
  "in:devices composite.core-path:down",
  "in:devices !composite.core-path.status:(down,unknown)",
];

function render(query: string): string {
  const t = translate(query, { now, partitions: null });
  return [
    `-- ${query}`,
    `ast: ${JSON.stringify(t.ast)}`,
    `sql: ${t.sql.text}`,
    `params: ${JSON.stringify(t.sql.values)}`,
    "",
  ].join("\n");
}

describe("SRQL golden: text → AST → SQL + params", () => {
  it("matches the golden file for every construct", async () => {
    await expect(GOLDEN.map(render).join("\n")).toMatchFileSnapshot("./__golden__/constructs.txt");
  });

  it("binds every user value as a parameter, never in the SQL text", () => {
    const marker = "ZQ'9;--";
    for (const q of [
      `in:devices hostname:"${marker}"`,
      `in:devices hostname:(a,"${marker}")`,
      `in:devices metadata.ZQ9key:x`,
      `in:devices hostname:contains:"${marker}"`,
      `in:logs body:"%${marker}%"`,
    ]) {
      const t = translate(q, { now });
      // Case-insensitive fields bind the value lowered (lists) or as an escaped ILIKE pattern.
      expect(t.sql.text.toLowerCase()).not.toContain("zq");
      expect(JSON.stringify(t.sql.values).toLowerCase()).toContain("zq");
    }
  });

  it("applies the caller's partitions and the cursor keyset", () => {
    const t = translate("in:logs", {
      now,
      partitions: ["p1"],
      cursor: {
        direction: "next",
        values: ["2026-01-01T00:00:00.000000Z", "00000000-0000-0000-0000-000000000000"],
      },
    });
    expect(t.sql.text).toContain(`"partition" = ANY($1::text[])`);
    expect(t.sql.text).toContain(`("timestamp", "id") < ($2::timestamptz, $3::uuid)`);
    const a = translate("in:alerts", { now, partitions: ["p1"] });
    expect(a.sql.text).toContain("EXISTS (SELECT 1 FROM devices d");
    const prev = translate("in:devices sort:hostname:asc", {
      now,
      cursor: { direction: "prev", values: [null, "sr:x"] },
      direction: "prev",
    });
    expect(prev.sql.text).toContain(`ORDER BY "hostname" DESC NULLS FIRST, "uid" DESC`);
    expect(prev.sql.text).toContain(`("hostname" IS NOT NULL OR ("hostname" IS NULL AND "uid" < $1::text))`);
  });
});

describe("SRQL lexer", () => {
  it("splits on whitespace outside quotes and brackets, keeping spans", () => {
    const toks = tokenize(`in:devices  discovery_sources:(sweep, armis) hostname:"a b" x:'c\\'d'`);
    expect(toks.map((t) => t.text)).toEqual([
      "in:devices",
      "discovery_sources:(sweep, armis)",
      'hostname:"a b"',
      "x:'c\\'d'",
    ]);
    expect(toks[1]?.span).toEqual({ start: 12, end: 44 });
  });
  it("a backslash outside quotes is literal, so an escaped space splits", () => {
    expect(() => parse("in:devices site_name:%Denver\\ International%")).toThrow(/missing ':' in token/);
  });
});

describe("SRQL errors name the token and its position", () => {
  const cases: [string, RegExp, number | null][] = [
    ["hostname:x", /queries must include an in:<entity> token/, null],
    ["in:devices,services", /unsupported entity 'devices,services'/, 1],
    ["in:devices hostname", /missing ':' in token \(token 'hostname' at position 12\)/, 12],
    ["in:devices limit:abc", /invalid limit/, 12],
    ["in:devices limit:0", /limit must be a positive integer/, 12],
    ["in:devices limit:6000", /limit must be at most 5000/, 12],
    ['in:devices hostname:"abc', /unterminated quote/, 21],
    ["in:devices hostname:(a,b", /unbalanced '\('/, 21],
    ["in:devices hostname:a)", /unexpected '\)'/, 22],
    ["in:devices nope:1", /unsupported filter field 'nope' for devices/, 12],
    ["in:devices hostname:>5", /unsupported operator for text filter: gt/, 12],
    ["in:devices is_available:maybe", /invalid boolean value 'maybe'/, 12],
    ["in:devices risk_score:abc", /risk_score expects an integer, got 'abc'/, 12],
    ["in:devices hostname:()", /list filters require at least one value/, 12],
    ["in:devices ip:10.0.0.0/40", /invalid CIDR '10.0.0.0\/40'/, 12],
    ["in:devices ip:10.0.0.1-fe80::1", /invalid IP range/, 12],
    ["in:devices time:last_forever", /unsupported time token 'last_forever'/, 12],
    ["in:devices time:[x,]", /invalid time literal 'x'/, 12],
    ["in:devices time:[,]", /time range requires at least one bound/, 12],
    [
      "in:devices time:[2026-03-02T00:00:00Z,2026-03-01T00:00:00Z]",
      /time range start must be before end/,
      12,
    ],
    ["in:devices time:[2025-01-01T00:00:00Z,2026-01-01T00:00:00Z]", /time range cannot exceed 90 days/, 12],
    ["in:devices sort:nope", /unsupported sort field 'nope' for devices/, 12],
    ["in:devices sort:hostname:sideways", /unsupported sort direction 'sideways'/, 12],
    ["in:devices sort:metadata", /field 'metadata' cannot be sorted/, 12],
    [
      "in:devices stats:avg(risk_score)",
      /stats supports only count\(\); unsupported aggregation 'avg\(risk_score\)'/,
      12,
    ],
    [
      "in:devices stats:count() as count by hostname",
      /unsupported stats group field 'hostname'. Supported fields: /,
      12,
    ],
    ['in:devices stats:"count() by"', /stats group by field cannot be empty/, 12],
    ["in:devices stats:count() as total by", /stats group by must be of the form/, 35],
    ["in:devices include_deleted:>1", /include_deleted only supports equality/, 12],
    ["in:devices rollup_stats:inventory_summary", /rollup_stats is not supported/, 12],
    ["in:devices !limit:5", /'limit' cannot be negated/, 12],
    ["in:devices metadata:x", /field 'metadata' is an object/, 12],
    ["in:devices id:abc".replace("in:devices", "in:logs"), /invalid uuid 'abc'/, 9],
    [
      "in:devices composite.core-path:sideways",
      /^invalid composite verdict 'sideways' \(expected healthy/,
      12,
    ],
    ["in:devices composite.Bad!:down", /^unsupported filter field 'composite.Bad!' for devices/, 12],
    ["in:devices composite.x:>down", /^unsupported operator for composite filter: gt/, 12],
    ["in:composite_results input_key:a", /^unsupported filter field 'input_key' for composite results /, 22],
  ];
  for (const [q, re, pos] of cases) {
    it(q, () => {
      let err: unknown;
      try {
        translate(q, { now });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SrqlError);
      const e = err as SrqlError;
      expect(e.status).toBe(400);
      expect(e.message).toMatch(re);
      if (pos !== null) {
        expect(e.extra.position).toBe(pos);
        expect(e.message).toContain(`at position ${pos}`);
      }
    });
  }
});

describe("composite_results stats (the reference's own grammar and messages)", () => {
  const message = (q: string) => {
    try {
      translate(q, { now });
    } catch (e) {
      return e instanceof SrqlError ? e.message.replace(/ \(token .*$/, "") : String(e);
    }
    return "accepted";
  };
  const cases: [string, string][] = [
    ['stats:"count()"', "composite_results stats must be of the form 'count() as alias'"],
    ['stats:"count() as a, count() as b"', "composite_results stats must be of the form 'count() as alias'"],
    ['stats:"verdict"', "composite_results stats must be of the form 'count() as alias'"],
    ['stats:"sum(stale_inputs) as n"', "composite_results stats only support count()"],
    ['stats:"count(verdict) as n"', "composite_results stats only support count()"],
    ['stats:"count() as n-1"', "stats alias must be alphanumeric"],
    ['stats:"count() as n foo"', "expected 'by <field>' after stats alias"],
    ['stats:"count() as n by"', "expected 'by <field>' after stats alias"],
    [
      'stats:"count() as n by device_uid"',
      "unsupported stats group field 'device_uid'. Supported fields: check, check_slug, check_name, verdict, status, input_key, input_value, input_stale",
    ],
    ["nope:1", "unsupported filter field 'nope' for composite results"],
    ['stats:"count() as n by verdict"', "accepted"],
  ];
  for (const [q, expected] of cases) {
    it(q, () => expect(message(`in:composite_results ${q}`)).toBe(expected));
  }
  it("other entities keep the generic messages for the same text", () => {
    expect(message('in:devices stats:"count() as n-1"')).toBe("stats alias must be alphanumeric: 'n-1'");
  });
  it("grouping by an input field counts the inputs of each result", () => {
    const t = translate('in:composite_results stats:"count() as n by input_key"', { now });
    expect(t.sql.text).toContain('FROM "composite_result_inputs"');
    expect(translate('in:composite_results stats:"count() as n by verdict"', { now }).sql.text).toContain(
      'FROM "composite_results"',
    );
  });
});

describe("SRQL catalog", () => {
  it("every entity resolves by name and alias; sorts and time fields are declared", () => {
    for (const e of ENTITIES) {
      expect(findEntity(e.name)).toBe(e);
      for (const a of e.aliases) expect(findEntity(a)).toBe(e);
    }
    expect(findEntity("traces")?.name).toBe("otel_traces");
  });
  it("version is the SHA-256 of the canonical JSON without version", async () => {
    const { doc } = catalogDocument();
    const { createHash } = await import("node:crypto");
    const { version, ...rest } = doc;
    expect(createHash("sha256").update(canonicalJson(rest)).digest("hex")).toBe(version);
    expect(canonicalJson({ b: [2, { d: 1, c: null }], a: "x" })).toBe('{"a":"x","b":[2,{"c":null,"d":1}]}');
  });
  it("If-None-Match matching tolerates W/ and lists", () => {
    expect(etagMatches('"a"', '"a"')).toBe(true);
    expect(etagMatches('W/"a"', '"a"')).toBe(true);
    expect(etagMatches('"b", W/"a"', '"a"')).toBe(true);
    expect(etagMatches('"b"', '"a"')).toBe(false);
    expect(etagMatches(undefined, '"a"')).toBe(false);
  });
});

describe("SRQL cursors", () => {
  const key = Buffer.alloc(32, 7);
  it("round-trip, and reject tampering, other queries and other keys", () => {
    const c = encodeCursor(key, { v: 1, q: queryDigest("in:logs"), k: ["a", null], d: "next" });
    expect(decodeCursor(key, c, "in:logs", 2).k).toEqual(["a", null]);
    expect(() => decodeCursor(key, c, "in:devices", 2)).toThrow("cursor does not belong to this query");
    expect(() => decodeCursor(Buffer.alloc(32, 8), c, "in:logs", 2)).toThrow("invalid cursor signature");
    expect(() => decodeCursor(key, c, "in:logs", 3)).toThrow("invalid cursor payload");
    expect(() => decodeCursor(key, `x${c}`, "in:logs", 2)).toThrow("invalid cursor signature");
    expect(() => decodeCursor(key, "not a cursor", "in:logs", 2)).toThrow("invalid cursor");
  });
});
