/**
 * The registry of declared resources. Domain modules call `registerResource(decl)` at import
 * time; the JSON:API feature builds routes from `allResources()` when its routes() runs, after
 * every domain module has been imported (src/jsonapi/resources.ts), so registration order
 * does not matter (relationships are resolved lazily by type name).
 */
import type { ResourceDecl } from "./define.ts";

const byType = new Map<string, ResourceDecl>();

export function registerResource(decl: ResourceDecl): ResourceDecl {
  const existing = byType.get(decl.type);
  if (existing && existing !== decl) throw new Error(`jsonapi: type '${decl.type}' registered twice`);
  for (const other of byType.values()) {
    if (other !== decl && other.base === decl.base) {
      throw new Error(`jsonapi: base path '${decl.base}' used by '${other.type}' and '${decl.type}'`);
    }
  }
  byType.set(decl.type, decl);
  return decl;
}

export function getResource(type: string): ResourceDecl | undefined {
  return byType.get(type);
}

/** Every registered resource, sorted by base path (stable route and OpenAPI order). */
export function allResources(): ResourceDecl[] {
  return [...byType.values()].sort((a, b) => a.base.localeCompare(b.base));
}

/** Tests only: forget a registration. */
export function unregisterResource(type: string): void {
  byType.delete(type);
}
