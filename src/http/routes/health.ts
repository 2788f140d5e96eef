import type { Feature } from "../../kernel/feature.ts";
import { VERSION } from "../../kernel/version.ts";

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
        return reply.code(200).send({
          status: "ok",
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
