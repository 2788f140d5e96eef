import fs from "node:fs";
import readline from "node:readline";
import { SYSTEM_ACTOR } from "../access/actor.ts";
import type { AppContext } from "../kernel/context.ts";
import { InvalidRequestError } from "../kernel/errors.ts";
import { parseUntrustedJson, RESERVED_KEYS } from "../kernel/json.ts";
import { analyzeNow } from "../storage/maintenance.ts";
import { assignGroup, findGroup } from "./groups.ts";
import { applySightings, type ItemError, MAX_BATCH, unknownFields, validateSightings } from "./ingest.ts";

/** Columns mapped onto sighting fields; any other CSV column goes into `metadata`. */
const KNOWN = new Set([
  "ip",
  "mac",
  "hostname",
  "name",
  "partition",
  "source",
  "agent_id",
  "gateway_id",
  "type",
  "vendor_name",
  "model",
  "domain",
  "zone",
  "region",
  "uid_alt",
  "risk_level",
  "risk_score",
  "is_available",
  "is_managed",
  "is_compliant",
  "observed_at",
  "integration_id",
  "armis_device_id",
  "netbox_device_id",
]);
const BOOLEAN = new Set(["is_available", "is_managed", "is_compliant"]);

/** Split one CSV line (RFC 4180 quoting, no embedded newlines). */
export function parseCsvLine(line: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"') {
        if (line[i + 1] === '"') {
          cur += '"';
          i++;
        } else quoted = false;
      } else cur += c;
    } else if (c === '"' && cur === "") quoted = true;
    else if (c === ",") {
      out.push(cur);
      cur = "";
    } else cur += c;
  }
  out.push(cur);
  return out;
}

function csvRecord(header: string[], cells: string[]): Record<string, unknown> {
  const rec: Record<string, unknown> = Object.create(null);
  const metadata: Record<string, string> = Object.create(null);
  header.forEach((h, i) => {
    if (RESERVED_KEYS.has(h)) return; // a column named __proto__ is data nobody can mean
    const v = (cells[i] ?? "").trim();
    if (v === "") return;
    if (!KNOWN.has(h)) metadata[h] = v;
    else if (BOOLEAN.has(h))
      rec[h] = /^(true|1|yes|y)$/i.test(v) ? true : /^(false|0|no|n)$/i.test(v) ? false : v;
    else if (h === "risk_score") rec[h] = /^-?\d+$/.test(v) ? Number(v) : v;
    else rec[h] = v;
  });
  if (Object.keys(metadata).length > 0) rec.metadata = metadata;
  return rec;
}

export interface ImportOptions {
  format?: "csv" | "jsonl";
  /** Default `source` for rows without one. */
  source?: string;
  /** Default `partition` for rows without one. */
  partition?: string;
  batchSize?: number;
  onProgress?: (done: number, total: number) => void;
  /** Put every imported device into this group (id or name): its monitoring profiles apply. */
  group?: string;
}

export interface ImportResult {
  rows: number;
  created: number;
  updated: number;
  batches: number;
  /** JSON lines: members netmon does not know (ignored), with how many rows carried each. */
  unknown_fields: Record<string, number>;
  /** CSV: columns that are not device fields; their values were stored in `metadata`. */
  metadata_columns: string[];
}

export class ImportValidationError extends InvalidRequestError {
  constructor(readonly lineErrors: (ItemError & { line: number })[]) {
    super(`${lineErrors.length} invalid row(s); nothing was imported`, { code: "invalid_import" });
  }
}

interface ReadRecord {
  line: number;
  rec: unknown;
  /** CSV rows carry the header they were read with. */
  csv?: boolean;
  header?: string[];
}

async function readRecords(file: string, opts: ImportOptions): Promise<ReadRecord[]> {
  const format = opts.format ?? (/\.csv$/i.test(file) ? "csv" : "jsonl");
  const rl = readline.createInterface({
    input: fs.createReadStream(file, "utf8"),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  const out: ReadRecord[] = [];
  let header: string[] | null = null;
  let n = 0;
  for await (const raw of rl) {
    n++;
    const line = n === 1 ? raw.replace(/^\uFEFF/, "") : raw;
    if (line.trim() === "") continue;
    if (format === "csv") {
      if (!header) {
        header = parseCsvLine(line).map((h) => h.trim().toLowerCase());
        if (!header.includes("ip"))
          throw new InvalidRequestError("the CSV header has no 'ip' column", { code: "invalid_import" });
        continue;
      }
      out.push({ line: n, rec: csvRecord(header, parseCsvLine(line)), csv: true, header });
    } else {
      let rec: unknown;
      try {
        rec = parseUntrustedJson(line);
      } catch {
        rec = null;
      }
      out.push({ line: n, rec });
    }
  }
  for (const r of out) {
    if (r.rec && typeof r.rec === "object" && !Array.isArray(r.rec)) {
      const o = r.rec as Record<string, unknown>;
      if (o.source === undefined && opts.source) o.source = opts.source;
      if (o.partition === undefined && opts.partition) o.partition = opts.partition;
    }
  }
  return out;
}

/**
 * `netmon devices import FILE`: CSV (header row with at least `ip`) or JSON lines, through the
 * same ingestion as `POST /api/v1/device-updates`. The whole file is validated first: any invalid
 * row aborts with line-numbered errors and nothing written; then batches are applied in order.
 */
export async function importDevicesFile(
  ctx: AppContext,
  file: string,
  opts: ImportOptions = {},
): Promise<ImportResult> {
  const records = await readRecords(file, opts);
  const batchSize = Math.min(opts.batchSize ?? MAX_BATCH, MAX_BATCH);
  const now = ctx.now();
  const batches: ReturnType<typeof validateSightings>["sightings"][] = [];
  const errors: (ItemError & { line: number })[] = [];
  for (let i = 0; i < records.length; i += batchSize) {
    const chunk = records.slice(i, i + batchSize);
    const v = validateSightings(
      chunk.map((c) => c.rec),
      SYSTEM_ACTOR,
      now,
    );
    for (const e of v.errors)
      errors.push({ ...e, index: i + e.index, line: (chunk[e.index] as { line: number }).line });
    batches.push(v.sightings);
  }
  if (errors.length > 0) throw new ImportValidationError(errors);
  // An unknown group is an error before anything is written, like an invalid row.
  const group = opts.group ? await findGroup(ctx.db, opts.group) : null;
  let created = 0;
  let updated = 0;
  let done = 0;
  opts.onProgress?.(0, records.length);
  for (const sightings of batches) {
    const r = await ctx.db.transaction(async (tx) => {
      const applied = await applySightings(tx, sightings, now);
      if (group)
        await assignGroup(
          tx,
          applied.results.map((x) => x.uid),
          group.id,
        );
      return applied;
    });
    created += r.created;
    updated += r.updated;
    done += sightings.length;
    opts.onProgress?.(done, records.length);
  }
  // The first reads after an import must be planned with true row counts (issue 14).
  if (created > 0) await analyzeNow(ctx.db, ["devices"]);
  const jsonRows = records.filter((r) => !r.csv).map((r) => r.rec);
  const header = records.find((r) => r.csv)?.header ?? [];
  return {
    rows: records.length,
    created,
    updated,
    batches: batches.length,
    unknown_fields: { ...unknownFields(jsonRows) },
    metadata_columns: header.filter((h) => !KNOWN.has(h)),
  };
}

/** A progress bar on stderr (redrawn in place on a terminal, one line per 10% otherwise). */
export function progressBar(
  stream: { write(text: string): unknown; isTTY?: boolean } = process.stderr,
): (done: number, total: number) => void {
  const started = Date.now();
  let lastDecile = -1;
  return (done, total) => {
    const frac = total === 0 ? 1 : done / total;
    const width = 30;
    const filled = Math.round(frac * width);
    const rate = Math.round(done / Math.max((Date.now() - started) / 1000, 0.001));
    const text = `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${Math.floor(frac * 100)}% ${done}/${total} rows (${rate}/s)`;
    if (stream.isTTY) {
      stream.write(`\r${text}`);
      if (done >= total) stream.write("\n");
    } else {
      const decile = Math.floor(frac * 10);
      if (decile !== lastDecile) {
        lastDecile = decile;
        stream.write(`${text}\n`);
      }
    }
  };
}
