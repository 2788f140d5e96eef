/**
 * The MCP tools. Each one is a thin adapter over the code path its HTTP counterpart runs,
 * called as the token's owner: SRQL through the compiler (parameterised SQL, the caller's
 * partitions), devices and identity through the inventory domain, alerts and checks through
 * the v2 engine (declared read policies and operations). No tool builds SQL or SRQL text from
 * a free-form argument: free text reaches SRQL only as the user's own query, and identifiers
 * are validated to a strict shape first.
 */
import { z } from "zod";
import type { Actor } from "../access/actor.ts";
import { hasPermission } from "../access/actor.ts";
import { deviceJson } from "../inventory/device.ts";
import { getDevice, listDevices } from "../inventory/devices.ts";
import { MAX_RESOLVE_BATCH, resolveAddresses } from "../inventory/identity.ts";
import type { AppContext } from "../kernel/context.ts";
import { ForbiddenError, InvalidRequestError, NotFoundError } from "../kernel/errors.ts";
import { catalogDocument } from "../srql/catalog.ts";
import { runQuery } from "../srql/run.ts";
import { explainCheck } from "./explain.ts";
import { listResource, runMemberOperation } from "./v2.ts";

export const MAX_TOOL_ROWS = 500;

export interface ToolDef {
  name: string;
  title: string;
  description: string;
  inputSchema: z.ZodRawShape;
  /** Marks tools that change state (clients may ask the user first). */
  readOnly: boolean;
  run(ctx: AppContext, actor: Actor, input: Record<string, unknown>): Promise<unknown>;
}

const uuid = z.uuid();
const ALERT_STATUSES = ["pending", "acknowledged", "escalated", "suppressed", "resolved"] as const;
const ALERT_SEVERITIES = ["info", "warning", "critical", "emergency"] as const;

function srqlQuery(): ToolDef {
  return {
    name: "srql_query",
    title: "Run an SRQL query",
    description: [
      "Runs one SRQL (netmon's query language) query and returns matching rows as JSON, with",
      "`pagination.next_cursor` to fetch the next page (pass it back as `cursor` with the same query).",
      "Use `srql_catalog` first to learn entity and field names. Results are limited to what the",
      `token's owner may see. At most ${MAX_TOOL_ROWS} rows per call (default 50).`,
      "Examples: `in:devices is_available:false limit:20`, `in:alerts status:pending sort:triggered_at:desc`,",
      '`in:services time:last_1h stats:"count() as n by service_name"`, `in:logs severity_text:error time:last_15m`.',
    ].join(" "),
    inputSchema: {
      query: z
        .string()
        .min(1)
        .max(4000)
        .describe("The SRQL query, e.g. `in:devices hostname:%core% limit:10`"),
      limit: z.number().int().min(1).max(MAX_TOOL_ROWS).optional().describe("Rows per page (default 50)"),
      cursor: z.string().max(4096).optional().describe("`pagination.next_cursor` of the previous page"),
      direction: z.enum(["next", "prev"]).optional().describe("Page direction when a cursor is given"),
    },
    readOnly: true,
    run: (ctx, actor, input) =>
      runQuery(ctx, actor, {
        query: input.query as string,
        limit: (input.limit as number | undefined) ?? 50,
        cursor: (input.cursor as string | undefined) ?? null,
        direction: (input.direction as "next" | "prev" | undefined) ?? null,
      }),
  };
}

function srqlCatalog(): ToolDef {
  return {
    name: "srql_catalog",
    title: "Describe the SRQL catalog",
    description: [
      "Describes what SRQL can query: with no argument, the list of entities (e.g. devices, alerts,",
      "services, logs, interfaces) with their labels, control tokens (in:, time:, sort:, limit:, stats:)",
      "and operators; with `entity`, that entity's filterable, numeric, time and stats fields and enums.",
      "Call it before writing an `srql_query` for an entity you have not used yet.",
    ].join(" "),
    inputSchema: {
      entity: z.string().min(1).max(100).optional().describe("An entity id, e.g. `devices`"),
    },
    readOnly: true,
    run: async (_ctx, actor, input) => {
      if (!hasPermission(actor, "analytics.view")) {
        throw new ForbiddenError("the SRQL catalog needs the analytics.view permission");
      }
      const { doc } = catalogDocument();
      const entities = doc.entities as Record<string, Record<string, unknown>>;
      const name = input.entity as string | undefined;
      if (name === undefined) {
        return {
          version: doc.version,
          control_tokens: doc.control_tokens,
          operators: doc.operators,
          entities: Object.entries(entities).map(([id, e]) => ({ id, label: e.label })),
        };
      }
      if (!Object.hasOwn(entities, name)) {
        throw new NotFoundError(
          `unknown SRQL entity "${name}". Known ids: ${Object.keys(entities).join(", ")}`,
          {
            code: "unknown_entity",
          },
        );
      }
      return { id: name, ...entities[name] };
    },
  };
}

function deviceLookup(): ToolDef {
  return {
    name: "device_lookup",
    title: "Look up a device",
    description: [
      "Finds devices in the inventory and returns their full records (OCSF-style fields: uid, hostname,",
      "ip, mac, vendor, type, availability and its reason, last seen, discovery sources, group).",
      "Give exactly one of: `uid` (exact), `ip` (exact address, optional `partition`), `mac`, or `search`",
      '(substring of hostname, IP, MAC or uid; at most 20 matches). Example: {"ip": "10.0.0.1"}.',
    ].join(" "),
    inputSchema: {
      uid: z.string().min(1).max(200).optional(),
      ip: z.string().min(1).max(64).optional(),
      mac: z.string().min(1).max(64).optional(),
      partition: z.string().min(1).max(100).optional(),
      search: z.string().min(1).max(200).optional(),
    },
    readOnly: true,
    run: async (ctx, actor, input) => {
      const given = ["uid", "ip", "mac", "search"].filter((k) => input[k] !== undefined);
      if (given.length !== 1) {
        throw new InvalidRequestError("give exactly one of uid, ip, mac or search", {
          code: "invalid_arguments",
        });
      }
      if (input.uid !== undefined) {
        return { devices: [deviceJson(await getDevice(ctx.db, actor, input.uid as string))] };
      }
      if (input.ip !== undefined || input.mac !== undefined) {
        const term = (input.ip ?? input.mac) as string;
        if (input.ip !== undefined) {
          const [r] = await resolveAddresses(ctx.db, actor, [
            { ip: term, partition: (input.partition as string | undefined) ?? "default", mac: null },
          ]);
          if (r?.ok) return { devices: [deviceJson(await getDevice(ctx.db, actor, r.uid))] };
          if (r && !r.ok && r.error === "ambiguous") {
            const devices = [];
            for (const uid of r.uids) devices.push(deviceJson(await getDevice(ctx.db, actor, uid)));
            return { devices, note: "more than one device holds this address" };
          }
          return { devices: [], note: r && !r.ok ? r.error : "not_found" };
        }
      }
      const search = (input.search ?? input.mac) as string;
      const { data } = await listDevices(ctx.db, actor, { limit: 20, offset: 0, search });
      return { devices: data.map(deviceJson), truncated: data.length >= 20 };
    },
  };
}

function identityResolve(): ToolDef {
  return {
    name: "identity_resolve",
    title: "Resolve addresses to device ids",
    description: [
      `Resolves up to ${MAX_RESOLVE_BATCH} IP addresses (optionally with a MAC that must agree) to`,
      "device uids, exactly as POST /api/v1/identity/resolve does. Each entry answers `uid`, or",
      "`error`: invalid_ip, not_found, ambiguous (with `uids`) or mac_ip_conflict. Creates nothing.",
      'Example: {"addresses": [{"ip": "192.0.2.10"}, {"ip": "192.0.2.11", "mac": "00:11:22:33:44:55"}]}.',
    ].join(" "),
    inputSchema: {
      addresses: z
        .array(
          z.object({
            ip: z.string().min(1).max(64),
            mac: z.string().min(1).max(64).optional(),
            partition: z.string().min(1).max(100).optional(),
          }),
        )
        .min(1)
        .max(MAX_RESOLVE_BATCH),
    },
    readOnly: true,
    run: async (ctx, actor, input) => {
      const list = input.addresses as { ip: string; mac?: string; partition?: string }[];
      const queries = list.map((a) => ({
        ip: a.ip,
        mac: a.mac ?? null,
        partition: a.partition ?? "default",
      }));
      const outcomes = await resolveAddresses(ctx.db, actor, queries);
      return { results: queries.map((q, i) => ({ ip: q.ip, partition: q.partition, ...outcomes[i] })) };
    },
  };
}

function alertsList(): ToolDef {
  return {
    name: "alerts_list",
    title: "List alerts",
    description: [
      "Lists alerts, newest first, with title, severity, status, the check/device/agent they concern,",
      "and their lifecycle times. Default: open alerts (pending, acknowledged, escalated). Filter by",
      "`status`, `severity`, `device_uid` or `service_check_id`; page with `cursor` (the `next_cursor` of",
      'the previous call). At most 100 per call. Example: {"status": "pending", "severity": "critical"}.',
    ].join(" "),
    inputSchema: {
      status: z.enum(ALERT_STATUSES).optional(),
      severity: z.enum(ALERT_SEVERITIES).optional(),
      device_uid: z.string().min(1).max(1000).optional(),
      service_check_id: uuid.optional(),
      limit: z.number().int().min(1).max(100).optional(),
      cursor: z.string().max(4096).optional(),
    },
    readOnly: true,
    run: async (ctx, actor, input) => {
      const filter: Record<string, Record<string, string | string[]>> = Object.create(null);
      if (input.status !== undefined) filter.status = { eq: input.status as string };
      else filter.status = { in: ["pending", "acknowledged", "escalated"] };
      if (input.severity !== undefined) filter.severity = { eq: input.severity as string };
      if (input.device_uid !== undefined) filter.device_uid = { eq: input.device_uid as string };
      if (input.service_check_id !== undefined)
        filter.service_check_id = { eq: input.service_check_id as string };
      const page: Record<string, string> = { limit: String(input.limit ?? 50) };
      if (input.cursor !== undefined) page.after = input.cursor as string;
      const doc = await listResource(ctx, actor, "alert", { filter, page, sort: "-triggered_at" });
      const data = (doc.data as { id: string; attributes: Record<string, unknown> }[]) ?? [];
      return {
        alerts: data.map((r) => ({ id: r.id, ...r.attributes })),
        next_cursor: nextCursorFromLinks(doc),
      };
    },
  };
}

/** The keyset cursor of the `next` link (`page[after]=…`), if there is a next page. */
function nextCursorFromLinks(doc: Record<string, unknown>): string | null {
  const next = (doc.links as { next?: string | null } | undefined)?.next;
  if (!next) return null;
  const q = next.indexOf("?");
  if (q < 0) return null;
  return new URLSearchParams(next.slice(q + 1)).get("page[after]");
}

function alertAcknowledge(): ToolDef {
  return {
    name: "alert_acknowledge",
    title: "Acknowledge an alert",
    description: [
      "Acknowledges one alert (from pending or escalated) as the token's owner, exactly like",
      "PATCH /api/v2/alerts/{id}/acknowledge: needs the alerts.acknowledge permission, stops",
      "escalation and repeat notifications, and records who acknowledged it and the note.",
      'Returns the updated alert. Example: {"alert_id": "…uuid…", "note": "looking into it"}.',
    ].join(" "),
    inputSchema: {
      alert_id: uuid.describe("The alert's id (from alerts_list)"),
      note: z.string().max(10000).optional(),
    },
    readOnly: false,
    run: async (ctx, actor, input) => {
      const attributes: Record<string, unknown> = {};
      if (input.note !== undefined) attributes.note = input.note;
      const doc = (await runMemberOperation(
        ctx,
        actor,
        "alert",
        "acknowledge",
        input.alert_id as string,
        attributes,
      )) as { data?: { id: string; attributes: Record<string, unknown> } };
      return doc.data ? { id: doc.data.id, ...doc.data.attributes } : doc;
    },
  };
}

function checkExplain(): ToolDef {
  return {
    name: "check_explain",
    title: "Explain a service check",
    description: [
      "Explains why a service check is in its current state: its configuration (secrets redacted),",
      "last result and error, consecutive failures, whether its result is overdue (stale), the agent",
      "that runs it and whether that agent is connected, the device it monitors and its availability,",
      "the most recent results, and open alerts — with a short list of findings in plain words.",
      'Give `check_id` (a uuid from `srql_query` `in:services` or the checks list). Example: {"check_id": "…"}.',
    ].join(" "),
    inputSchema: { check_id: uuid },
    readOnly: true,
    run: (ctx, actor, input) => explainCheck(ctx, actor, input.check_id as string),
  };
}

export function allTools(): ToolDef[] {
  return [
    srqlQuery(),
    srqlCatalog(),
    deviceLookup(),
    identityResolve(),
    alertsList(),
    alertAcknowledge(),
    checkExplain(),
  ];
}
