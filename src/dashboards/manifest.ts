import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { parseUntrustedJson } from "../kernel/json.ts";

/**
 * The closed dashboard manifest (spec 2.10, 4.7; the original's manifest.ex): unknown keys are
 * refused at every level, so a manifest means exactly what the host implements.
 */
export const MANIFEST_MAX_BYTES = 262_144;
export const INTERFACE_VERSION = "dashboard-browser-module-v1";

export const CAPABILITIES = [
  "srql.execute",
  "saved_queries.read",
  "dashboard.preferences.read",
  "dashboard.preferences.write",
  "navigation.open",
  "popup.open",
  "details.open",
  "map.basemap.read",
  "map.deck.render",
] as const;

/** `json` and `json_rows` are the same encoding (rows as JSON objects); `arrow_ipc` is an Arrow IPC stream. */
export const FRAME_ENCODINGS = ["json", "json_rows", "arrow_ipc"] as const;
export type FrameEncoding = (typeof FRAME_ENCODINGS)[number];

export interface DataFrameDecl {
  id: string;
  query: string;
  encoding: FrameEncoding;
  required?: boolean;
  limit?: number;
}

export interface Manifest {
  schema_version?: number;
  id: string;
  name: string;
  version: string;
  description?: string;
  vendor?: string;
  renderer: {
    kind: "browser_module";
    interface_version: typeof INTERFACE_VERSION;
    artifact: string;
    sha256: string;
    trust: "trusted";
    entrypoint: string;
    exports?: string[];
  };
  data_frames: DataFrameDecl[];
  capabilities: string[];
  settings_schema?: Record<string, unknown>;
  source?: Record<string, unknown>;
}

// Linear-time patterns only (every one is anchored and free of nested quantifiers).
const SEMVER = "^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\\+[0-9A-Za-z.-]+)?$";

const SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["id", "name", "version", "renderer", "data_frames", "capabilities"],
  properties: {
    schema_version: { type: "integer", minimum: 1, maximum: 1 },
    id: { type: "string", pattern: "^[a-z0-9][a-z0-9._-]{1,127}$" },
    name: { type: "string", minLength: 1, maxLength: 200 },
    version: { type: "string", maxLength: 64, pattern: SEMVER },
    description: { type: "string", maxLength: 4000 },
    vendor: { type: "string", maxLength: 200 },
    renderer: {
      type: "object",
      additionalProperties: false,
      required: ["kind", "interface_version", "artifact", "sha256", "trust", "entrypoint"],
      properties: {
        kind: { const: "browser_module" },
        interface_version: { const: INTERFACE_VERSION },
        artifact: { type: "string", minLength: 1, maxLength: 200 },
        sha256: { type: "string", pattern: "^[0-9a-f]{64}$" },
        trust: { const: "trusted" },
        entrypoint: { type: "string", pattern: "^[A-Za-z_$][A-Za-z0-9_$]{0,127}$" },
        exports: {
          type: "array",
          maxItems: 64,
          items: { type: "string", pattern: "^[A-Za-z_$][A-Za-z0-9_$]{0,127}$" },
        },
      },
    },
    data_frames: {
      type: "array",
      minItems: 1,
      maxItems: 32,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["id", "query", "encoding"],
        properties: {
          id: { type: "string", pattern: "^[a-z0-9][a-z0-9_-]{0,63}$" },
          query: { type: "string", minLength: 1, maxLength: 4000 },
          encoding: { enum: [...FRAME_ENCODINGS] },
          required: { type: "boolean" },
          limit: { type: "integer", minimum: 1, maximum: 1000 },
        },
      },
    },
    capabilities: {
      type: "array",
      minItems: 1,
      uniqueItems: true,
      items: { enum: [...CAPABILITIES] },
    },
    settings_schema: { type: "object", maxProperties: 200 },
    source: { type: "object", maxProperties: 50 },
  },
} as const;

/** Compiled on the first manifest checked, not at start-up (docs/decisions/0112). */
let compiled: ValidateFunction | undefined;
function validator(): ValidateFunction {
  compiled ??= new Ajv({ allErrors: true, strict: false, coerceTypes: false, useDefaults: false }).compile(
    SCHEMA,
  );
  return compiled;
}

function describe(e: ErrorObject): string {
  const at = e.instancePath === "" ? "manifest" : `manifest${e.instancePath.replace(/\//g, ".")}`;
  switch (e.keyword) {
    case "additionalProperties":
      return `${at} contains unsupported key: ${(e.params as { additionalProperty: string }).additionalProperty}`;
    case "required":
      return `missing required field: ${at}.${(e.params as { missingProperty: string }).missingProperty}`;
    case "enum":
      return `${at} must be one of: ${(e.params as { allowedValues: unknown[] }).allowedValues.join(", ")}`;
    case "const":
      return `${at} must be ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)}`;
    case "pattern":
      return e.instancePath === "/version" ? `${at} must be a valid semver string` : `${at} ${e.message}`;
    default:
      return `${at} ${e.message ?? "is invalid"}`;
  }
}

export type ManifestCheck = { ok: true; manifest: Manifest } | { ok: false; errors: string[] };

/** Parse and validate manifest bytes; every problem is listed (answered as `invalid_manifest`). */
export function checkManifest(bytes: Buffer): ManifestCheck {
  if (bytes.length > MANIFEST_MAX_BYTES) return { ok: false, errors: ["manifest json exceeds maximum size"] };
  let value: unknown;
  try {
    value = parseUntrustedJson(bytes.toString("utf8"));
  } catch (err) {
    return { ok: false, errors: [`invalid json: ${(err as Error).message}`] };
  }
  return checkManifestValue(value);
}

export function checkManifestValue(value: unknown): ManifestCheck {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { ok: false, errors: ["manifest json must decode to an object"] };
  }
  const errors: string[] = [];
  const validate = validator();
  if (!validate(value)) errors.push(...(validate.errors ?? []).map(describe));
  const frames = (value as { data_frames?: unknown }).data_frames;
  if (Array.isArray(frames)) {
    const seen = new Set<string>();
    const dup = new Set<string>();
    for (const f of frames) {
      const id = (f as { id?: unknown } | null)?.id;
      if (typeof id !== "string") continue;
      if (seen.has(id)) dup.add(id);
      seen.add(id);
    }
    if (dup.size > 0) errors.push(`data_frames contain duplicate ids: ${[...dup].join(", ")}`);
  }
  if (errors.length > 0) return { ok: false, errors: [...new Set(errors)] };
  return { ok: true, manifest: value as Manifest };
}

/**
 * Canonical JSON: object keys sorted by code unit, no whitespace, arrays in order. Signatures
 * are over this form so a re-serialised manifest (other key order, spacing) still verifies.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(",")}}`;
}
