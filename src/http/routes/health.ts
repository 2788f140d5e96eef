import { accessState } from "../../access/feature.ts";
import type { Feature } from "../../kernel/feature.ts";
import { VERSION } from "../../kernel/version.ts";
import { storageFullRecently } from "../../storage/db-error.ts";

const PING_TIMEOUT_MS = 2000;

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

function rateStoreHealth(ctx: Parameters<NonNullable<Feature["routes"]>>[1]): {
  backend: string;
  status: "ok" | "degraded";
  detail?: string;
} {
  try {
    const store = accessState(ctx).limiter.store;
    return { backend: store.kind, ...(store.health?.() ?? { status: "ok" }) };
  } catch {
    return { backend: "none", status: "ok" };
  }
}

/** `GET /health` readiness (database answers) and `GET /health/live` liveness. Unauthenticated. */
export const healthFeature: Feature = {
  name: "health",
  routes(app, ctx) {
    const started = Date.now();
    const config = { access: { public: true }, rateLimit: "none" } as const;

    app.get("/health", { config }, async (_request, reply) => {
      const t0 = performance.now();
      try {
        await withTimeout(ctx.db.ping(), PING_TIMEOUT_MS);
        const budgets = rateStoreHealth(ctx);
        const full = storageFullRecently();
        return reply.code(200).send({
          // Degraded: serving, with a dependency down (or writes failing) and what still works.
          status: budgets.status === "ok" && !full ? "ok" : "degraded",
          rate_limit_store: budgets,
          ...(full
            ? { storage: { status: "full", detail: "writes failed for lack of disk space in the last 30 s" } }
            : {}),
          version: VERSION,
          database: {
            status: "ok",
            backend: ctx.db.kind,
            latency_ms: Math.round((performance.now() - t0) * 100) / 100,
          },
          uptime_seconds: Math.round((Date.now() - started) / 1000),
        });
      } catch (err) {
        return reply.code(503).send({
          status: "unavailable",
          version: VERSION,
          database: { status: "error", backend: ctx.db.kind, error: (err as Error).message },
        });
      }
    });

    app.get("/health/live", { config }, async () => ({ status: "ok" }));
  },
};
