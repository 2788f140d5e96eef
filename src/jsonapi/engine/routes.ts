/**
 * Declarations → route specs → Fastify routes. The same specs drive the OpenAPI document,
 * so every route that exists is documented and every documented route exists.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Actor } from "../../access/actor.ts";
import type { AccessRule } from "../../access/rule.ts";
import type { AppContext } from "../../kernel/context.ts";
import { ConflictError, InvalidRequestError } from "../../kernel/errors.ts";
import type { CollectionDecl, OperationDecl, ResourceDecl } from "../define.ts";
import { sourcesOf } from "../state-machine.ts";
import { enforce, routeRuleForRead, satisfies } from "./access.ts";
import { checkAccept, checkContentType, JSONAPI } from "./media.ts";
import { parseDeepQuery, v2CursorKey } from "./query.ts";
import { runList, runRead } from "./read.ts";
import { type BodySpec, bodySchema } from "./schemas.ts";
import {
  createAttributes,
  type JsonApiBody,
  runCreate,
  runDelete,
  runOperation,
  runUpdate,
  updateAttributes,
  type WriteOutcome,
} from "./write.ts";

export const PREFIX = "/api/v2";

export type RouteKind = "index" | "collection" | "read" | "create" | "update" | "delete" | "operation";

export interface RouteSpec {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  /** Fastify path under PREFIX, with `:param` segments. */
  path: string;
  kind: RouteKind;
  res: ResourceDecl;
  operationId: string;
  summary: string;
  access: AccessRule;
  collection?: CollectionDecl;
  op?: OperationDecl;
  body?: BodySpec;
  /** Body may be omitted (operations without required arguments). */
  bodyOptional?: boolean;
  paginated: boolean;
}

function opId(res: ResourceDecl, name: string): string {
  return `${res.type.replace(/[^a-z0-9]+/g, "_")}_${name.replace(/[^a-z0-9]+/g, "_")}`;
}

export function routeSpecs(resources: readonly ResourceDecl[]): RouteSpec[] {
  const specs: RouteSpec[] = [];
  for (const res of resources) {
    const readRule = routeRuleForRead(res.policies.read.access, res.policies.read.whenDenied);
    const routes = res.routes ?? {};
    if (routes.index !== false) {
      specs.push({
        method: "GET",
        path: res.base,
        kind: "index",
        res,
        operationId: opId(res, "index"),
        summary: `List ${res.type} resources`,
        access: readRule,
        paginated: true,
      });
    }
    for (const c of res.collections ?? []) {
      specs.push({
        method: "GET",
        path: `${res.base}${c.path}`,
        kind: "collection",
        res,
        collection: c,
        operationId: opId(res, c.name),
        summary:
          c.summary ??
          `${c.name} ${res.type}${c.single ? "" : " resources"}${c.paginate === false || c.single ? " (no page)" : ""}`,
        access: c.access ?? readRule,
        paginated: c.paginate !== false && !c.single,
      });
    }
    for (const op of (res.operations ?? []).filter(
      (o) => o.target === "collection" && o.path !== undefined,
    )) {
      specs.push(operationSpec(res, op));
    }
    if (!res.readOnly && routes.read !== false && typeof res.id.column === "string") {
      specs.push({
        method: "GET",
        path: `${res.base}/:id`,
        kind: "read",
        res,
        operationId: opId(res, "read"),
        summary: `Read one ${res.type}`,
        access: readRule,
        paginated: false,
      });
    }
    if (res.readOnly) continue;
    const create = res.actions?.create;
    if (create) {
      const { attrs, required } = createAttributes(res);
      const gen = res.id.generate;
      specs.push({
        method: "POST",
        path: res.base,
        kind: "create",
        res,
        operationId: opId(res, "create"),
        summary: create.summary ?? `Create a ${res.type}`,
        access: create.access,
        body: {
          attributes: attrs,
          required,
          relationships: writableRels(res),
          id: gen === "client" || create.clientId ? "required" : "forbidden",
          style: "attributes",
        },
        paginated: false,
      });
    }
    const update = res.actions?.update;
    if (update) {
      specs.push({
        method: "PATCH",
        path: `${res.base}/:id`,
        kind: "update",
        res,
        operationId: opId(res, "update"),
        summary: update.summary ?? `Update a ${res.type}`,
        access: update.access,
        body: {
          attributes: updateAttributes(res),
          required: [],
          relationships: writableRels(res),
          id: "optional",
          style: "attributes",
        },
        paginated: false,
      });
    }
    const del = res.actions?.delete;
    if (del) {
      specs.push({
        method: "DELETE",
        path: `${res.base}/:id`,
        kind: "delete",
        res,
        operationId: opId(res, "delete"),
        summary: del.summary ?? `Delete a ${res.type}`,
        access: del.access,
        paginated: false,
      });
    }
    for (const op of (res.operations ?? []).filter((o) => o.target !== "collection" && o.path !== undefined))
      specs.push(operationSpec(res, op));
  }
  return specs;
}

function writableRels(res: ResourceDecl): string[] {
  return Object.entries(res.relationships ?? {})
    .filter(([, r]) => r.kind === "belongsTo" && r.writable)
    .map(([n]) => n);
}

function operationSpec(res: ResourceDecl, op: OperationDecl): RouteSpec {
  const member = op.target !== "collection";
  const args = op.arguments ?? {};
  const required = Object.entries(args)
    .filter(([, a]) => a.required)
    .map(([n]) => n);
  let summary = op.summary ?? `${op.name} operation on ${res.type}`;
  if (op.transition && res.stateMachine) {
    const t = res.stateMachine.transitions[op.transition];
    summary += ` (from: ${sourcesOf(res.stateMachine, op.transition).join(", ")}${t?.to ? `; to: ${t.to}` : ""})`;
  }
  return {
    method: op.method ?? (member ? "PATCH" : "POST"),
    path: member ? `${res.base}/:id${op.path}` : `${res.base}${op.path}`,
    kind: "operation",
    res,
    op,
    operationId: opId(res, op.name),
    summary,
    access: op.access,
    body: {
      attributes: args,
      required,
      relationships: [],
      id: "optional",
      style: op.bodyStyle ?? "attributes",
    },
    bodyOptional: required.length === 0,
    paginated: false,
  };
}

function ajvErrorToApp(e: ErrorObject | undefined): InvalidRequestError {
  if (!e) return new InvalidRequestError("invalid request document");
  let pointer = e.instancePath || "";
  let detail = `${pointer || "document"} ${e.message ?? "is invalid"}`;
  if (e.keyword === "additionalProperties") {
    const extra = (e.params as { additionalProperty: string }).additionalProperty;
    pointer = `${pointer}/${extra}`;
    detail = `${pointer} is not allowed (unknown member '${extra}')`;
  } else if (e.keyword === "required") {
    const missing = (e.params as { missingProperty: string }).missingProperty;
    pointer = `${pointer}/${missing}`;
    detail = `${pointer} is required`;
  } else if (e.keyword === "enum") {
    detail = `${pointer} must be one of: ${((e.params as { allowedValues: unknown[] }).allowedValues ?? []).join(", ")}`;
  }
  return new InvalidRequestError(detail, { source: { pointer: pointer || "/" }, code: "invalid_document" });
}

export function makeAjv(): Ajv {
  const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: false });
  const addFormats = addFormatsModule as unknown as (a: Ajv) => Ajv;
  addFormats(ajv);
  return ajv;
}

function baseUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}${PREFIX}`;
}

function hasBody(request: FastifyRequest): boolean {
  const len = request.headers["content-length"];
  if (len !== undefined) return Number(len) > 0;
  return request.headers["transfer-encoding"] !== undefined;
}

function send(reply: FastifyReply, status: number, body: unknown): FastifyReply {
  reply.code(status).type(JSONAPI);
  return status === 204 ? reply.send() : reply.send(body);
}

/** A body validator compiled on its first use, then kept. */
function lazyValidator(
  ajv: () => Ajv,
  res: RouteSpec["res"],
  body: NonNullable<RouteSpec["body"]>,
): () => ValidateFunction {
  let compiled: ValidateFunction | undefined;
  return () => {
    compiled ??= ajv().compile(bodySchema(res, body, "ajv"));
    return compiled;
  };
}

/** Register the v2 routes on `app`. */
export function registerRoutes(app: FastifyInstance, ctx: AppContext, specs: readonly RouteSpec[]): void {
  // Created and compiled on a route's first write, not here: compiling every body schema at
  // registration was ~1 s of CPU on every start (issue 14 goal 5, bench/ops/RESULTS.md), for
  // routes most starts never see a write on. src/jsonapi/body-schemas.test.ts compiles them all.
  let ajv: Ajv | undefined;
  for (const spec of specs) {
    const validate = spec.body ? lazyValidator(() => (ajv ??= makeAjv()), spec.res, spec.body) : null;
    const { res } = spec;
    const url = `${PREFIX}${spec.path}`;
    app.route({
      method: spec.method,
      url,
      config: { access: spec.access, rateLimit: "api_default", body: "validated" },
      onRequest: async (request) => {
        checkAccept(request.headers.accept);
        if (spec.method !== "GET" && spec.method !== "DELETE") {
          checkContentType(request.headers["content-type"], hasBody(request));
        } else if (hasBody(request)) {
          checkContentType(request.headers["content-type"], true);
        }
      },
      handler: async (request, reply) => {
        const actor = request.actor as Actor | null;
        const qi = request.url.indexOf("?");
        const search = qi >= 0 ? request.url.slice(qi + 1) : "";
        const path = qi >= 0 ? request.url.slice(PREFIX.length, qi) : request.url.slice(PREFIX.length);
        const params = (request.params ?? {}) as Record<string, string>;
        const now = ctx.now();
        if (spec.kind === "index" || spec.kind === "collection" || spec.kind === "read") {
          const readAccess = spec.collection?.access ?? res.policies.read.access;
          const hide = res.policies.read.whenDenied === "hide" && !spec.collection?.access;
          if (!hide) enforce(readAccess, actor);
          const visible = satisfies(readAccess, actor);
          const query = parseDeepQuery(search);
          const rq = {
            res,
            query,
            search,
            path,
            baseUrl: baseUrl(request),
            params,
            actor,
            now,
            visible,
            cursorKey: v2CursorKey(ctx.secretKey),
          };
          for (const [name, t] of Object.entries(spec.collection?.params ?? {})) {
            const v = params[name] ?? "";
            if (t === "uuid" && !/^[0-9a-f-]{36}$/i.test(v)) {
              throw new InvalidRequestError(`path parameter ${name} must be a uuid`, {
                source: { parameter: name },
              });
            }
            if (t === "integer" && !/^-?\d+$/.test(v)) {
              throw new InvalidRequestError(`path parameter ${name} must be an integer`, {
                source: { parameter: name },
              });
            }
          }
          const doc =
            spec.kind === "read"
              ? await runRead(ctx.db, rq, params.id as string)
              : await runList(ctx.db, rq, spec.collection);
          return send(reply, 200, doc);
        }
        const who = enforce(spec.access, actor) as Actor;
        if (!who) throw new InvalidRequestError("authentication required");
        // Only GET accepts query parameters besides none; writes take none.
        if (search) {
          const q = parseDeepQuery(search);
          const first = Object.keys(q)[0];
          if (first)
            throw new InvalidRequestError(`unknown query parameter '${first}'`, {
              source: { parameter: first },
            });
        }
        let body = (request.body ?? null) as JsonApiBody | null;
        if (validate) {
          if (body === null) {
            if (!spec.bodyOptional) {
              throw new InvalidRequestError("a request document with 'data' is required", {
                source: { pointer: "" },
                code: "invalid_document",
              });
            }
            body = {};
          } else {
            if (typeof body !== "object" || Array.isArray(body)) {
              throw new InvalidRequestError("the request document must be an object", {
                source: { pointer: "" },
                code: "invalid_document",
              });
            }
            const t = (body as JsonApiBody).data?.type;
            if (spec.body?.style === "attributes" && typeof t === "string" && t !== res.type) {
              throw new ConflictError(`data.type '${t}' does not match the endpoint type '${res.type}'`, {
                source: { pointer: "/data/type" },
                code: "type_mismatch",
              });
            }
            const check = validate();
            if (!check(body)) throw ajvErrorToApp(check.errors?.[0]);
          }
        }
        const w = { app: ctx, res, actor: who, body: body ?? {}, params, baseUrl: baseUrl(request) };
        let out: WriteOutcome;
        switch (spec.kind) {
          case "create":
            out = await runCreate(w);
            if (out.status === 201) {
              const self = (out.body as { links?: { self?: string } })?.links?.self;
              if (self) reply.header("location", self);
            }
            break;
          case "update":
            out = await runUpdate(w, params.id as string);
            break;
          case "delete":
            out = await runDelete(w, params.id as string);
            break;
          default:
            out = await runOperation(
              w,
              spec.op as OperationDecl,
              spec.op?.target === "collection" ? null : (params.id as string),
            );
        }
        return send(reply, out.status, out.body);
      },
    });
  }
}
