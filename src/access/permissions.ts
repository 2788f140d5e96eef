import type { Role } from "./actor.ts";

/**
 * The permission catalog: every dotted key a route or domain may check, with the roles that
 * hold it by default. Role profiles grant or revoke keys relative to a base role's set.
 * Roles are cumulative in practice (viewer ⊂ operator ⊂ admin), but each key lists its roles
 * explicitly so the table reads like the original catalog.
 */
export interface PermissionDef {
  key: string;
  description: string;
  /** Catalog group for the role-profile editor. */
  section: string;
  roles: readonly Role[];
}

const V: readonly Role[] = ["viewer", "operator", "admin"];
const O: readonly Role[] = ["operator", "admin"];
const A: readonly Role[] = ["admin"];

function p(section: string, key: string, roles: readonly Role[], description: string): PermissionDef {
  return { key, section, roles, description };
}

export const PERMISSIONS: readonly PermissionDef[] = [
  p("devices", "devices.view", V, "View devices and their details"),
  p("devices", "devices.export", V, "Export devices (OCSF)"),
  p("devices", "devices.ingest", O, "Submit device updates from collectors"),
  p("devices", "devices.create", O, "Create devices"),
  p("devices", "devices.update", O, "Update devices"),
  p("devices", "devices.bulk_edit", O, "Edit many devices at once"),
  p("devices", "devices.delete", O, "Delete devices"),
  p("devices", "devices.bulk_delete", O, "Delete many devices at once"),
  p("devices", "devices.import", O, "Import devices"),
  p("devices", "identity.resolve", V, "Resolve addresses to device identities"),
  p("analytics", "analytics.view", V, "Run SRQL queries and read the catalog"),
  p("analytics", "analytics.manage_queries", O, "Manage saved queries"),
  p("services", "services.view", V, "View service checks"),
  p("services", "services.create", O, "Create service checks"),
  p("services", "services.update", O, "Update service checks"),
  p("services", "services.delete", O, "Delete service checks"),
  p("services", "services.run", O, "Run service checks on demand"),
  p("infrastructure", "infrastructure.view", V, "View gateways and agents"),
  p("infrastructure", "infrastructure.manage", O, "Manage gateways and agents"),
  p("observability", "observability.logs.view", V, "View logs"),
  p("observability", "telemetry.ingest", O, "Send logs, metrics and traces to the OTLP receivers"),
  p("observability", "observability.metrics.view", V, "View metrics"),
  p("observability", "observability.traces.view", V, "View traces"),
  p("observability", "observability.events.view", V, "View events"),
  p("observability", "observability.netflow.view", V, "View flows"),
  p("observability", "observability.alerts.view", V, "View alerts"),
  p("observability", "observability.alerts.manage", O, "Trigger and manage alerts"),
  p("observability", "alerts.acknowledge", O, "Acknowledge and resolve alerts"),
  p("observability", "observability.rules.view", V, "View alert and event rules"),
  p("observability", "observability.rules.create", O, "Create alert and event rules"),
  p("observability", "observability.rules.update", O, "Update alert and event rules"),
  p("observability", "observability.rules.delete", O, "Delete alert and event rules"),
  p("notifications", "notifications.channels.view", O, "View notification channels"),
  p("notifications", "notifications.channels.manage", A, "Manage notification channels"),
  p("notifications", "notifications.routes.view", O, "View notification routes"),
  p("notifications", "notifications.routes.manage", A, "Manage notification routes"),
  p("notifications", "notifications.deliveries.view", O, "View notification deliveries"),
  p("notifications", "notifications.silences.manage", O, "Manage notification silences"),
  p("notifications", "notifications.test.send", A, "Send test notifications"),
  p("networks", "networks.sweeps.view", V, "View network sweep results"),
  p("networks", "networks.sweeps.run", O, "Run network sweeps"),
  p("networks", "networks.discovery.run", O, "Run network discovery"),
  p("settings", "settings.view", O, "View settings"),
  p("settings", "settings.password.manage", O, "Change own password policy settings"),
  p("settings", "settings.networks.manage", O, "Manage network settings"),
  p("settings", "settings.integrations.manage", O, "Manage integrations"),
  p("settings", "settings.jobs.manage", A, "Manage background jobs"),
  p("settings", "settings.rbac.manage", A, "Manage users, role profiles and API keys"),
  p("settings", "settings.auth.manage", A, "Manage authentication settings"),
  p("settings", "settings.edge.manage", A, "Manage edge onboarding"),
  p("settings", "metrics.read", A, "Read netmon's own metrics (GET /metrics, GET /health/detail)"),
  p("cli", "cli.dashboard.publish", A, "Publish dashboard packages"),
  p("cli", "cli.dashboard.enable", A, "Enable dashboard packages"),
  p("cli", "cli.dashboard.disable", A, "Disable dashboard packages"),
  p("cli", "cli.session.create", O, "Create CLI sessions"),
  p("cli", "cli.session.read_own", V, "List own CLI sessions"),
  p("cli", "cli.session.revoke_own", V, "Revoke own CLI sessions"),
  p("dashboards", "dashboards.packages.view_all", A, "View every dashboard package"),
];

export const PERMISSION_KEYS: ReadonlySet<string> = new Set(PERMISSIONS.map((d) => d.key));

const ROLE_DEFAULTS: Record<Role, ReadonlySet<string>> = {
  viewer: new Set(PERMISSIONS.filter((d) => d.roles.includes("viewer")).map((d) => d.key)),
  operator: new Set(PERMISSIONS.filter((d) => d.roles.includes("operator")).map((d) => d.key)),
  admin: new Set(PERMISSIONS.filter((d) => d.roles.includes("admin")).map((d) => d.key)),
};

/** The default permission set of a role. */
export function roleDefaults(role: Role): ReadonlySet<string> {
  return ROLE_DEFAULTS[role];
}

export function isPermissionKey(key: string): boolean {
  return PERMISSION_KEYS.has(key);
}

/** Base role's defaults, plus grants, minus revokes (a revoke wins over a grant of the same key). */
export function effectivePermissions(
  baseRole: Role,
  grants: readonly string[] = [],
  revokes: readonly string[] = [],
): Set<string> {
  const set = new Set(ROLE_DEFAULTS[baseRole]);
  for (const g of grants) if (PERMISSION_KEYS.has(g)) set.add(g);
  for (const r of revokes) set.delete(r);
  return set;
}
