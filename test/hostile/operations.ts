import type { RouteRecord } from "../../src/access/registry.ts";

/**
 * Operations to attack, derived from the published OpenAPI documents (parameters and body
 * schemas) and, for routes no document describes, from the live route table (path
 * parameters, and generic query/body members).
 */

export interface Slot {
  in: "path" | "query" | "header" | "body";
  name: string;
  /** For body slots: the JSON path of the member inside the baseline body. */
  path?: (string | number)[];
}

export interface Operation {
  method: string;
  /** Fastify-style template, e.g. /api/v2/devices/:id */
  template: string;
  route: RouteRecord;
  slots: Slot[];
  /** A plausible body to mutate (undefined: the operation takes none). */
  baseline?: unknown;
  contentType: string;
  /** Headers every request of this operation carries (e.g. MCP's Accept). */
  headers?: Record<string, string>;
}

type Schema = Record<string, unknown>;
type Doc = { paths?: Record<string, Record<string, Schema>>; components?: Record<string, unknown> };

const DUMMY_ID = "00000000-0000-4000-8000-000000000000";
const METHODS = ["get", "post", "put", "patch", "delete"];

function deref(doc: Doc, s: unknown, seen = 0): Schema {
  let cur = (s ?? {}) as Schema;
  while (typeof cur.$ref === "string" && seen < 20) {
    const parts = (cur.$ref as string).replace(/^#\//, "").split("/");
    let node: unknown = doc;
    for (const p of parts) node = (node as Record<string, unknown> | undefined)?.[p];
    cur = (node ?? {}) as Schema;
    seen++;
  }
  return cur;
}

/** A plausible value for a schema, and the list of leaf paths inside it. */
function sample(
  doc: Doc,
  s: unknown,
  depth: number,
  at: (string | number)[],
  leaves: (string | number)[][],
): unknown {
  const schema = deref(doc, s);
  const variants = (schema.oneOf ?? schema.anyOf ?? schema.allOf) as unknown[] | undefined;
  if (variants?.length) return sample(doc, variants[0], depth, at, leaves);
  if (Array.isArray(schema.enum) && schema.enum.length) {
    leaves.push(at);
    return schema.enum[0];
  }
  if (schema.const !== undefined) {
    leaves.push(at);
    return schema.const;
  }
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if ((type === "object" || schema.properties) && depth < 5) {
    const out: Record<string, unknown> = {};
    const props = (schema.properties ?? {}) as Record<string, unknown>;
    for (const [k, v] of Object.entries(props)) out[k] = sample(doc, v, depth + 1, [...at, k], leaves);
    if (Object.keys(props).length === 0) leaves.push(at);
    return out;
  }
  if (type === "array") {
    leaves.push(at);
    return [];
  }
  leaves.push(at);
  if (type === "integer" || type === "number") return 1;
  if (type === "boolean") return true;
  if (schema.format === "date-time") return new Date().toISOString();
  if (schema.format === "uuid") return DUMMY_ID;
  return "x";
}

function toTemplate(openApiPath: string): string {
  return openApiPath.replace(/\{([^}]+)\}/g, ":$1");
}

function sameShape(a: string, b: string): boolean {
  const norm = (t: string) => t.replace(/:[A-Za-z0-9_]+(\([^)]*\))?/g, ":p").replace(/\{[^}]+\}/g, ":p");
  return norm(a) === norm(b);
}

export function operationsFrom(docs: Doc[], routes: readonly RouteRecord[]): Operation[] {
  const ops: Operation[] = [];
  const covered = new Set<string>();
  for (const doc of docs) {
    for (const [p, item] of Object.entries(doc.paths ?? {})) {
      for (const method of METHODS) {
        const op = item[method] as Schema | undefined;
        if (!op) continue;
        const template = toTemplate(p);
        const route = routes.find((r) => r.method === method.toUpperCase() && sameShape(r.url, template));
        if (!route) continue;
        covered.add(`${route.method} ${route.url}`);
        const slots: Slot[] = [];
        const params = [
          ...((item.parameters as unknown as unknown[]) ?? []),
          ...((op.parameters as unknown[]) ?? []),
        ];
        for (const raw of params) {
          const prm = deref(doc, raw);
          const where = prm.in as Slot["in"];
          if (where === "path" || where === "query" || where === "header")
            slots.push({ in: where, name: String(prm.name) });
        }
        let baseline: unknown;
        let contentType = "application/json";
        const body = deref(doc, op.requestBody);
        const content = body.content as Record<string, { schema?: unknown }> | undefined;
        if (content) {
          const [ct, media] = Object.entries(content)[0] ?? [];
          if (ct) {
            contentType = ct;
            const leaves: (string | number)[][] = [];
            baseline = sample(doc, media?.schema, 0, [], leaves);
            for (const leaf of leaves) slots.push({ in: "body", name: leaf.join("."), path: leaf });
          }
        }
        ops.push({ method: method.toUpperCase(), template: route.url, route, slots, baseline, contentType });
      }
    }
  }
  // Routes no document describes: their path parameters, generic query members and a body.
  for (const route of routes) {
    if (route.method === "HEAD" || route.method === "OPTIONS") continue;
    if (covered.has(`${route.method} ${route.url}`)) continue;
    const slots: Slot[] = [];
    for (const m of route.url.matchAll(/:([A-Za-z0-9_]+)/g)) slots.push({ in: "path", name: m[1] as string });
    for (const q of ["limit", "q", "cursor"]) slots.push({ in: "query", name: q });
    const hasBody = !["GET", "DELETE"].includes(route.method);
    let baseline: unknown;
    if (route.url === "/mcp" && route.method === "POST") {
      // MCP: a real tool call, so hostile values reach the tool arguments, not just the transport.
      baseline = {
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "device_lookup", arguments: { search: "x" } },
      };
      for (const p of [["method"], ["id"], ["params", "name"], ["params", "arguments", "search"]]) {
        slots.push({ in: "body", name: p.join("."), path: p });
      }
      ops.push({
        method: route.method,
        template: route.url,
        route,
        slots,
        baseline,
        contentType: "application/json",
        headers: { accept: "application/json, text/event-stream" },
      });
      continue;
    }
    if (hasBody) {
      baseline = { name: "x", query: "in:devices", email: "a@b.c", password: "x", target: "x", limit: 1 };
      for (const k of Object.keys(baseline as object)) slots.push({ in: "body", name: k, path: [k] });
    }
    ops.push({
      method: route.method,
      template: route.url,
      route,
      slots,
      baseline,
      contentType: "application/json",
    });
  }
  return ops;
}

/** encodeURIComponent, except lone surrogates become their (invalid) WTF-8 bytes. */
export function enc(text: string): string {
  return text.replace(/[\ud800-\udfff]|[^\ud800-\udfff]+/g, (part) => {
    const c = part.charCodeAt(0);
    if (part.length === 1 && c >= 0xd800 && c <= 0xdfff) {
      return [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join("");
    }
    return encodeURIComponent(part);
  });
}

/** Fill a Fastify template's parameters; `override` replaces one by name. */
export function fillPath(template: string, override?: { name: string; value: string }): string {
  return template
    .split("/")
    .map((seg) => {
      if (seg === "*") return override?.name === "*" ? enc(override.value) : "x";
      if (!seg.includes(":")) return seg;
      return seg.replace(/:([A-Za-z0-9_]+)(\([^)]*\))?/g, (_m, name: string, re: string | undefined) => {
        if (override && override.name === name) return enc(override.value);
        return re ? "1" : DUMMY_ID;
      });
    })
    .join("/");
}

/** A deep copy of `base` with the member at `path` set to `value`. */
export function setAt(base: unknown, path: (string | number)[], value: unknown): unknown {
  if (path.length === 0) return value;
  const copy = structuredClone(base) as Record<string | number, unknown>;
  let node = copy;
  for (let i = 0; i < path.length - 1; i++) {
    const k = path[i] as string | number;
    if (typeof node[k] !== "object" || node[k] === null) node[k] = {};
    node = node[k] as Record<string | number, unknown>;
  }
  node[path[path.length - 1] as string | number] = value;
  return copy;
}
