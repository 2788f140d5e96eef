import {
  Bool,
  type DataType,
  Float64,
  Table,
  tableToIPC,
  Utf8,
  type Vector,
  vectorFromArray,
} from "apache-arrow";

/**
 * SRQL rows as an Arrow IPC stream. Column types are decided per column from its values:
 * all numbers (or null) → Float64, all booleans → Bool, anything else → Utf8 (dates as ISO
 * 8601, objects and arrays as JSON), so a mixed column never fails the encoding.
 */
function asText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v.toISOString();
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

export function rowsToArrowIpc(rows: readonly Record<string, unknown>[]): Uint8Array {
  const columns: string[] = [];
  const seen = new Set<string>();
  for (const r of rows) {
    for (const k of Object.keys(r)) {
      if (!seen.has(k)) {
        seen.add(k);
        columns.push(k);
      }
    }
  }
  const vectors: Record<string, Vector<DataType>> = Object.create(null);
  for (const c of columns) {
    const values = rows.map((r) => (Object.hasOwn(r, c) ? r[c] : null));
    const present = values.filter((v) => v !== null && v !== undefined);
    if (present.length > 0 && present.every((v) => typeof v === "number" || typeof v === "bigint")) {
      vectors[c] = vectorFromArray(
        values.map((v) => (v === null || v === undefined ? null : Number(v))),
        new Float64(),
      );
    } else if (present.length > 0 && present.every((v) => typeof v === "boolean")) {
      vectors[c] = vectorFromArray(
        values.map((v) => (typeof v === "boolean" ? v : null)),
        new Bool(),
      );
    } else {
      vectors[c] = vectorFromArray(values.map(asText), new Utf8());
    }
  }
  return tableToIPC(new Table(vectors), "stream");
}
