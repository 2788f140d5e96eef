import type { FastifyInstance } from "fastify";
import { InvalidRequestError } from "../kernel/errors.ts";

/**
 * One check at the edge for text PostgreSQL cannot store and structures nothing needs
 * (issue 10, docs/decisions/0004-hostile-input.md): every string in the query, the path
 * parameters and the parsed body is refused with 400 naming the member when it holds NUL
 * (U+0000) or a lone UTF-16 surrogate, and bodies nested deeper than MAX_DEPTH are refused.
 * Refused rather than stripped: silently changing an identifier or a secret is worse than
 * telling the client.
 */
export const MAX_DEPTH = 64;

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is exactly what is searched for
const BAD_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function describe(text: string): string {
  return text.includes("\u0000") ? "a NUL (U+0000) character" : "an unpaired UTF-16 surrogate";
}

function escapePointer(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

type Where = { parameter: string } | { pointer: string };

function refuse(where: Where, text: string): never {
  const name =
    "parameter" in where ? `query parameter '${where.parameter}'` : `member ${where.pointer || "/"}`;
  throw new InvalidRequestError(`${name} contains ${describe(text)}, which is not accepted`, {
    code: "invalid_character",
    source: where,
  });
}

/** Walk a parsed JSON value iteratively (a 10k-deep body must not overflow our stack). */
export function checkBody(body: unknown): void {
  const stack: { value: unknown; pointer: string; depth: number }[] = [
    { value: body, pointer: "", depth: 0 },
  ];
  while (stack.length > 0) {
    const { value, pointer, depth } = stack.pop() as { value: unknown; pointer: string; depth: number };
    if (typeof value === "string") {
      if (BAD_TEXT.test(value)) refuse({ pointer }, value);
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (depth >= MAX_DEPTH) {
      throw new InvalidRequestError(
        `the body is nested deeper than ${MAX_DEPTH} levels at ${pointer || "/"}`,
        {
          code: "too_deep",
          source: { pointer },
        },
      );
    }
    for (const [k, v] of Object.entries(value)) {
      const child = `${pointer}/${escapePointer(k)}`;
      if (BAD_TEXT.test(k)) refuse({ pointer: child }, k);
      stack.push({ value: v, pointer: child, depth: depth + 1 });
    }
  }
}

function checkFlat(values: unknown, kind: "query" | "path"): void {
  if (values === null || typeof values !== "object") return;
  for (const [k, v] of Object.entries(values)) {
    for (const text of [k, ...(Array.isArray(v) ? v : [v])]) {
      if (typeof text === "string" && BAD_TEXT.test(text)) {
        refuse(kind === "query" ? { parameter: k } : { pointer: `/path/${k}` }, text);
      }
    }
  }
}

export function guardInput(app: FastifyInstance): void {
  // onRequest sees the query and path parameters before any handler or auth lookup.
  app.addHook("onRequest", async (request) => {
    checkFlat(request.query, "query");
    checkFlat(request.params, "path");
  });
  app.addHook("preValidation", async (request) => {
    if (request.body !== undefined) checkBody(request.body);
  });
}
