/**
 * The browser-module host (spec 4.7, interface `dashboard-browser-module-v1`). It fetches a
 * package's renderer, checks its SHA-256 against the package's content_hash before any of it
 * runs, imports it from a Blob URL of exactly those bytes, and calls the manifest's entrypoint
 * with (root element, host record, api). Frames are fetched by the host: JSON frames through
 * POST /api/query, Arrow frames from the package's frames endpoint (an Arrow IPC stream,
 * pagination in x-srql-* headers), decoded here with apache-arrow.
 */
import type { Table } from "apache-arrow";
import { ApiError, request } from "../api.ts";

type Json = Record<string, unknown>;

export interface DataFrameDecl {
  id: string;
  query: string;
  encoding: "json" | "json_rows" | "arrow_ipc";
  required?: boolean;
  limit?: number;
}

export interface InstalledDashboard {
  id: string;
  dashboard_id: string;
  name: string;
  version: string;
  description: string | null;
  route_slug: string;
  content_hash: string;
  renderer_url: string;
  entrypoint: string;
  capabilities: string[];
  data_frames: DataFrameDecl[];
  settings: Json;
}

export interface Pagination {
  next_cursor: string | null;
  prev_cursor: string | null;
  limit: number;
}

/** What `api.frame(id)` returns (the SDK's frame object, minus base64 transport fields). */
export interface Frame {
  id: string;
  query: string;
  encoding: DataFrameDecl["encoding"];
  status: "loading" | "ok" | "error";
  /** Rows as plain objects (decoded from Arrow for arrow_ipc frames). */
  results: Json[];
  rows: Json[];
  row_count: number;
  /** Arrow frames: the decoded table and the raw IPC bytes. */
  table: Table | null;
  payload: Uint8Array | null;
  refreshed_at: string | null;
  error: string | null;
  pagination: Pagination;
}

export interface DashboardInstance {
  destroy(): void;
}

type Entrypoint = (root: HTMLElement, host: Json, api: DashboardApi) => DashboardInstance | undefined;

export interface DashboardApi {
  settings(): Json;
  frame(id: string): Frame | null;
  frames(): Frame[];
  /** Called after any frame changes; returns an unsubscribe function. */
  subscribe(listener: (frame: Frame) => void): () => void;
  srql: {
    /** Replace a frame's query (the first frame's unless named) and read it from offset 0. */
    update(query: string, frameId?: string): Promise<void>;
    /** Re-run one frame at a cursor from its pagination. */
    page(frameId: string, cursor: string): Promise<void>;
    query(frameId?: string): string | null;
  };
  theme(): "dark" | "light";
}

export class IntegrityError extends Error {}

function hex(buf: ArrayBuffer): string {
  return [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Fetch the renderer and check it is the published bytes (fails closed without WebCrypto). */
export async function fetchVerifiedRenderer(
  pkg: InstalledDashboard,
  signal?: AbortSignal,
): Promise<ArrayBuffer> {
  const res = await fetch(pkg.renderer_url, { credentials: "same-origin", signal });
  if (!res.ok) throw new IntegrityError(`the renderer could not be loaded (HTTP ${res.status})`);
  const bytes = await res.arrayBuffer();
  if (!globalThis.crypto?.subtle) {
    throw new IntegrityError("this page is not a secure context (HTTPS), so the renderer cannot be checked");
  }
  const digest = hex(await crypto.subtle.digest("SHA-256", bytes));
  if (digest !== pkg.content_hash) {
    throw new IntegrityError(`renderer integrity check failed: expected ${pkg.content_hash}, got ${digest}`);
  }
  return bytes;
}

function currentTheme(): "dark" | "light" {
  return document.documentElement.dataset.theme === "dark" ? "dark" : "light";
}

function emptyFrame(d: DataFrameDecl, query: string): Frame {
  return {
    id: d.id,
    query,
    encoding: d.encoding,
    status: "loading",
    results: [],
    rows: [],
    row_count: 0,
    table: null,
    payload: null,
    refreshed_at: null,
    error: null,
    pagination: { next_cursor: null, prev_cursor: null, limit: d.limit ?? 0 },
  };
}

function csrfToken(): string {
  const m = document.cookie.match(/(?:^|;\s*)netmon_csrf=([^;]+)/);
  return m ? decodeURIComponent(m[1] ?? "") : "";
}

export class DashboardHost {
  private readonly frames = new Map<string, Frame>();
  private readonly queries = new Map<string, string>();
  private readonly cursors = new Map<string, string>();
  private readonly listeners = new Set<(f: Frame) => void>();
  private readonly abort = new AbortController();
  private instance: DashboardInstance | null = null;
  private blobUrl: string | null = null;
  private destroyed = false;
  private readonly onRefresh = () => {
    // `frames:refresh`: stored cursors are forgotten and every frame reads from offset 0.
    this.cursors.clear();
    void this.loadAll();
  };

  constructor(
    private readonly pkg: InstalledDashboard,
    private readonly root: HTMLElement,
  ) {
    for (const d of pkg.data_frames) {
      this.queries.set(d.id, d.query);
      this.frames.set(d.id, emptyFrame(d, d.query));
    }
  }

  private can(capability: string): boolean {
    return this.pkg.capabilities.includes(capability);
  }

  private notify(frame: Frame): void {
    for (const l of this.listeners) {
      try {
        l(frame);
      } catch (err) {
        console.error("dashboard frame listener failed", err);
      }
    }
    this.root.dispatchEvent(new CustomEvent("frames:updated", { detail: { id: frame.id } }));
  }

  readonly api: DashboardApi = {
    settings: () => ({ ...this.pkg.settings }),
    frame: (id) => this.frames.get(id) ?? null,
    frames: () => [...this.frames.values()],
    subscribe: (listener) => {
      this.listeners.add(listener);
      return () => this.listeners.delete(listener);
    },
    theme: currentTheme,
    srql: {
      // Argument errors throw synchronously (the SDK contract: a missing cursor throws); the
      // returned promise settles when the frame has been re-read.
      update: (query, frameId) => {
        if (typeof query !== "string" || query.trim() === "")
          throw new TypeError("srql.update needs a query");
        if (!this.can("srql.execute")) return Promise.resolve();
        const id = frameId ?? this.pkg.data_frames[0]?.id;
        if (!id || !this.frames.has(id)) throw new TypeError(`no data frame ${String(frameId)}`);
        this.queries.set(id, query);
        this.cursors.delete(id);
        return this.load(id);
      },
      page: (frameId, cursor) => {
        if (typeof cursor !== "string" || cursor === "")
          throw new TypeError("srql.page needs a non-empty cursor");
        if (!this.can("srql.execute")) return Promise.resolve();
        if (!this.frames.has(frameId)) throw new TypeError(`no data frame ${frameId}`);
        this.cursors.set(frameId, cursor);
        return this.load(frameId);
      },
      query: (frameId) => this.queries.get(frameId ?? this.pkg.data_frames[0]?.id ?? "") ?? null,
    },
  };

  async mount(): Promise<void> {
    const bytes = await fetchVerifiedRenderer(this.pkg, this.abort.signal);
    if (this.destroyed) return;
    this.blobUrl = URL.createObjectURL(new Blob([bytes], { type: "text/javascript" }));
    const mod = (await import(/* @vite-ignore */ this.blobUrl)) as Record<string, unknown>;
    if (this.destroyed) return;
    const entry = mod[this.pkg.entrypoint];
    if (typeof entry !== "function") {
      throw new Error(`the renderer does not export ${this.pkg.entrypoint}()`);
    }
    this.root.addEventListener("frames:refresh", this.onRefresh);
    const host = {
      theme: currentTheme(),
      dashboard: {
        id: this.pkg.dashboard_id,
        package_id: this.pkg.id,
        version: this.pkg.version,
        name: this.pkg.name,
      },
      settings: this.api.settings(),
      capabilities: [...this.pkg.capabilities],
      interface_version: "dashboard-browser-module-v1",
    };
    this.instance = (entry as Entrypoint)(this.root, host, this.api) ?? null;
    await this.loadAll();
  }

  private async loadAll(): Promise<void> {
    await Promise.all(this.pkg.data_frames.map((d) => this.load(d.id)));
  }

  private async load(id: string): Promise<void> {
    const decl = this.pkg.data_frames.find((d) => d.id === id);
    if (!decl || this.destroyed) return;
    const query = this.queries.get(id) ?? decl.query;
    const cursor = this.cursors.get(id);
    const previous = this.frames.get(id) ?? emptyFrame(decl, query);
    this.frames.set(id, { ...previous, query, status: "loading" });
    let next: Frame;
    try {
      next =
        decl.encoding === "arrow_ipc"
          ? await this.loadArrow(decl, query, cursor)
          : await this.loadJson(decl, query, cursor);
    } catch (err) {
      if (this.destroyed) return;
      const message = err instanceof ApiError ? err.problem.message : String((err as Error)?.message ?? err);
      next = { ...previous, query, status: "error", error: message };
    }
    if (this.destroyed) return;
    this.frames.set(id, next);
    this.notify(next);
  }

  private async loadJson(decl: DataFrameDecl, query: string, cursor: string | undefined): Promise<Frame> {
    const body: Json = { query };
    if (decl.limit) body.limit = decl.limit;
    if (cursor) body.cursor = cursor;
    const res = await request<{ results: Json[]; pagination: Pagination }>("POST", "/api/query", body);
    return {
      ...emptyFrame(decl, query),
      status: "ok",
      results: res.results,
      rows: res.results,
      row_count: res.results.length,
      refreshed_at: new Date().toISOString(),
      pagination: res.pagination,
    };
  }

  private async loadArrow(decl: DataFrameDecl, query: string, cursor: string | undefined): Promise<Frame> {
    const body: Json = {};
    if (query !== decl.query) body.query = query;
    if (cursor) body.cursor = cursor;
    const res = await fetch(
      `/api/v1/dashboard-packages/${encodeURIComponent(this.pkg.id)}/frames/${encodeURIComponent(decl.id)}`,
      {
        method: "POST",
        credentials: "same-origin",
        signal: this.abort.signal,
        headers: {
          "content-type": "application/json",
          accept: "application/vnd.apache.arrow.stream",
          "x-csrf-token": csrfToken(),
        },
        body: JSON.stringify(body),
      },
    );
    if (!res.ok) {
      const problem = (await res.json().catch(() => ({}))) as Json;
      throw new Error(String(problem.message ?? problem.error ?? `HTTP ${res.status}`));
    }
    const payload = new Uint8Array(await res.arrayBuffer());
    const { tableFromIPC } = await import("apache-arrow");
    const table = tableFromIPC(payload);
    const rows = table.toArray().map((r) => (r as { toJSON(): Json }).toJSON());
    const h = (name: string) => res.headers.get(name) || null;
    return {
      ...emptyFrame(decl, query),
      status: "ok",
      results: rows,
      rows,
      row_count: rows.length,
      table,
      payload,
      refreshed_at: new Date().toISOString(),
      pagination: {
        next_cursor: h("x-srql-next-cursor"),
        prev_cursor: h("x-srql-prev-cursor"),
        limit: Number(h("x-srql-limit") ?? decl.limit ?? 0),
      },
    };
  }

  /** Release the renderer (its destroy()), listeners, in-flight requests and the Blob URL. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.abort.abort();
    this.root.removeEventListener("frames:refresh", this.onRefresh);
    this.listeners.clear();
    try {
      this.instance?.destroy();
    } catch (err) {
      console.error("dashboard destroy() failed", err);
    }
    this.instance = null;
    if (this.blobUrl) URL.revokeObjectURL(this.blobUrl);
    this.blobUrl = null;
    this.root.replaceChildren();
  }
}
