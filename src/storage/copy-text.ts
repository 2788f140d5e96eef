/**
 * PostgreSQL's COPY text format (one line per row, tab-separated, `\N` for NULL), used for bulk
 * writes on both backends. Values are mapped the way node-postgres maps query parameters, so a
 * row written by COPY reads back exactly as the same row written by INSERT:
 * null/undefined → NULL, Date → ISO 8601, boolean → t/f, number/bigint → decimal text,
 * arrays → array literals, other objects → JSON, strings as they are.
 * Callers JSON-encode values bound for json/jsonb columns themselves (a string or an array
 * there is JSON, not text or an array literal).
 */

// Backslash, newline, carriage return and tab are the only characters COPY text needs escaped.
const SPECIAL = /[\\\n\r\t]/g;
const ESCAPES: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function escapeField(text: string): string {
  return text.replace(SPECIAL, (c) => ESCAPES[c] as string);
}

/** Text of a value as a parameter would carry it, before COPY escaping; null for NULL. */
function valueText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  if (typeof v === "boolean") return v ? "t" : "f";
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return arrayLiteral(v);
  if (Buffer.isBuffer(v)) return `\\x${v.toString("hex")}`;
  return JSON.stringify(v);
}

/** `{...}` array literal: every non-null element double-quoted, NULL bare. */
function arrayLiteral(items: readonly unknown[]): string {
  const parts = items.map((item) => {
    if (Array.isArray(item)) return arrayLiteral(item);
    const text = valueText(item);
    return text === null ? "NULL" : `"${text.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
  });
  return `{${parts.join(",")}}`;
}

/** One COPY text line (with its newline) for a row of values in column order. */
export function copyLine(values: readonly unknown[]): string {
  let line = "";
  for (let i = 0; i < values.length; i++) {
    if (i > 0) line += "\t";
    const text = valueText(values[i]);
    line += text === null ? "\\N" : escapeField(text);
  }
  return `${line}\n`;
}

/** The COPY statement for a table and column list (identifiers quoted). */
export function copyStatement(table: string, columns: readonly string[], source: string): string {
  const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;
  return `COPY ${quote(table)} (${columns.map(quote).join(", ")}) FROM ${source}`;
}
