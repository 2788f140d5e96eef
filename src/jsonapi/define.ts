/**
 * The JSON:API v2 declaration API. A resource is declared once, as data, with
 * `defineResource()`; the engine (src/jsonapi/engine/*) derives from it the Fastify routes,
 * request validation, filter/sort/page/include/fields parsing, the SQL and the OpenAPI document.
 *
 * Declarations never contain request data: table/column names are checked against
 * `^[a-z_][a-z0-9_]*$` when the resource is defined, and every value from a request becomes
 * a SQL parameter. See src/jsonapi/README.md for a worked example.
 */
import type { Actor } from "../access/actor.ts";
import type { AccessRule } from "../access/rule.ts";
import type { AppContext } from "../kernel/context.ts";
import type { Queryable, Row } from "../storage/db.ts";
import type { SqlFragment } from "../storage/sql.ts";
import type { StateMachine } from "./state-machine.ts";

/** Attribute value types. `datetime` is ISO 8601 with a zone; `object` is a JSON object (jsonb). */
export type AttributeType =
  | "string"
  | "integer"
  | "float"
  | "boolean"
  | "datetime"
  | "uuid"
  | "object"
  | "array"
  | "enum"
  /** Any JSON value (e.g. alert `event_time`). Filterable only with is_nil. */
  | "any";

/** Item type of an `array` attribute (for schemas and `in`-free validation). */
export type ArrayItemType = "string" | "integer" | "float" | "uuid" | "object" | "boolean";

export interface AttributeDecl {
  type: AttributeType;
  /** Allowed values (type `enum`; also usable on `string` to document an open set). */
  values?: readonly string[];
  /**
   * How an `array` attribute is stored: "jsonb" (default) or "array" (a native PostgreSQL
   * array column such as text[]; values are bound as arrays of the item type).
   */
  storage?: "jsonb" | "array";
  /** Item type for `array` attributes (default "string"). */
  items?: ArrayItemType;
  /** Database column; defaults to the attribute name. */
  column?: string;
  /**
   * false: the serving table does not store this attribute. It is serialised as null and any
   * filter or sort on it is rejected with 400 naming the field (telemetry collections).
   */
  stored?: boolean;
  /** Accepts and may hold null (default true). */
  nullable?: boolean;
  /** Value applied on create when the client omits it (the DB default applies otherwise). */
  default?: unknown;
  /** Writable on create (default false). */
  create?: boolean;
  /** Writable on update (default false). */
  update?: boolean;
  /** Required on create (implies create: true). */
  required?: boolean;
  /** May appear as a `filter` key (default true for stored, non-computed attributes). */
  filterable?: boolean;
  /** May appear in `sort` (default true for stored scalar attributes; false for object/array/any). */
  sortable?: boolean;
  /**
   * Read-only value computed from the raw row (column names as keys). Never filterable,
   * sortable or writable.
   */
  /**
   * Applied to the stored value whenever the attribute is serialised: secrets inside it are
   * write-only (replaced by a set/unset marker), in every response and export.
   */
  redact?: (value: unknown) => unknown;
  computed?: (row: Row) => unknown;
  /** Serialised in `attributes` (default true). false keeps it internal (still filterable if asked). */
  public?: boolean;
  /** Validation bounds for writes. */
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  /** JSON-schema `pattern` for string writes. */
  pattern?: string;
  description?: string;
}

/** Relationship to another declared type, for `include`, relationship filters and linkage. */
export interface RelationshipDecl {
  /** Target JSON:API type (must be registered by the time routes are built). */
  type: string;
  /**
   * belongsTo: this table's `column` holds the target's key (`targetColumn`, default the
   * target's id column). hasMany: the target table's `foreignColumn` holds this row's
   * `localColumn` (default this resource's id column).
   */
  kind: "belongsTo" | "hasMany";
  column?: string;
  targetColumn?: string;
  foreignColumn?: string;
  localColumn?: string;
  /** belongsTo only: accept `relationships.<name>.data.id` in create/update bodies (sets `column`). */
  writable?: boolean;
  description?: string;
}

export type PaginationStyle = "offset" | "keyset";

export interface PaginationDecl {
  /** Styles a list accepts (default ["offset", "keyset"]). */
  styles?: readonly PaginationStyle[];
  /** Page size when `page[limit]` is absent (default 100). */
  defaultLimit?: number;
  /** Largest accepted `page[limit]` (default 1000); larger → 400. Documented in OpenAPI. */
  maxLimit?: number;
  /**
   * Always paginate even when no `page` is given (default true). When false and no page
   * parameter is sent, the whole (filtered) collection is returned, capped at maxLimit.
   */
  required?: boolean;
}

/** Extra query parameters an operation accepts (e.g. devices `include_deleted`, agents `uid`). */
export interface QueryParamDecl {
  type: "string" | "integer" | "boolean" | "uuid";
  required?: boolean;
  description?: string;
  /** Condition added to the query for this parameter's value (list/read only). */
  where?: (value: unknown, q: QueryHelpers) => SqlFragment | null;
}

/** What a custom `where` gets: the alias-qualified column helper of the main table. */
export interface QueryHelpers {
  /** `col("status")` → `"r"."status"` (a declared column name only). */
  col(column: string): SqlFragment;
  actor: Actor | null;
  now: Date;
}

/** Path parameters of a collection or operation path (`/by-gateway/:gateway_id`). */
export type PathParams = Record<string, string>;

/**
 * A special read collection, e.g. `/alerts/active`, `/agents/by-gateway/:gateway_id`.
 * Takes `include` and `fields`; `filter`/`sort` unless `noFilter`; `page` unless `paginate: false`.
 */
export interface CollectionDecl {
  /** Operation name (used in OpenAPI operationId), e.g. "active". */
  name: string;
  /** Path under the base, with `:param` segments, e.g. "/active", "/by-gateway/:gateway_id". */
  path: string;
  summary?: string;
  /** Fixed condition; receives path params and the column helper. */
  where?: (q: QueryHelpers & { params: PathParams }) => SqlFragment;
  /** Sort used when the client sends none (default: resource defaultSort). */
  defaultSort?: string;
  /** false: "(no page)" — no `page` parameter accepted; returns at most `maxRows` rows. */
  paginate?: false | PaginationDecl;
  /**
   * Answer ONE resource object (`data: {...}`), 404 when no row matches: a singleton at the base
   * path (`path: ""`, with `routes: { index: false }`) or a single-record lookup such as
   * `/by-interface/:device_id/:interface_uid`. Implies no page.
   */
  single?: boolean;
  /** Row cap for unpaginated collections (default 1000). */
  maxRows?: number;
  /** Access rule (default: the resource's read policy). */
  access?: AccessRule;
  /** Path parameter types (default string). */
  params?: Record<string, "string" | "uuid" | "integer">;
}

/** Context handed to custom handlers and hooks: the app context, the open transaction, the clock. */
export interface OperationContext {
  app: AppContext;
  /** The transaction the operation runs in. Use it for every query. */
  tx: Queryable;
  now: Date;
  resource: ResourceDecl;
  /** Path parameters of the route. */
  params: PathParams;
  /** On create: the client-chosen id (`data.id` or the id attribute), when the resource takes one. */
  clientId?: string;
}

/** The record as handlers see it: attribute names → values, plus `id`, plus `_row` (raw columns). */
export type RecordView = Record<string, unknown> & { id: string; _row: Row };

/**
 * What a handler may return: nothing (the engine re-reads the record / the created id),
 * `{ id }` of the resource to answer with, or a raw JSON body (`{ raw, status }`) for generic
 * actions that do not answer a resource (e.g. the k8s probe endpoints).
 */
export type HandlerResult =
  // biome-ignore lint/suspicious/noConfusingVoidType: handlers may simply return nothing (async () => {}).
  void | undefined | { id: string; status?: number } | { raw: unknown; status?: number };

/** Argument of an operation (accepted in `data.attributes`, or directly under `data` for generic actions). */
export type ArgumentDecl = Omit<
  AttributeDecl,
  "column" | "stored" | "computed" | "filterable" | "sortable" | "create" | "update" | "public"
>;

export interface CreateActionDecl {
  access: AccessRule;
  /**
   * false: no wrapping transaction; `c.tx` is `c.app.db` (for handlers that open their own
   * transactions, e.g. log promotion on PGlite's single connection). Default true.
   */
  transaction?: boolean;
  summary?: string;
  /** Accept a client-generated `data.id` (required when true and no `idFromAttribute`). */
  clientId?: boolean;
  /** Extra non-attribute arguments accepted in `data.attributes`, passed to the handler. */
  arguments?: Record<string, ArgumentDecl>;
  /** Values forced on create (e.g. the initial state), computed in the transaction. */
  set?: (input: Record<string, unknown>, c: OperationContext, actor: Actor) => Record<string, unknown>;
  /**
   * Replace the default INSERT. Runs in the transaction; `record` is null. Return `{ id }`.
   * The default INSERT writes every provided/defaulted create attribute plus `set`.
   */
  handler?: (
    c: OperationContext,
    actor: Actor,
    record: null,
    input: Record<string, unknown>,
  ) => Promise<HandlerResult>;
  /** HTTP status on success (default 201). */
  status?: number;
  /**
   * Called instead of the INSERT when a record with the client-chosen id already exists (locked
   * FOR UPDATE in the transaction). Return a result to answer with it (default status 200:
   * e.g. a gateway re-registering itself after a restart), or null for the usual 409 conflict.
   */
  onExisting?: (
    c: OperationContext,
    actor: Actor,
    existing: RecordView,
    input: Record<string, unknown>,
  ) => Promise<HandlerResult | null>;
}

export interface UpdateActionDecl {
  access: AccessRule;
  /**
   * false: no wrapping transaction; `c.tx` is `c.app.db` (for handlers that open their own
   * transactions, e.g. log promotion on PGlite's single connection). Default true.
   */
  transaction?: boolean;
  summary?: string;
  arguments?: Record<string, ArgumentDecl>;
  set?: (input: Record<string, unknown>, c: OperationContext, actor: Actor) => Record<string, unknown>;
  handler?: (
    c: OperationContext,
    actor: Actor,
    record: RecordView,
    input: Record<string, unknown>,
  ) => Promise<HandlerResult>;
}

export interface DeleteActionDecl {
  access: AccessRule;
  /**
   * false: no wrapping transaction; `c.tx` is `c.app.db` (for handlers that open their own
   * transactions, e.g. log promotion on PGlite's single connection). Default true.
   */
  transaction?: boolean;
  summary?: string;
  handler?: (
    c: OperationContext,
    actor: Actor,
    record: RecordView,
    input: Record<string, unknown>,
  ) => Promise<HandlerResult>;
}

/**
 * A named operation: `PATCH /<base>/:id/<path>` (member) or `POST /<base>/<path>` (collection).
 * Either a state transition (`transition`), a custom `handler`, or both (the transition is
 * checked and applied first, then the handler runs in the same transaction).
 */
export interface OperationDecl {
  /** Operation name shown in errors and OpenAPI, e.g. "activate", "drain/start". */
  name: string;
  method?: "PATCH" | "POST";
  /**
   * Path below `/:id` (member) or below the base (collection), e.g. "/drain/start". Without a
   * path the operation has no HTTP route: it runs only through `runAction` (jobs, the CLI,
   * domain code), with the same policy, transition check and hooks.
   */
  path?: string;
  /** "member" (default) operates on one record; "collection" has no id. */
  target?: "member" | "collection";
  access: AccessRule;
  summary?: string;
  /** Arguments accepted in `data.attributes` (or directly under `data` when `bodyStyle` is "data"). */
  arguments?: Record<string, ArgumentDecl>;
  /** "attributes" (default): `{"data":{"type","id"?,"attributes":{...}}}`; "data": args directly under `data`. */
  bodyStyle?: "attributes" | "data";
  /** Name of a transition of the resource's state machine. */
  transition?: string;
  /** Attribute changes applied with the transition (or alone), e.g. `{ is_healthy: true, last_seen: now }`. */
  set?: (
    input: Record<string, unknown>,
    c: OperationContext,
    actor: Actor,
    record: RecordView | null,
  ) => Record<string, unknown>;
  handler?: (
    c: OperationContext,
    actor: Actor,
    record: RecordView | null,
    input: Record<string, unknown>,
  ) => Promise<HandlerResult>;
  /** Success status (default 200). */
  status?: number;
  /**
   * false: no wrapping transaction; `c.tx` is `c.app.db` (for handlers that open their own
   * transactions, e.g. log promotion on PGlite's single connection). Default true.
   */
  transaction?: boolean;
}

/** Read policy. */
export interface ReadPolicyDecl {
  access: AccessRule;
  /**
   * "forbid" (default): the access rule is enforced (401/403).
   * "hide": credentials optional; a caller lacking the rule gets an empty `data` list and 404 on
   * detail reads (event rules, spec 4.1 rule behaviours 2–3). The route is declared
   * `{ optional: true, permission }`.
   */
  whenDenied?: "forbid" | "hide";
}

export interface HookEvent {
  action: "create" | "update" | "delete" | "operation";
  operation: string;
  /** Record after the write (null after delete). */
  record: RecordView | null;
  /** Record before the write (null on create). */
  before: RecordView | null;
}

export interface HooksDecl {
  /** Before the default INSERT, in the transaction; may throw a typed error or amend input. */
  beforeCreate?: (c: OperationContext, actor: Actor, input: Record<string, unknown>) => Promise<void> | void;
  /**
   * Before the default UPDATE, in the transaction, with the record as stored; may throw a
   * typed error or amend input (e.g. keep write-only secrets the client did not resend).
   */
  beforeUpdate?: (
    c: OperationContext,
    actor: Actor,
    before: RecordView,
    input: Record<string, unknown>,
  ) => Promise<void> | void;
  /** After any write, in the same transaction. */
  afterWrite?: (c: OperationContext, actor: Actor, event: HookEvent) => Promise<void> | void;
  /** After the transaction committed (cache invalidation, events). Errors are logged, not raised. */
  afterCommit?: (app: AppContext, actor: Actor, event: HookEvent) => Promise<void> | void;
}

export interface IdDecl {
  /** Column(s) of the primary key. Several columns → composite opaque id (telemetry). */
  column: string | readonly string[];
  type: "string" | "uuid" | "integer";
  /**
   * How create gets the id: "db" (the column default, e.g. gen_random_uuid()), "uuid" (the
   * engine generates one), "client" (`data.id`), or an attribute name whose value is the id
   * (agents: `uid`).
   */
  generate?: "db" | "uuid" | "client" | { attribute: string };
}

export interface ResourceDecl {
  /** JSON:API type, e.g. "gateway". */
  type: string;
  /** Base path under /api/v2, e.g. "/gateways". */
  base: string;
  /** Table (optionally schema-qualified as "schema.table"). */
  table: string;
  /** OpenAPI tag (default: the type). */
  tag?: string;
  description?: string;
  /** Extra named schemas published in the OpenAPI document (e.g. per-type config schemas). */
  schemas?: Record<string, Record<string, unknown>>;
  id: IdDecl;
  attributes: Record<string, AttributeDecl>;
  relationships?: Record<string, RelationshipDecl>;
  /** e.g. "-last_seen,id"; default "id". The id is always appended as the final tiebreaker. */
  defaultSort?: string;
  /** Pagination of the index list (and of collections without their own). */
  pagination?: PaginationDecl;
  /**
   * Read-only telemetry collection: index route only, offset pagination always applied
   * (default 100, max 1000), no actions.
   */
  readOnly?: boolean;
  /** Which read routes exist (default both). */
  routes?: { index?: boolean; read?: boolean };
  /** Extra query parameters of the index and detail reads. */
  listParams?: Record<string, QueryParamDecl>;
  readParams?: Record<string, QueryParamDecl>;
  /** Detail read looks the record up by this query parameter's value against `lookupAttribute` (agents: uid). */
  readLookup?: { query: string; attribute: string };
  /** Rows every query sees (e.g. partitions, soft-deleted rows hidden). */
  scope?: (q: QueryHelpers) => SqlFragment | null;
  collections?: readonly CollectionDecl[];
  actions?: {
    create?: CreateActionDecl;
    update?: UpdateActionDecl;
    delete?: DeleteActionDecl;
  };
  operations?: readonly OperationDecl[];
  stateMachine?: StateMachine;
  policies: { read: ReadPolicyDecl };
  hooks?: HooksDecl;
  /** Column set to now() on every write (e.g. "updated_at", "modified_time"). */
  touchColumn?: string;
}

const IDENT = /^[a-z_][a-z0-9_]*$/;

function checkIdent(what: string, name: string): void {
  if (!IDENT.test(name)) throw new Error(`jsonapi: unsafe ${what} '${name}' (must match ${IDENT})`);
}

/** Column an attribute reads from. */
export function columnOf(name: string, a: AttributeDecl): string {
  return a.column ?? name;
}

export function isFilterable(a: AttributeDecl): boolean {
  if (a.computed) return false;
  return a.filterable ?? true;
}

export function isSortable(a: AttributeDecl): boolean {
  if (a.computed) return false;
  if (a.sortable !== undefined) return a.sortable;
  return !(a.type === "object" || a.type === "array" || a.type === "any");
}

function nullPrototype<V>(map: Record<string, V>): Record<string, V> {
  return Object.freeze(Object.assign(Object.create(null) as Record<string, V>, map));
}

/**
 * Validate and freeze a declaration. Throws at import time on unsafe identifiers, enum
 * attributes without values, unknown default-sort fields or transitions, so a broken
 * declaration never reaches a request.
 */
export function defineResource<T extends ResourceDecl>(decl: T): Readonly<T> {
  if (!/^[a-z][a-z0-9_-]*$/.test(decl.type)) throw new Error(`jsonapi: bad type '${decl.type}'`);
  if (!/^(\/[a-z0-9_-]+)+$/.test(decl.base)) throw new Error(`jsonapi: bad base path '${decl.base}'`);
  for (const part of decl.table.split(".")) checkIdent("table", part);
  const idCols = typeof decl.id.column === "string" ? [decl.id.column] : decl.id.column;
  for (const c of idCols) checkIdent("id column", c);
  for (const [name, a] of Object.entries(decl.attributes)) {
    checkIdent("attribute", name);
    if (!a.computed) checkIdent("column", columnOf(name, a));
    if (a.type === "enum" && (!a.values || a.values.length === 0)) {
      throw new Error(`jsonapi: ${decl.type}.${name}: enum attribute needs values`);
    }
    if (a.computed && (a.create || a.update || a.required)) {
      throw new Error(`jsonapi: ${decl.type}.${name}: computed attributes are read-only`);
    }
  }
  for (const [name, r] of Object.entries(decl.relationships ?? {})) {
    checkIdent("relationship", name);
    if (decl.attributes[name])
      throw new Error(`jsonapi: ${decl.type}: '${name}' is both attribute and relationship`);
    for (const c of [r.column, r.targetColumn, r.foreignColumn, r.localColumn])
      if (c) checkIdent("column", c);
    if (r.kind === "belongsTo" && !r.column)
      throw new Error(`jsonapi: ${decl.type}.${name}: belongsTo needs column`);
    if (r.kind === "hasMany" && !r.foreignColumn)
      throw new Error(`jsonapi: ${decl.type}.${name}: hasMany needs foreignColumn`);
  }
  if (decl.defaultSort) {
    for (const key of decl.defaultSort.split(",")) {
      const f = key.replace(/^-/, "");
      if (f !== "id" && !decl.attributes[f])
        throw new Error(`jsonapi: ${decl.type}: defaultSort field '${f}' unknown`);
    }
  }
  for (const op of decl.operations ?? []) {
    if (op.transition && !decl.stateMachine?.transitions[op.transition]) {
      throw new Error(
        `jsonapi: ${decl.type}: operation '${op.name}' names unknown transition '${op.transition}'`,
      );
    }
  }
  if (decl.touchColumn) checkIdent("touch column", decl.touchColumn);
  // Request data names attributes, relationships and parameters (filter[x], sort=x, fields):
  // looked up in null-prototype maps, `toString` or `constructor` is simply unknown.
  const mutable = decl as ResourceDecl;
  mutable.attributes = nullPrototype(decl.attributes);
  if (decl.relationships) mutable.relationships = nullPrototype(decl.relationships);
  if (decl.listParams) mutable.listParams = nullPrototype(decl.listParams);
  if (decl.readParams) mutable.readParams = nullPrototype(decl.readParams);
  if (decl.stateMachine)
    mutable.stateMachine = {
      ...decl.stateMachine,
      transitions: nullPrototype(decl.stateMachine.transitions),
    };
  return Object.freeze(decl);
}
