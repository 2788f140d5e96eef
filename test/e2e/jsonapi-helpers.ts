/**
 * Helpers for the JSON:API conformance suites: a thin client around fetch that speaks the
 * v2 media type and (de)serialises with kitsu-core, a real JSON:API client library.
 */
import * as kitsu from "kitsu-core";
import { expect } from "vitest";
import type { TestServer } from "../helpers/server.ts";

// kitsu-core's bundled .d.ts re-exports extensionless paths that NodeNext cannot resolve.
const { serialise, deserialise } = kitsu as unknown as {
  serialise: (type: string, data: Record<string, unknown>, method: string) => unknown;
  deserialise: (doc: unknown) => unknown;
};

export const J = "application/vnd.api+json";

export interface ErrorItem {
  status: string;
  code: string;
  title: string;
  detail: string;
  source?: { parameter?: string; pointer?: string; header?: string };
  meta?: Record<string, unknown>;
}

export interface Doc {
  data?: unknown;
  included?: { type: string; id: string; attributes: Record<string, unknown> }[];
  links?: Record<string, string | null>;
  meta?: Record<string, unknown>;
  errors?: ErrorItem[];
}

export interface Answer {
  status: number;
  type: string | null;
  doc: Doc;
}

/** Encode a nested query object with indexed arrays of objects (`filter[and][0][x][eq]=1`). */
export function qs(obj: Record<string, unknown>): string {
  const out: string[] = [];
  const walk = (v: unknown, key: string) => {
    if (Array.isArray(v)) {
      v.forEach((item, i) => {
        if (item !== null && typeof item === "object") walk(item, `${key}[${i}]`);
        else out.push(`${key}[]=${encodeURIComponent(String(item))}`);
      });
    } else if (v !== null && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) walk(x, key ? `${key}[${k}]` : k);
    } else out.push(`${key}=${encodeURIComponent(String(v))}`);
  };
  walk(obj, "");
  return out.join("&");
}

export class Client {
  constructor(
    readonly server: TestServer,
    readonly token: string | null,
  ) {}

  headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { accept: J, ...extra };
    if (this.token) h.authorization = `Bearer ${this.token}`;
    return h;
  }

  async req(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    const init: RequestInit = {
      method,
      headers: this.headers(body !== undefined ? { "content-type": J, ...headers } : headers),
    };
    if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
    const res = await this.server.fetch(`/api/v2${path}`, init);
    const text = await res.text();
    return {
      status: res.status,
      type: res.headers.get("content-type"),
      doc: text ? (JSON.parse(text) as Doc) : {},
    };
  }

  get(path: string, query?: Record<string, unknown> | string): Promise<Answer> {
    const q = query === undefined ? "" : typeof query === "string" ? query : qs(query);
    return this.req("GET", q ? `${path}?${q}` : path);
  }

  /** POST a resource serialised by kitsu-core. */
  create(type: string, base: string, attrs: Record<string, unknown>): Promise<Answer> {
    return this.req("POST", base, serialise(type, attrs, "POST"));
  }

  patch(path: string, type: string, attrs: Record<string, unknown> = {}, id?: string): Promise<Answer> {
    const body = id ? serialise(type, { id, ...attrs }, "PATCH") : { data: { type, attributes: attrs } };
    return this.req("PATCH", path, body);
  }
}

/** kitsu-core deserialisation of a document (flattened attributes, linked includes). */
export function des(doc: Doc): { data: Record<string, unknown> | Record<string, unknown>[] } {
  return deserialise(doc as never) as { data: Record<string, unknown> | Record<string, unknown>[] };
}

export function ids(a: Answer): string[] {
  expect(a.status, JSON.stringify(a.doc)).toBe(200);
  return (a.doc.data as { id: string }[]).map((d) => d.id);
}

/** Assert a JSON:API errors document with this status and (optionally) source.parameter. */
export function expectError(a: Answer, status: number, parameter?: string): ErrorItem {
  expect(a.status, JSON.stringify(a.doc)).toBe(status);
  expect(a.type).toMatch(/^application\/vnd\.api\+json/);
  const e = a.doc.errors?.[0] as ErrorItem;
  expect(e).toBeDefined();
  expect(e.status).toBe(String(status));
  expect(typeof e.code).toBe("string");
  expect(typeof e.title).toBe("string");
  expect(typeof e.detail).toBe("string");
  if (parameter !== undefined) expect(e.source?.parameter).toBe(parameter);
  return e;
}
