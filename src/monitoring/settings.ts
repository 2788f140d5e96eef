import type { Config } from "../config/config.ts";

/** Monitoring settings from the environment (see README, NETMON_HEARTBEAT_TIMEOUT etc.). */
export function monitoringSettings(config: Config): Config["monitoring"] {
  return config.monitoring;
}
