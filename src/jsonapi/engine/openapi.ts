/**
 * The OpenAPI 3.0.0 document of the v2 surface, generated from the route specs (and so from
 * the declarations): every operation with its parameters (per-resource filter schemas as in
 * spec 2.5), request and response schemas, tags.
 */

import { ruleKind, rulePermission } from "../../access/rule.ts";
import { SESSION_COOKIE } from "../../access/sessions.ts";
import { VERSION } from "../../kernel/version.ts";
import { isFilterable, isSortable, type ResourceDecl } from "../define.ts";
import { getResource } from "../registry.ts";
import {
  COMMON_OPERATORS,
  idAttribute,
  operatorsFor,
  resolvedPagination,
  STRING_OPERATORS,
} from "./query.ts";
import { PREFIX, type RouteSpec } from "./routes.ts";
import { bodySchema, type Schema, valueSchema } from "./schemas.ts";

const MEDIA = "application/vnd.api+json";

export interface ExtraPath {
  method: "get" | "post";
  path: string;
  tag: string;
  operationId: string;
  summary: string;
  description?: string;
  status: number;
  public?: boolean;
  /** Response media type (default application/vnd.api+json). */
  mediaType?: string;
  /** Success body is a single-resource document of this resource type. */
  documentOf?: string;
}

function ref(name: string): Schema {
  return { $ref: `#/components/schemas/${name}` };
}

function filterSchemas(res: ResourceDecl, schemas: Record<string, Schema>): void {
  const name = `${res.type}-filter`;
  if (schemas[name]) return;
  const props: Record<string, Schema> = {
    and: { type: "array", uniqueItems: true, items: ref(name) },
    or: { type: "array", uniqueItems: true, items: ref(name) },
    not: ref(name),
  };
  const attrs = { ...res.attributes };
  const idA = idAttribute(res);
  if (idA && !attrs.id) attrs.id = idA;
  for (const [attr, a] of Object.entries(attrs)) {
    if (!isFilterable(a) || a.stored === false || a.public === false) continue;
    const opName = `${res.type}-filter-${attr}`;
    const ops: Record<string, Schema> = {};
    const scalar = { ...valueSchema({ ...a, nullable: false }, "openapi", false) };
    delete scalar.description;
    for (const op of operatorsFor(a)) {
      if (op === "in") {
        const item = { ...scalar };
        if (a.type === "enum") {
          delete item.enum;
          item.type = "string";
        }
        ops.in = { type: "array", items: item };
      } else if (op === "is_nil") ops.is_nil = { type: "boolean" };
      else if (op === "is_distinct_from" || op === "is_not_distinct_from") ops[op] = { type: "string" };
      else if ((STRING_OPERATORS as readonly string[]).includes(op)) ops[op] = { type: "string" };
      else if ((COMMON_OPERATORS as readonly string[]).includes(op)) ops[op] = scalar;
    }
    schemas[opName] = { type: "object", additionalProperties: false, properties: ops };
    // A bare value means equality, so clients whose deepObject serialiser goes one level deep
    // (openapi-fetch's default) can filter without a custom serialiser.
    props[attr] = ops.eq ? { anyOf: [scalar, ref(opName)] } : ref(opName);
  }
  for (const [relName, rel] of Object.entries(res.relationships ?? {})) {
    const target = getResource(rel.type);
    if (!target) continue;
    props[relName] = ref(`${target.type}-filter`);
  }
  schemas[name] = {
    type: "object",
    additionalProperties: false,
    properties: props,
    description: `Filter for ${res.type} (spec 2.5)`,
  };
  for (const rel of Object.values(res.relationships ?? {})) {
    const target = getResource(rel.type);
    if (target) filterSchemas(target, schemas);
  }
}

function resourceSchema(res: ResourceDecl): Schema {
  const attrs: Record<string, Schema> = {};
  for (const [n, a] of Object.entries(res.attributes)) {
    if (a.public === false) continue;
    const s = valueSchema(a.stored === false ? { ...a, nullable: true } : a, "openapi", false);
    if (a.computed) s.readOnly = true;
    attrs[n] = s;
  }
  const rels: Record<string, Schema> = {};
  for (const [n, r] of Object.entries(res.relationships ?? {})) {
    const linkage: Schema = {
      type: "object",
      required: ["type", "id"],
      properties: { type: { type: "string", enum: [r.type] }, id: { type: "string" } },
    };
    rels[n] = {
      type: "object",
      properties: {
        data: r.kind === "hasMany" ? { type: "array", items: linkage } : { ...linkage, nullable: true },
        meta: { type: "object" },
      },
    };
  }
  return {
    type: "object",
    required: ["type", "id"],
    description: res.description ?? `${res.type} resource object`,
    properties: {
      type: { type: "string", enum: [res.type] },
      id: {
        type: "string",
        description: typeof res.id.column === "string" ? undefined : "opaque composite id",
      },
      attributes: { type: "object", additionalProperties: false, properties: attrs },
      relationships: { type: "object", additionalProperties: false, properties: rels },
      links: { type: "object", properties: { self: { type: "string" } } },
      meta: { type: "object" },
    },
  };
}

function oaPath(p: string): string {
  return p.replace(/:([a-z_]+)/g, "{$1}");
}

function pathParams(p: string, spec: RouteSpec): Schema[] {
  const out: Schema[] = [];
  for (const m of p.matchAll(/:([a-z_]+)/g)) {
    const name = m[1] as string;
    const t = spec.collection?.params?.[name];
    const schema: Schema =
      t === "uuid"
        ? { type: "string", format: "uuid" }
        : t === "integer"
          ? { type: "integer" }
          : { type: "string" };
    out.push({ name, in: "path", required: true, schema });
  }
  return out;
}

export function buildOpenApi(
  specs: readonly RouteSpec[],
  extra: readonly ExtraPath[] = [],
): Record<string, unknown> {
  const schemas: Record<string, Schema> = {
    "jsonapi-error": {
      type: "object",
      properties: {
        id: { type: "string" },
        status: { type: "string" },
        code: { type: "string" },
        title: { type: "string" },
        detail: { type: "string" },
        source: {
          type: "object",
          properties: {
            pointer: { type: "string" },
            parameter: { type: "string" },
            header: { type: "string" },
          },
        },
        meta: { type: "object" },
      },
    },
    errors: {
      type: "object",
      required: ["errors"],
      properties: { errors: { type: "array", items: ref("jsonapi-error") }, jsonapi: { type: "object" } },
    },
    links: {
      type: "object",
      properties: {
        self: { type: "string" },
        first: { type: "string", nullable: true },
        next: { type: "string", nullable: true },
        prev: { type: "string", nullable: true },
      },
    },
  };
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Map<string, string>();
  for (const spec of specs) {
    const { res } = spec;
    const tag = res.tag ?? res.type;
    tags.set(tag, res.description ?? `${res.type} resources`);
    if (!schemas[res.type]) schemas[res.type] = resourceSchema(res);
    for (const [name, schema] of Object.entries(res.schemas ?? {})) schemas[name] ??= schema;
    filterSchemas(res, schemas);
    const params: Schema[] = pathParams(spec.path, spec);
    const isList = spec.kind === "index" || spec.kind === "collection";
    if (isList) {
      params.push({
        name: "filter",
        in: "query",
        required: false,
        style: "deepObject",
        explode: true,
        description:
          "Filter object (spec 2.5): and/or/not and one key per filterable attribute with an operator object",
        schema: ref(`${res.type}-filter`),
      });
      const sortable = Object.entries(res.attributes)
        .filter(([, a]) => isSortable(a) && a.stored !== false && a.public !== false)
        .map(([n]) => n);
      params.push({
        name: "sort",
        in: "query",
        required: false,
        description: `Comma-separated fields, '-' prefix for descending. Sortable: id, ${sortable.join(", ")}`,
        schema: { type: "string" },
      });
      if (spec.paginated) {
        const pg = resolvedPagination(spec.collection?.paginate || res.pagination, res.readOnly === true);
        const pageProps: Record<string, Schema> = {
          limit: { type: "integer", minimum: 1, maximum: pg.maxLimit, default: pg.defaultLimit },
          count: { type: "boolean" },
        };
        if (pg.styles.includes("offset")) pageProps.offset = { type: "integer", minimum: 0 };
        if (pg.styles.includes("keyset")) {
          pageProps.after = { type: "string", description: "opaque keyset cursor" };
          pageProps.before = { type: "string", description: "opaque keyset cursor" };
        }
        params.push({
          name: "page",
          in: "query",
          required: false,
          style: "deepObject",
          explode: true,
          description: `Pagination (${pg.styles.join(", ")}); default ${pg.defaultLimit}, maximum page size ${pg.maxLimit}${pg.required ? "; always applied" : ""}`,
          schema: { type: "object", additionalProperties: false, properties: pageProps },
        });
      }
      for (const [n, d] of Object.entries(res.listParams ?? {})) {
        params.push({
          name: n,
          in: "query",
          required: d.required ?? false,
          description: d.description,
          schema: { type: d.type === "uuid" ? "string" : d.type },
        });
      }
    }
    if (spec.kind === "read") {
      if (res.readLookup) {
        params.push({ name: res.readLookup.query, in: "query", required: true, schema: { type: "string" } });
      }
      for (const [n, d] of Object.entries(res.readParams ?? {})) {
        params.push({
          name: n,
          in: "query",
          required: d.required ?? false,
          description: d.description,
          schema: { type: d.type === "uuid" ? "string" : d.type },
        });
      }
    }
    if (isList || spec.kind === "read") {
      params.push({
        name: "include",
        in: "query",
        required: false,
        description: `Relationship paths to include: ${Object.keys(res.relationships ?? {}).join(", ") || "(none)"}`,
        schema: { type: "string" },
      });
      params.push({
        name: "fields",
        in: "query",
        required: false,
        style: "deepObject",
        explode: true,
        description: "Sparse fieldsets: fields[type]=a,b",
        schema: { type: "object", additionalProperties: { type: "string" } },
      });
    }
    const rawResponse =
      spec.op?.bodyStyle === "data" ||
      (spec.op?.handler && !spec.op.transition && spec.op.target === "collection");
    const dataSchema: Schema =
      isList && !spec.collection?.single ? { type: "array", items: ref(res.type) } : ref(res.type);
    const success: Schema = rawResponse
      ? { type: "object", additionalProperties: true }
      : {
          type: "object",
          properties: {
            data: dataSchema,
            included: { type: "array", items: { type: "object" } },
            meta: { type: "object" },
            links: ref("links"),
            jsonapi: { type: "object" },
          },
        };
    const status =
      spec.kind === "create"
        ? (res.actions?.create?.status ?? 201)
        : spec.kind === "delete"
          ? 204
          : (spec.op?.status ?? 200);
    const responses: Record<string, unknown> = {
      [String(status)]:
        status === 204
          ? { description: "Deleted" }
          : { description: "Success", content: { [MEDIA]: { schema: success } } },
      default: { $ref: "#/components/responses/errors" },
    };
    if (spec.kind === "create" && res.actions?.create?.onExisting) {
      responses["200"] = {
        description: "Already registered: the existing record, re-registered (see the operation description)",
        content: { [MEDIA]: { schema: success } },
      };
    }
    const operation: Record<string, unknown> = {
      tags: [tag],
      operationId: spec.operationId,
      summary: spec.summary,
      description: accessText(spec),
      parameters: params,
      responses,
    };
    if (ruleKind(spec.access) === "public") operation.security = [];
    if (spec.body) {
      operation.requestBody = {
        required: !spec.bodyOptional,
        content: { [MEDIA]: { schema: bodySchema(res, spec.body, "openapi") } },
      };
    }
    const p = oaPath(`${PREFIX}${spec.path}`);
    paths[p] ??= {};
    (paths[p] as Record<string, unknown>)[spec.method.toLowerCase()] = operation;
  }
  for (const e of extra) {
    tags.set(e.tag, e.tag);
    const p = oaPath(`${PREFIX}${e.path}`);
    paths[p] ??= {};
    const op: Record<string, unknown> = {
      tags: [e.tag],
      operationId: e.operationId,
      summary: e.summary,
      description: e.description,
      responses: {
        [String(e.status)]: {
          description: e.summary,
          content: {
            [e.mediaType ?? MEDIA]: {
              schema:
                e.status >= 400
                  ? ref("errors")
                  : e.documentOf
                    ? {
                        type: "object",
                        properties: {
                          data: ref(e.documentOf),
                          meta: { type: "object" },
                          links: ref("links"),
                        },
                      }
                    : { type: "object" },
            },
          },
        },
        default: { $ref: "#/components/responses/errors" },
      },
    };
    if (e.public) op.security = [];
    (paths[p] as Record<string, unknown>)[e.method] = op;
  }
  return {
    openapi: "3.0.0",
    info: {
      title: "API version 2",
      version: VERSION,
      description:
        "JSON:API 1.1 surface (media type application/vnd.api+json). Generated from the resource declarations.",
    },
    servers: [{ url: "/" }],
    tags: [...tags]
      .sort((a, b) => a[0].localeCompare(b[0]))
      .map(([name, description]) => ({ name, description })),
    paths,
    security: [{ bearerAuth: [] }, { cookieAuth: [] }],
    components: {
      schemas,
      responses: {
        errors: { description: "General Error", content: { [MEDIA]: { schema: ref("errors") } } },
      },
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
        cookieAuth: { type: "apiKey", in: "cookie", name: SESSION_COOKIE },
      },
    },
  };
}

function accessText(spec: RouteSpec): string {
  const a = spec.access;
  const permission = rulePermission(a);
  switch (ruleKind(a)) {
    case "public":
      return "Access: public.";
    case "optional":
      return `Access: optional credentials; without ${permission ?? "credentials"} lists are empty and reads 404.`;
    case "permission":
      return `Access: permission ${permission}.`;
    case "role":
      return `Access: role ${(a as { role: string }).role} or higher.`;
    case "controlPlane":
      return "Access: control-plane principals.";
    default:
      return "Access: any authenticated principal.";
  }
}
