/**
 * JSON schemas derived from declarations: request documents (validated with ajv, draft-07
 * style `type: [t, "null"]`) and the OpenAPI 3.0 variants (`nullable: true`).
 */
import type { ArgumentDecl, AttributeDecl, ResourceDecl } from "../define.ts";

export type Dialect = "ajv" | "openapi";
export type Schema = Record<string, unknown>;

export function valueSchema(a: ArgumentDecl | AttributeDecl, dialect: Dialect, forWrite: boolean): Schema {
  let s: Schema;
  switch (a.type) {
    case "string":
      s = { type: "string" };
      if (forWrite && a.maxLength !== undefined) s.maxLength = a.maxLength;
      if (forWrite && a.pattern !== undefined) s.pattern = a.pattern;
      if (a.values && dialect === "openapi") s.description = `one of: ${a.values.join(", ")}`;
      break;
    case "integer":
      s = { type: "integer" };
      break;
    case "float":
      s = { type: "number" };
      break;
    case "boolean":
      s = { type: "boolean" };
      break;
    case "datetime":
      s = { type: "string", format: "date-time" };
      break;
    case "uuid":
      s = { type: "string", format: "uuid" };
      break;
    case "enum":
      s = { type: "string", enum: [...(a.values ?? [])] };
      break;
    case "object":
      s = { type: "object", additionalProperties: true };
      break;
    case "array": {
      const it = a.items ?? "string";
      const item: Schema =
        it === "uuid"
          ? { type: "string", format: "uuid" }
          : it === "float"
            ? { type: "number" }
            : it === "object"
              ? { type: "object", additionalProperties: true }
              : { type: it };
      s = { type: "array", items: item };
      break;
    }
    default:
      s = {};
  }
  if (forWrite && (a.type === "integer" || a.type === "float")) {
    if (a.minimum !== undefined) s.minimum = a.minimum;
    if (a.maximum !== undefined) s.maximum = a.maximum;
  }
  if (a.description && dialect === "openapi") s.description = a.description;
  const nullable = a.nullable ?? true;
  if (nullable && a.type !== "any") {
    if (dialect === "openapi") s.nullable = true;
    else {
      s.type = [s.type as string, "null"];
      if (s.enum) s.enum = [...(s.enum as unknown[]), null];
    }
  }
  return s;
}

export interface BodySpec {
  attributes: Record<string, ArgumentDecl | AttributeDecl>;
  required: string[];
  relationships: string[];
  /** "required" | "optional" | "forbidden" for data.id */
  id: "required" | "optional" | "forbidden";
  /** Arguments directly under data (generic actions). */
  style: "attributes" | "data";
}

/** The request document schema. */
export function bodySchema(res: ResourceDecl, spec: BodySpec, dialect: Dialect): Schema {
  const props: Record<string, Schema> = {};
  for (const [n, a] of Object.entries(spec.attributes)) props[n] = valueSchema(a, dialect, true);
  if (spec.style === "data") {
    const data: Schema = { type: "object", additionalProperties: false, properties: props };
    if (spec.required.length > 0) data.required = spec.required;
    return { type: "object", required: ["data"], properties: { data } };
  }
  const attributes: Schema = { type: "object", additionalProperties: false, properties: props };
  if (spec.required.length > 0) attributes.required = spec.required;
  const relProps: Record<string, Schema> = {};
  for (const r of spec.relationships) {
    const rel = res.relationships?.[r];
    const linkage: Schema = {
      type: "object",
      required: ["type", "id"],
      additionalProperties: false,
      properties: { type: { type: "string", enum: [rel?.type ?? r] }, id: { type: "string" } },
    };
    if (dialect === "openapi") linkage.nullable = true;
    else linkage.type = ["object", "null"];
    relProps[r] = {
      type: "object",
      required: ["data"],
      additionalProperties: false,
      properties: { data: linkage },
    };
  }
  const dataProps: Record<string, Schema> = {
    type: { type: "string", enum: [res.type] },
    attributes,
    relationships: { type: "object", additionalProperties: false, properties: relProps },
    meta: { type: "object" },
  };
  if (spec.id !== "forbidden") dataProps.id = { type: "string", minLength: 1 };
  const data: Schema = {
    type: "object",
    additionalProperties: false,
    required: ["type"],
    properties: dataProps,
  };
  if (spec.id === "required") data.required = ["type", "id"];
  if (spec.required.length > 0) (data.required as string[]).push("attributes");
  return { type: "object", required: ["data"], properties: { data, meta: { type: "object" } } };
}
