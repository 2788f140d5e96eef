/**
 * The console's only way to the server: the public HTTP API, with the session cookie the sign-in
 * page set. Writes carry the CSRF token from the readable `netmon_csrf` cookie. A 401 means the
 * session ended: we go to the sign-in page and come back to the same URL afterwards.
 */

export interface ApiProblem {
  status: number;
  code: string;
  message: string;
  /** JSON:API error source pointers, e.g. "/data/attributes/name" → message. */
  fields: Record<string, string>;
  retryAfter?: number;
}

export class ApiError extends Error {
  constructor(readonly problem: ApiProblem) {
    super(problem.message);
  }
}

const JSONAPI = "application/vnd.api+json";

function csrfToken(): string {
  const m = document.cookie.match(/(?:^|;\s*)netmon_csrf=([^;]+)/);
  return m ? decodeURIComponent(m[1] ?? "") : "";
}

export function signInUrl(): string {
  const back = location.pathname + location.search;
  return `/users/log-in?return_to=${encodeURIComponent(back)}`;
}

type Json = Record<string, unknown>;

function problemOf(status: number, body: unknown, retryAfter?: number): ApiProblem {
  const fields: Record<string, string> = Object.create(null);
  if (body && typeof body === "object") {
    const b = body as Json;
    if (Array.isArray(b.errors) && b.errors.length > 0) {
      const errors = b.errors as Json[];
      for (const e of errors) {
        const pointer = (e.source as Json | undefined)?.pointer;
        const detail = String(e.detail ?? e.title ?? "invalid");
        if (typeof pointer === "string") fields[pointer.split("/").pop() ?? pointer] = detail;
      }
      const first = errors[0] ?? {};
      return {
        status,
        code: String(first.code ?? status),
        message: errors.map((e) => String(e.detail ?? e.title ?? "")).join("; "),
        fields,
        retryAfter,
      };
    }
    if (typeof b.error === "string") {
      const msg = typeof b.message === "string" ? b.message : b.error;
      const pos = b.position;
      return {
        status,
        // POST /api/query answers {error: <message>, code} (spec 7.2); other routes {error: <code>, message}.
        code: typeof b.code === "string" ? b.code : b.error,
        message: msg + (typeof pos === "number" ? ` (at ${pos})` : ""),
        fields,
        retryAfter,
      };
    }
  }
  return { status, code: String(status), message: `HTTP ${status}`, fields, retryAfter };
}

let onRateLimited: ((seconds: number) => void) | undefined;
export function whenRateLimited(fn: (seconds: number) => void): void {
  onRateLimited = fn;
}

export async function request<T = unknown>(
  method: string,
  path: string,
  body?: unknown,
  opts: { jsonapi?: boolean } = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: opts.jsonapi ? JSONAPI : "application/json" };
  if (method !== "GET" && method !== "HEAD") headers["x-csrf-token"] = csrfToken();
  if (body !== undefined) headers["content-type"] = opts.jsonapi ? JSONAPI : "application/json";
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  if (res.status === 401) {
    location.assign(signInUrl());
    throw new ApiError({ status: 401, code: "unauthorized", message: "Your session ended", fields: {} });
  }
  const text = await res.text();
  const parsed: unknown = text ? safeJson(text) : undefined;
  if (!res.ok) {
    const retry = Number(res.headers.get("retry-after") ?? "");
    const problem = problemOf(res.status, parsed, Number.isFinite(retry) && retry > 0 ? retry : undefined);
    if (res.status === 429 && problem.retryAfter) onRateLimited?.(problem.retryAfter);
    throw new ApiError(problem);
  }
  return parsed as T;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export const api = {
  get: <T = unknown>(path: string) => request<T>("GET", path),
  post: <T = unknown>(path: string, body?: unknown) => request<T>("POST", path, body ?? {}),
  patch: <T = unknown>(path: string, body?: unknown) => request<T>("PATCH", path, body ?? {}),
  put: <T = unknown>(path: string, body?: unknown) => request<T>("PUT", path, body ?? {}),
  del: <T = unknown>(path: string) => request<T>("DELETE", path),
};

// ---- JSON:API v2 -------------------------------------------------------------------------------

export interface Row {
  id: string;
  [attr: string]: unknown;
}

export interface Page<T> {
  rows: T[];
  next?: string;
  prev?: string;
  total?: number;
}

interface Resource {
  id: string;
  type: string;
  attributes?: Json;
}

function flatten(r: Resource): Row {
  return { ...(r.attributes ?? {}), id: r.id };
}

function cursorOf(link: unknown, name: string): string | undefined {
  if (typeof link !== "string") return undefined;
  const url = new URL(link, location.origin);
  return url.searchParams.get(name) ?? undefined;
}

export const v2 = {
  async list(path: string, params: Record<string, string | undefined> = {}): Promise<Page<Row>> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") qs.set(k, v);
    const doc = await request<{ data: Resource[]; links?: Json; meta?: Json }>(
      "GET",
      `/api/v2/${path}${qs.size ? `?${qs}` : ""}`,
      undefined,
      { jsonapi: true },
    );
    const total = (doc.meta?.page as Json | undefined)?.total;
    return {
      rows: doc.data.map(flatten),
      next: cursorOf(doc.links?.next, "page[after]"),
      prev: cursorOf(doc.links?.prev, "page[before]"),
      total: typeof total === "number" ? total : undefined,
    };
  },
  async get(path: string): Promise<Row> {
    const doc = await request<{ data: Resource }>("GET", `/api/v2/${path}`, undefined, { jsonapi: true });
    return flatten(doc.data);
  },
  async create(path: string, type: string, attributes: Json): Promise<Row> {
    const doc = await request<{ data: Resource }>(
      "POST",
      `/api/v2/${path}`,
      { data: { type, attributes } },
      { jsonapi: true },
    );
    return flatten(doc.data);
  },
  async update(path: string, type: string, id: string, attributes: Json = {}): Promise<Row> {
    const doc = await request<{ data: Resource }>(
      "PATCH",
      `/api/v2/${path}`,
      { data: { type, id, attributes } },
      { jsonapi: true },
    );
    return flatten(doc.data);
  },
  async remove(path: string): Promise<void> {
    await request("DELETE", `/api/v2/${path}`, undefined, { jsonapi: true });
  },
};

// ---- SRQL ----------------------------------------------------------------------------------------

export interface VizColumn {
  name: string;
  type: string;
  semantic?: string;
}
export interface QueryResult {
  results: Json[];
  pagination: { next_cursor: string | null; prev_cursor: string | null; limit: number };
  viz?: { columns: VizColumn[]; suggestions: Json[] };
}

export function srql(query: string, cursor?: string, direction?: "next" | "prev"): Promise<QueryResult> {
  const body: Json = { query };
  if (cursor) {
    body.cursor = cursor;
    if (direction) body.direction = direction;
  }
  return request<QueryResult>("POST", "/api/query", body);
}

export interface Me {
  user: { id: string; email: string; display_name: string | null; role: string };
  role: string;
  permissions: string[];
}
