import type { Feature } from "../kernel/feature.ts";
import { dashboardRoutes } from "./routes.ts";

/** Signed dashboard packages: publishing, lifecycle, verification, renderer assets and data frames. */
export const dashboardsFeature: Feature = {
  name: "dashboards",
  async routes(app, ctx) {
    await dashboardRoutes(app, ctx);
  },
};
