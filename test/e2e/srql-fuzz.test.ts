import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SYSTEM_ACTOR } from "../../src/access/actor.ts";
import { isAppError } from "../../src/kernel/errors.ts";
import { ENTITIES } from "../../src/srql/catalog.ts";
import { runQuery, translate } from "../../src/srql/run.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { seedAll } from "./srql-seed.ts";

/**
 * Fuzz: random grammar-shaped and randomly mutated queries through the domain function always
 * answer (200) or fail with a 400 AppError — never another exception, never a hang — and no
 * generated SQL text ever contains a user value (values carry a marker that must only appear
 * in the parameters).
 */

const RUNS = Number(process.env.SRQL_FUZZ_RUNS ?? 1500);
const MARK = "Zq";

const entityNames = ENTITIES.flatMap((e) => [e.name, ...e.aliases]);
const fieldNames = [...new Set(ENTITIES.flatMap((e) => [...e.fields.keys(), ...e.fieldAliases.keys()]))];
const special = fc.constantFrom(
  "'",
  '"',
  "`",
  "(",
  ")",
  "[",
  "]",
  ",",
  ":",
  "%",
  "!",
  ";",
  "--",
  "$1",
  "\\",
  " ",
  "\u0000",
  "é",
  "*/",
  ">",
  "<=",
);
const markedValue = fc
  .tuple(fc.stringMatching(/^[a-z0-9]{4,8}$/), fc.array(special, { maxLength: 3 }))
  .map(([core, extra]) => `${MARK}${core}${extra.join("")}`);

const quoted = (v: string) => `"${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

const valueText = fc.oneof(
  markedValue.map(quoted),
  markedValue.map((v) => `(${quoted(v)},${quoted(`${v}x`)})`),
  fc.constantFrom(
    "true",
    "false",
    "1",
    "-5",
    "88.5",
    "10.0.0.0/8",
    "10.0.0.1-10.0.0.9",
    "%a%",
    "2026-01-01T00:00:00Z",
  ),
  fc.constantFrom(">5", ">=1.5", "<0", "<=99", "!=x", "contains:ab", "equals:ab", "(1,2,3)", "[a,b]", "()"),
  fc.string({ maxLength: 12 }),
);

const token = fc.oneof(
  fc
    .tuple(fc.boolean(), fc.constantFrom(...fieldNames), valueText)
    .map(([neg, f, v]) => `${neg ? "!" : ""}${f}:${v}`),
  fc
    .tuple(
      fc.constantFrom("metadata", "tags", "attributes", "os"),
      markedValue.filter((v) => /^[A-Za-z0-9]+$/.test(v)),
      valueText,
    )
    .map(([p, k, v]) => `${p}.${k}:${v}`),
  fc.constantFrom(
    "time:last_24h",
    "time:last_1y",
    "time:today",
    "time:[2026-01-01T00:00:00Z,]",
    "time:[,]",
    'timeFrame:"7 Days"',
  ),
  fc.constantFrom("limit:5", "limit:0", "limit:abc", "limit:201", "limit:99999"),
  fc.constantFrom(
    "sort:timestamp:desc",
    "sort:hostname:asc,uid",
    "sort:nope",
    "sort:last_seen:sideways",
    "order:time",
  ),
  fc.constantFrom(
    'stats:"count() as n by type"',
    "stats:count()",
    "stats:avg(x)",
    'stats:"count() by severity_text"',
    "by:status",
    "group:type,vendor_name",
  ),
  fc.constantFrom(
    "bucket:5m",
    "bucket:0m",
    "agg:avg",
    "agg:rate",
    "series:metric_name",
    "value_field:value",
    "where",
    "as",
    "by",
  ),
  fc.string({ maxLength: 10 }),
);

const grammarQuery = fc
  .tuple(fc.constantFrom(...entityNames, "nope"), fc.array(token, { maxLength: 6 }))
  .map(([e, toks]) => [`in:${e}`, ...toks].join(" "));

const SEEDS = [
  "in:devices hostname:%cam% limit:50 sort:last_seen:desc",
  "in:devices discovery_sources:(sweep) discovery_sources:(armis) time:last_7d",
  "in:devices ip:10.0.0.0/8 !vendor_name:(Cisco,Dell)",
  'in:devices stats:"count() as total by type"',
  "in:logs severity:(error,ERROR) time:last_24h sort:timestamp:desc limit:100",
  "in:memory_metrics time:last_7d bucket:5m agg:avg value_field:used_bytes limit:10",
  "in:devices time:[2026-01-01T00:00:00Z,2026-01-02T00:00:00Z] os.name:%OS%",
];
const mutated = fc
  .tuple(
    fc.constantFrom(...SEEDS),
    fc.array(fc.tuple(fc.nat(), fc.nat(3), fc.string({ maxLength: 3, unit: "binary" })), {
      minLength: 1,
      maxLength: 5,
    }),
  )
  .map(([seed, edits]) => {
    let s = seed;
    for (const [at, del, ins] of edits) {
      const i = at % (s.length + 1);
      s = s.slice(0, i) + ins + s.slice(i + del);
    }
    return s;
  });

describe("SRQL fuzz", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await seedAll(server.db);
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function check(query: string): Promise<"ok" | "400"> {
    // SQL-literal check on the translation (when it translates).
    try {
      const t = translate(query, { now: new Date(), partitions: ["default"] });
      if (t.sql.text.includes(MARK)) throw new Error(`user value spliced into SQL: ${t.sql.text}`);
    } catch (err) {
      if (!isAppError(err)) throw err;
    }
    try {
      await runQuery(server.ctx, SYSTEM_ACTOR, { query, limit: 20 });
      return "ok";
    } catch (err) {
      if (isAppError(err) && err.status === 400) return "400";
      throw new Error(`query ${JSON.stringify(query)} threw ${String(err)}`);
    }
  }

  it("grammar-shaped queries answer 200 or 400 and never splice values", { timeout: 300_000 }, async () => {
    const outcomes = { ok: 0, "400": 0 };
    await fc.assert(
      fc.asyncProperty(grammarQuery, async (q) => {
        outcomes[await check(q)]++;
      }),
      { numRuns: RUNS },
    );
    // The generator must exercise both outcomes, or the property proves little.
    expect(outcomes.ok).toBeGreaterThan(RUNS / 20);
    expect(outcomes["400"]).toBeGreaterThan(RUNS / 20);
  });

  it("mutated real queries answer 200 or 400", { timeout: 300_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(mutated, async (q) => {
        await check(q);
      }),
      { numRuns: RUNS },
    );
  });
});
