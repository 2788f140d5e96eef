import type { Feature } from "../kernel/feature.ts";
import { sweepStaleTemporaries } from "./renderer-store.ts";
import { dashboardRoutes } from "./routes.ts";

/** Signed dashboard packages: publishing, lifecycle, verification, renderer assets and data frames. */
export const dashboardsFeature: Feature = {
  name: "dashboards",
  async routes(app, ctx) {
    await dashboardRoutes(app, ctx);
  },
  async start(ctx) {
    // Uploads cut off by a crash leave temporary files; they are never referenced, only removed.
    const removed = await sweepStaleTemporaries(ctx.config.dataDir).catch((err) => {
      ctx.log.warn({ err }, "stale dashboard upload files could not be removed");
      return 0;
    });
    if (removed > 0) ctx.log.info({ removed }, "removed stale dashboard upload files");
  },
};
