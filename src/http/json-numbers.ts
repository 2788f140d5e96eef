import type { FastifyInstance } from "fastify";
import { InvalidRequestError } from "../kernel/errors.ts";

/**
 * JSON.parse rounds integers beyond 2^53 silently (9007199254740993 → …992): data would change
 * without anyone being told. Node 20 has no source-text access in revivers, so integer literals
 * are checked on the raw text, in one linear pass (no regex over attacker text), before
 * parsing. Returns the first integer literal that is not a safe integer, or null.
 */
export function unsafeIntegerLiteral(text: string): string | null {
  // Fast path: no run of 16 digits, no unsafe integer.
  if (!/\d{16}/.test(text)) return null;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) {
      inString = true;
      continue;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      let integer = true;
      while (j < text.length) {
        const d = text.charCodeAt(j);
        if (d >= 0x30 && d <= 0x39) j++;
        else if (d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d) {
          integer = false;
          j++;
        } else break;
      }
      const literal = text.slice(i, j);
      if (integer && !Number.isSafeInteger(Number(literal))) return literal;
      i = j - 1;
    }
  }
  return null;
}

type Parser = ReturnType<FastifyInstance["getDefaultJsonParser"]>;

/** Fastify's JSON parser (prototype poisoning refused) that also refuses unsafe integers. */
export function strictJsonParser(app: FastifyInstance): Parser {
  const json = app.getDefaultJsonParser("error", "error");
  return (request, body, done) => {
    const literal = typeof body === "string" ? unsafeIntegerLiteral(body) : null;
    if (literal) {
      done(
        new InvalidRequestError(
          `the number ${literal.slice(0, 40)} cannot be represented exactly (integers must be within ±2^53-1); send it as a string if it is an identifier`,
          { code: "unsafe_integer" },
        ),
        undefined,
      );
      return;
    }
    json(request, body, done);
  };
}
