/** Display helpers shared by every page. */

export function ago(value: unknown): string {
  if (typeof value !== "string" || value === "") return "—";
  const t = Date.parse(value);
  if (Number.isNaN(t)) return "—";
  const s = Math.round((Date.now() - t) / 1000);
  if (s < -5) return `in ${span(-s)}`;
  if (s < 5) return "just now";
  return `${span(s)} ago`;
}

function span(s: number): string {
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export function when(value: unknown): string {
  if (typeof value !== "string" || value === "") return "—";
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? "—" : d.toLocaleString();
}

export function bytes(n: unknown): string {
  const v = Number(n);
  if (!Number.isFinite(v)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let x = v;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return `${x.toFixed(x < 10 && i > 0 ? 1 : 0)} ${units[i]}`;
}

export function pct(n: unknown): string {
  const v = Number(n);
  return Number.isFinite(v) ? `${v.toFixed(1)} %` : "—";
}

export function ms(n: unknown): string {
  const v = Number(n);
  return n === null || n === undefined || !Number.isFinite(v) ? "—" : `${Math.round(v)} ms`;
}

export function text(v: unknown): string {
  if (v === null || v === undefined || v === "") return "—";
  if (Array.isArray(v)) return v.map(text).join(", ");
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

/** `{"site": "dc1", "role": "edge"}` → `site=dc1, role=edge` (agent labels, pool selectors). */
export function labelsText(v: unknown): string {
  if (!v || typeof v !== "object") return "";
  return Object.entries(v as Record<string, unknown>)
    .map(([k, val]) => `${k}=${String(val)}`)
    .join(", ");
}

/** The inverse of labelsText; the server validates names and values. Empty → null. */
export function parseLabelsText(s: string): Record<string, string> | null {
  const out: Record<string, string> = {};
  for (const part of s.split(",")) {
    const p = part.trim();
    if (!p) continue;
    const eq = p.indexOf("=");
    out[(eq < 0 ? p : p.slice(0, eq)).trim()] = eq < 0 ? "" : p.slice(eq + 1).trim();
  }
  return Object.keys(out).length > 0 ? out : null;
}
