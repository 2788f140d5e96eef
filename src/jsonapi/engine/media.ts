/**
 * JSON:API 1.1 media type negotiation:
 * - a request with a body must send `Content-Type: application/vnd.api+json`; any other type,
 *   a media type parameter other than `ext`/`profile`, or an `ext` (no extensions are
 *   supported) → 415;
 * - an `Accept` header that contains the JSON:API media type only in parameterised forms
 *   (parameters other than `profile`, or an unsupported `ext`) → 406.
 */
import { NotAcceptableError, UnsupportedMediaTypeError } from "../../kernel/errors.ts";

export const JSONAPI = "application/vnd.api+json";

interface MediaType {
  type: string;
  params: Map<string, string>;
}

function parseOne(text: string): MediaType | null {
  const parts = text.split(";");
  const type = (parts.shift() ?? "").trim().toLowerCase();
  if (!type) return null;
  const params = new Map<string, string>();
  for (const p of parts) {
    const eq = p.indexOf("=");
    if (eq < 0) {
      if (p.trim()) params.set(p.trim().toLowerCase(), "");
      continue;
    }
    params.set(
      p.slice(0, eq).trim().toLowerCase(),
      p
        .slice(eq + 1)
        .trim()
        .replace(/^"|"$/g, ""),
    );
  }
  return { type, params };
}

/** Split an Accept header at top-level commas (quoted strings may contain commas). */
function splitList(header: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  for (const ch of header) {
    if (ch === '"') quoted = !quoted;
    if (ch === "," && !quoted) {
      out.push(cur);
      cur = "";
    } else cur += ch;
  }
  out.push(cur);
  return out.map((s) => s.trim()).filter(Boolean);
}

export function checkContentType(header: string | undefined, hasBody: boolean): void {
  if (!hasBody) return;
  const mt = header ? parseOne(header) : null;
  if (!mt || mt.type !== JSONAPI) {
    throw new UnsupportedMediaTypeError(`request bodies must use Content-Type ${JSONAPI}`, {
      source: { header: "Content-Type" },
    });
  }
  for (const [k] of mt.params) {
    if (k === "profile") continue;
    if (k === "ext") {
      throw new UnsupportedMediaTypeError("no JSON:API extensions are supported (ext parameter)", {
        source: { header: "Content-Type" },
      });
    }
    throw new UnsupportedMediaTypeError(`media type parameter '${k}' is not allowed on ${JSONAPI}`, {
      source: { header: "Content-Type" },
    });
  }
}

export function checkAccept(header: string | undefined): void {
  if (!header) return;
  const instances = splitList(header)
    .map(parseOne)
    .filter((m): m is MediaType => m !== null && m.type === JSONAPI);
  if (instances.length === 0) return;
  const acceptable = instances.some((m) => {
    for (const [k] of m.params) {
      if (k === "q") break; // accept-params follow the media type parameters
      if (k !== "profile") return false;
    }
    return true;
  });
  if (!acceptable) {
    throw new NotAcceptableError(`Accept allows ${JSONAPI} only with unsupported media type parameters`, {
      source: { header: "Accept" },
    });
  }
}
