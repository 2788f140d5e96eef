import { tokensCommand, usersCommand } from "../access/cli.ts";
import { alertsCommand } from "../alerting/alerts-cli.ts";
import { notificationsCommand } from "../alerting/cli.ts";
import { dashboardCommand } from "../dashboards/cli.ts";
import { devicesCommand } from "../inventory/cli.ts";
import { mcpCommand } from "../mcp/cli.ts";
import { agentCommand, gatewayCommand } from "../monitoring/cli.ts";
import { checksCommand } from "../monitoring/composite-cli.ts";
import { backupCommand, dbCommand, restoreCommand } from "../ops/cli.ts";
import { queryCommand } from "../srql/cli.ts";
import type { Command } from "./command.ts";
import { migrateCommand } from "./migrate.ts";
import { serveCommand } from "./serve.ts";

/** Every CLI command. Domains add theirs here. */
export const COMMANDS: Command[] = [
  serveCommand,
  migrateCommand,
  usersCommand,
  tokensCommand,
  queryCommand,
  devicesCommand,
  gatewayCommand,
  agentCommand,
  checksCommand,
  notificationsCommand,
  alertsCommand,
  mcpCommand,
  dashboardCommand,
  backupCommand,
  restoreCommand,
  dbCommand,
];
