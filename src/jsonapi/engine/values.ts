/**
 * Attribute value handling shared by filters, cursors, writes and serialisation.
 */

import { InvalidRequestError } from "../../kernel/errors.ts";
import { isUuid } from "../../kernel/ids.ts";
import { parseUntrustedJson } from "../../kernel/json.ts";
import type { AttributeDecl, AttributeType } from "../define.ts";

// RFC 3339 date-time (as ajv-formats "date-time"), zone required.
export const DATETIME_RE =
  /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt ]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):?[0-5]\d)$/;

/** PostgreSQL type a parameter of this attribute type is cast to. */
export function pgTypeOf(t: AttributeType): string {
  switch (t) {
    case "integer":
      return "bigint";
    case "float":
      return "float8";
    case "boolean":
      return "boolean";
    case "datetime":
      return "timestamptz";
    case "uuid":
      return "uuid";
    case "object":
    case "array":
    case "any":
      return "jsonb";
    default:
      return "text";
  }
}

export function isJsonType(t: AttributeType): boolean {
  return t === "object" || t === "array" || t === "any";
}

/**
 * Parse a query-string value into the attribute's type. Throws InvalidRequestError naming
 * `parameter` when the value is badly typed.
 */
export function parseQueryValue(
  raw: unknown,
  attr: Pick<AttributeDecl, "type" | "values">,
  parameter: string,
): unknown {
  if (typeof raw !== "string") {
    throw new InvalidRequestError(`${parameter} must be a single value`, {
      source: { parameter },
      code: "invalid_filter",
    });
  }
  const bad = (what: string) =>
    new InvalidRequestError(`${parameter}: '${raw}' is not a valid ${what}`, {
      source: { parameter },
      code: "invalid_filter",
    });
  switch (attr.type) {
    case "string":
      return raw;
    case "integer": {
      if (!/^-?\d{1,16}$/.test(raw)) throw bad("integer");
      const n = Number(raw);
      if (!Number.isSafeInteger(n)) throw bad("integer");
      return n;
    }
    case "float": {
      if (!/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(raw)) throw bad("number");
      const n = Number(raw);
      if (!Number.isFinite(n)) throw bad("number");
      return n;
    }
    case "boolean":
      if (raw === "true") return true;
      if (raw === "false") return false;
      throw bad("boolean (true or false)");
    case "datetime":
      if (!DATETIME_RE.test(raw) || Number.isNaN(Date.parse(raw))) throw bad("date-time (RFC 3339)");
      return raw;
    case "uuid":
      if (!isUuid(raw)) throw bad("uuid");
      return raw.toLowerCase();
    case "enum":
      if (!attr.values?.includes(raw)) {
        throw new InvalidRequestError(
          `${parameter}: '${raw}' is not one of ${(attr.values ?? []).join(", ")}`,
          {
            source: { parameter },
            code: "invalid_filter",
          },
        );
      }
      return raw;
    case "object":
    case "array":
    case "any": {
      let v: unknown;
      try {
        v = parseUntrustedJson(raw);
      } catch {
        throw bad("JSON value");
      }
      if (attr.type === "object" && (typeof v !== "object" || v === null || Array.isArray(v)))
        throw bad("JSON object");
      if (attr.type === "array" && !Array.isArray(v)) throw bad("JSON array");
      return JSON.stringify(v);
    }
  }
}

/** Convert a database value to its JSON:API attribute value. */
export function toJsonValue(v: unknown, t: AttributeType): unknown {
  if (v === null || v === undefined) return null;
  switch (t) {
    case "datetime":
      return v instanceof Date ? v.toISOString() : String(v);
    case "float":
    case "integer":
      return typeof v === "number" ? v : Number(v);
    default:
      if (v instanceof Date) return v.toISOString();
      return v;
  }
}

/** Value to bind for a write of this attribute type. */
export function toDbValue(v: unknown, t: AttributeType): unknown {
  if (v === null || v === undefined) return null;
  if (isJsonType(t)) return JSON.stringify(v);
  if (v instanceof Date) return v.toISOString();
  return v;
}
