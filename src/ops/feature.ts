/**
 * The operations domain's hook into the server (issue 19): request counting, `/metrics` and
 * `/health/detail` (metrics.ts), and the admin backup download (backup-route.ts). The CLI side
 * (backup, restore, db copy) is in cli.ts.
 */
import type { Feature } from "../kernel/feature.ts";
import { backupRoutes } from "./backup-route.ts";
import { metricsRoutes } from "./metrics.ts";

export function createOpsFeature(): Feature {
  return {
    name: "ops",
    routes(app, ctx) {
      metricsRoutes(app, ctx);
      backupRoutes(app, ctx);
    },
  };
}
