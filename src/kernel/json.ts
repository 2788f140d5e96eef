import sjson from "secure-json-parse";

/**
 * JSON from outside (request bodies, uploaded lines, JSON-valued query parameters): refuses
 * `__proto__` and `constructor.prototype` keys instead of carrying them into objects that
 * later code may merge (issue 10). Throws SyntaxError on either problem; callers map it to
 * their 400.
 */
export function parseUntrustedJson(text: string): unknown {
  return sjson.parse(text, undefined, { protoAction: "error", constructorAction: "error" });
}

/** Names that must never become keys of an object built from request data. */
export const RESERVED_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);
