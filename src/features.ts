import { createAccessFeature } from "./access/feature.ts";
import { alertingFeature } from "./alerting/feature.ts";
import { dashboardsFeature } from "./dashboards/feature.ts";
import { createConsoleFeature } from "./http/routes/console.ts";
import { healthFeature } from "./http/routes/health.ts";
import { createInventoryFeature } from "./inventory/feature.ts";
import { jsonapiFeature } from "./jsonapi/feature.ts";
import type { Feature } from "./kernel/feature.ts";
import { createMcpFeature } from "./mcp/feature.ts";
import { createMonitoringFeature } from "./monitoring/feature.ts";
import { createOpsFeature } from "./ops/feature.ts";
import { srqlFeature } from "./srql/feature.ts";
import { createStorageMaintenanceFeature } from "./storage/maintenance.ts";
import { createTelemetryFeature } from "./telemetry/feature.ts";

/**
 * Every domain the server runs, in registration order. Access comes first: its hooks
 * authenticate and rate-limit every route registered after it.
 */
export function allFeatures(): Feature[] {
  return [
    createAccessFeature(),
    // Self-metrics and backups. Its request-counting hook is a root hook, so it counts every
    // route, including those access registered before it (checked by self-metrics.test.ts).
    createOpsFeature(),
    healthFeature,
    createInventoryFeature(),
    srqlFeature,
    jsonapiFeature,
    createMonitoringFeature(),
    alertingFeature(),
    createTelemetryFeature(),
    createMcpFeature(),
    dashboardsFeature,
    createConsoleFeature(),
    // Autovacuum's rule for the embedded database, which has no autovacuum (a no-op on PostgreSQL).
    createStorageMaintenanceFeature(),
  ];
}
