import { type Span, SrqlError } from "./errors.ts";

/**
 * SRQL tokenizer (reference §1.1). Input splits on whitespace at bracket depth 0 and outside
 * quotes (`"`, `'`, `` ` ``); `(`/`[` open, `)`/`]` close; a backslash escapes only inside
 * quotes. Each token keeps its exact text and span so errors can point at it.
 */
export interface RawToken {
  text: string;
  span: Span;
}

export const MAX_QUERY_LENGTH = 8192;
const QUOTES = new Set(['"', "'", "`"]);

export function tokenize(input: string): RawToken[] {
  if (input.length > MAX_QUERY_LENGTH) {
    throw new SrqlError(`query must be at most ${MAX_QUERY_LENGTH} characters`);
  }
  const tokens: RawToken[] = [];
  let start = -1;
  let depth = 0;
  let quote: string | null = null;
  let quoteStart = 0;
  const opens: number[] = [];
  for (let i = 0; i < input.length; i++) {
    const c = input[i] as string;
    if (quote !== null) {
      if (c === "\\") {
        i++;
        continue;
      }
      if (c === quote) quote = null;
      continue;
    }
    if (/\s/.test(c) && depth === 0) {
      if (start >= 0) {
        tokens.push({ text: input.slice(start, i), span: { start, end: i } });
        start = -1;
      }
      continue;
    }
    if (start < 0) start = i;
    if (QUOTES.has(c)) {
      quote = c;
      quoteStart = i;
    } else if (c === "(" || c === "[") {
      depth++;
      opens.push(i);
    } else if (c === ")" || c === "]") {
      if (depth === 0) {
        throw new SrqlError(`unexpected '${c}'`, c, { start: i, end: i + 1 });
      }
      depth--;
      opens.pop();
    }
  }
  if (quote !== null) {
    throw new SrqlError("unterminated quote", input.slice(quoteStart), {
      start: quoteStart,
      end: input.length,
    });
  }
  if (depth > 0) {
    const at = opens[opens.length - 1] ?? 0;
    throw new SrqlError(`unbalanced '${input[at]}'`, input.slice(at), { start: at, end: input.length });
  }
  if (start >= 0) tokens.push({ text: input.slice(start), span: { start, end: input.length } });
  return tokens;
}

/** Index of the first `ch` outside quotes and brackets, or -1. */
export function indexOutside(text: string, ch: string, from = 0): number {
  let quote: string | null = null;
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    const c = text[i] as string;
    if (quote !== null) {
      if (c === "\\") i++;
      else if (c === quote) quote = null;
      continue;
    }
    if (QUOTES.has(c)) quote = c;
    else if (c === "(" || c === "[") depth++;
    else if (c === ")" || c === "]") depth--;
    else if (depth === 0 && text.startsWith(ch, i)) return i;
  }
  return -1;
}

/** Strip one pair of surrounding quotes and resolve backslash escapes inside them. */
export function unquote(text: string): { value: string; quoted: boolean } {
  const first = text[0];
  if (text.length >= 2 && first !== undefined && QUOTES.has(first) && text[text.length - 1] === first) {
    let out = "";
    for (let i = 1; i < text.length - 1; i++) {
      const c = text[i] as string;
      if (c === "\\" && i + 1 < text.length - 1) {
        out += text[i + 1];
        i++;
      } else out += c;
    }
    return { value: out, quoted: true };
  }
  return { value: text, quoted: false };
}

/** Split a list body at depth-0 commas outside quotes; returns item text with its offset. */
export function splitList(body: string, offset: number): { text: string; start: number }[] {
  const items: { text: string; start: number }[] = [];
  let from = 0;
  for (;;) {
    const at = indexOutside(body, ",", from);
    const end = at < 0 ? body.length : at;
    const rawItem = body.slice(from, end);
    const lead = rawItem.length - rawItem.trimStart().length;
    items.push({ text: rawItem.trim(), start: offset + from + lead });
    if (at < 0) break;
    from = at + 1;
  }
  return items;
}
