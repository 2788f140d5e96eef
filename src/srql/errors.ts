import { InvalidRequestError } from "../kernel/errors.ts";

/** Where a token sits in the query text (0-based character offsets, end exclusive). */
export interface Span {
  start: number;
  end: number;
}

/**
 * Every SRQL parse or planning error: a 400 whose message names the offending token and its
 * position (1-based column, as humans count). `extra` carries the same facts for clients.
 */
export class SrqlError extends InvalidRequestError {
  readonly span: Span | null;
  readonly token: string | null;

  constructor(message: string, token: string | null = null, span: Span | null = null) {
    const where = span && token !== null ? ` (token '${token}' at position ${span.start + 1})` : "";
    super(`${message}${where}`, {
      code: "invalid_query",
      extra: span && token !== null ? { token, position: span.start + 1 } : {},
    });
    this.span = span;
    this.token = token;
  }
}
