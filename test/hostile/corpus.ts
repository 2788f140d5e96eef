/**
 * The hostile corpus: values an attacker sends to every parameter, header and body member.
 * Each entry is a JSON value (for bodies) with a string form (for paths, queries, headers).
 * Prototype keys cannot be written with JSON.stringify of an object literal (`__proto__`
 * sets the prototype instead of a key), so bodies that need them are built as raw text.
 */

export interface HostileValue {
  name: string;
  /** Value placed in a JSON body member. */
  json: unknown;
  /** Text placed in a path segment or query value (undefined: not applicable there). */
  text?: string;
}

/** A JSON number written exactly as given (JavaScript numbers would round it). */
export class RawJson {
  constructor(readonly text: string) {}
}

/** JSON.stringify that writes RawJson values verbatim. */
export function toJson(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_k, v) => {
    if (v instanceof RawJson) {
      raws.push(v.text);
      return `\u0000raw${raws.length - 1}\u0000`;
    }
    return v;
  });
  return text.replace(/"\\u0000raw(\d+)\\u0000"/g, (_m, i: string) => raws[Number(i)] as string);
}

function nested(depth: number): unknown {
  let v: unknown = "x";
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** Address forms that must never let a check or channel reach the core or the metadata service. */
export const SSRF_FORMS = [
  "http://[::ffff:127.0.0.1]/",
  "http://[::ffff:7f00:1]/",
  "http://[::ffff:169.254.169.254]/latest/meta-data/",
  "::ffff:a9fe:a9fe",
  "http://0.0.0.0/",
  "http://[::]/",
  "http://2130706433/",
  "http://0x7f000001/",
  "http://0177.0.0.1/",
  "http://127.1/",
  "169.254.169.254",
  "http://[64:ff9b::a9fe:a9fe]/",
];

export const HOSTILE_VALUES: HostileValue[] = [
  { name: "nul", json: "\u0000", text: "\u0000" },
  { name: "nul-inside", json: "ab\u0000cd", text: "ab\u0000cd" },
  { name: "lone-high-surrogate", json: "a\ud800b", text: "a\ud800b" },
  { name: "lone-low-surrogate", json: "\udfff", text: "\udfff" },
  { name: "proto-key-string", json: "__proto__", text: "__proto__" },
  { name: "constructor-string", json: "constructor", text: "constructor" },
  { name: "int8-overflow", json: new RawJson("9223372036854775808"), text: "9223372036854775808" },
  { name: "unsafe-integer", json: new RawJson("9007199254740993"), text: "9007199254740993" },
  { name: "huge-float", json: 1e308, text: "1e308" },
  { name: "negative-huge", json: -1e308, text: "-1e308" },
  { name: "fraction", json: 1.5, text: "1.5" },
  { name: "negative", json: -1, text: "-1" },
  { name: "year-99999", json: "99999-01-01T00:00:00Z", text: "99999-01-01T00:00:00Z" },
  { name: "date-garbage", json: "2024-13-45T99:99:99Z", text: "2024-13-45T99:99:99Z" },
  { name: "date-min", json: "-271821-04-20T00:00:00Z", text: "-271821-04-20T00:00:00Z" },
  { name: "long-string", json: "A".repeat(20_000), text: "A".repeat(2_000) },
  { name: "empty", json: "", text: "" },
  { name: "sql-ish", json: "' OR 1=1; DROP TABLE devices; --", text: "' OR 1=1; DROP TABLE devices; --" },
  { name: "redos", json: "^(a+)+$", text: "^(a+)+$" },
  { name: "srql-ish", json: "in:devices hostname:%00 sort:__proto__", text: "in:devices sort:__proto__" },
  { name: "unicode-bidi", json: "\u202egnp.exe\u0301\uffff", text: "\u202egnp.exe" },
  { name: "true", json: true, text: "true" },
  { name: "null", json: null, text: "null" },
  { name: "array", json: ["x", 1, null], text: "[]" },
  { name: "object", json: { a: { b: 1 } }, text: "{}" },
  { name: "deep-200", json: nested(200) },
  ...SSRF_FORMS.slice(0, 4).map((s, i) => ({ name: `ssrf-${i}`, json: s, text: s })),
];

/** Whole-body attacks sent as raw text (the JSON parser itself is the target). */
export function hostileRawBodies(): { name: string; body: string }[] {
  const deep = "[".repeat(10_000) + "]".repeat(10_000);
  const deepObj = '{"a":'.repeat(10_000) + "1" + "}".repeat(10_000);
  return [
    { name: "proto-top", body: '{"__proto__":{"optional":1,"public":1,"polluted":1}}' },
    { name: "constructor-top", body: '{"constructor":{"prototype":{"polluted":1,"optional":1}}}' },
    {
      name: "proto-in-data",
      body: '{"data":{"type":"x","attributes":{"__proto__":{"polluted":1}},"__proto__":{"public":1}}}',
    },
    {
      name: "proto-in-meta",
      body: '{"data":{"type":"x","attributes":{"metadata":{"__proto__":{"polluted":1}},"labels":{"constructor":{"prototype":{"polluted":1}}}}}}',
    },
    { name: "deep-array-10k", body: deep },
    { name: "deep-object-10k", body: deepObj },
    { name: "nul-json-escape", body: '{"data":{"type":"x\\u0000","attributes":{"name":"a\\u0000b"}}}' },
    {
      name: "lone-surrogate-escape",
      body: '{"data":{"type":"x","attributes":{"name":"\\ud800"}},"q":"\\udc00"}',
    },
    {
      name: "huge-number",
      body: '{"data":{"type":"x","attributes":{"n":1e999999}},"limit":123456789012345678901234567890}',
    },
    { name: "truncated", body: '{"data":{"type":' },
    { name: "not-json", body: "\u0000\u0001\u0002garbage" },
    { name: "array-top", body: "[1,2,3]" },
    { name: "string-top", body: '"x"' },
  ];
}

/** Query strings that try to pollute prototypes through the bracket syntax. */
export const HOSTILE_QUERIES = [
  "filter[__proto__][optional]=1",
  "filter[__proto__][public]=1",
  "__proto__[optional]=1",
  "constructor[prototype][optional]=1",
  "filter[constructor][prototype][public]=1",
  "page[__proto__][x]=1",
  "filter[hostname]=%00",
  "filter[hostname]=a%ED%A0%80b",
  "page[size]=9223372036854775808",
  "page[size]=-1",
  "page[cursor]=eyJ0YW1wZXJlZCI6dHJ1ZX0",
  "page[after]=AAAAAAAAAAAAAAAA.BBBB",
  "sort=__proto__",
  "include=__proto__",
  "fields[__proto__]=x",
  "limit=1e308&offset=-5",
  "q=%00&search=%00",
  `filter[x]=${"[".repeat(200)}`,
];
