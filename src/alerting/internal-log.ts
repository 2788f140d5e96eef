/**
 * Internal logs emitted by the alerting domain itself (k8s readiness probes), written through
 * the telemetry write helper into `logs` (migration 0300) like any ingested log.
 */
import type { AppContext } from "../kernel/context.ts";
import { sql } from "../storage/sql.ts";
import { insertLogs } from "../telemetry/write.ts";
import type { LogRow } from "./event-rules.ts";
import { severityNumberFromText } from "./match.ts";

export interface InternalLogInput {
  source: string;
  service_name: string;
  severity_text: string;
  body: string;
  attributes: Record<string, unknown>;
  resource_attributes?: Record<string, unknown>;
  host?: string | null;
  device_id?: string | null;
}

export async function writeInternalLog(ctx: AppContext, input: InternalLogInput): Promise<LogRow> {
  const now = ctx.now();
  const [id] = await insertLogs(ctx.db, [
    {
      timestamp: now,
      observed_timestamp: now,
      severity_text: input.severity_text.toUpperCase(),
      severity_number: severityNumberFromText(input.severity_text),
      body: input.body,
      service_name: input.service_name,
      attributes: input.attributes,
      resource_attributes: input.resource_attributes ?? { "service.name": input.service_name },
      device_id: input.device_id ?? null,
      source: `logs.internal.${input.source}`,
      host: input.host ?? null,
    },
  ]);
  const row = await ctx.db.one<LogRow>(sql`SELECT * FROM logs WHERE id = ${id}`);
  if (!row) throw new Error("log insert returned no row");
  return row;
}
