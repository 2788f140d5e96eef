import RE2 from "re2";
import { ValidationError } from "./errors.ts";

/**
 * Regular expressions written by users (http check body_match, notification `matches`) run on
 * RE2, a linear-time engine: no pattern can stall the event loop, however hostile (issue 10:
 * `^(a+)+$` against 30 bytes froze every request for seconds under V8's backtracking engine).
 * RE2 has no backreferences or lookaround; such patterns are refused when saved.
 */
export const MAX_PATTERN_LENGTH = 1024;

const cache = new Map<string, RE2>();
const CACHE_SIZE = 500;

/** Compile, or throw ValidationError pointing at `pointer` with RE2's reason. */
export function compileUserPattern(pattern: unknown, pointer: string): RE2 {
  if (typeof pattern !== "string") {
    throw new ValidationError("must be a regular expression string", { source: { pointer } });
  }
  if (pattern.length > MAX_PATTERN_LENGTH) {
    throw new ValidationError(`regular expression is longer than ${MAX_PATTERN_LENGTH} characters`, {
      source: { pointer },
    });
  }
  const hit = cache.get(pattern);
  if (hit) return hit;
  let re: RE2;
  try {
    re = new RE2(pattern, "u");
  } catch (err) {
    throw new ValidationError(
      `invalid regular expression (RE2 syntax: no backreferences or lookaround): ${(err as Error).message}`,
      { code: "invalid_pattern", source: { pointer } },
    );
  }
  if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value as string);
  cache.set(pattern, re);
  return re;
}

/** Test a stored pattern; a pattern that no longer compiles matches nothing. */
export function matchesUserPattern(pattern: string, text: string): boolean {
  try {
    return compileUserPattern(pattern, "").test(text);
  } catch {
    return false;
  }
}
