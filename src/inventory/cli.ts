import { flag, UsageError } from "../cli/args.ts";
import type { Command } from "../cli/command.ts";
import { withContext } from "../cli/database.ts";
import { cliPath, stderr, stderrStream, stdout } from "../cli/io.ts";
import { ImportValidationError, importDevicesFile, progressBar } from "./import.ts";

export const devicesCommand: Command = {
  name: "devices",
  summary: "Import devices from a CSV or JSON-lines file",
  usage: `netmon devices import FILE [--format csv|jsonl] [--source NAME] [--partition P] [--group NAME|ID]

Each row is a device sighting, reconciled through identity resolution exactly like
POST /api/v1/device-updates: ip (required), mac, hostname, partition, source, agent_id,
gateway_id, type, vendor_name, model, is_available, observed_at, ... CSV files need a header
row; columns that are not sighting fields go into the device's metadata. --source sets the
source of rows that have none (default "import"). --group puts every imported device into
that device group (by name or id), so the group's monitoring profiles monitor them. The whole file is validated first; any
invalid row aborts the import with its line number and nothing is written. Progress goes to
stderr.`,
  async run(args) {
    if (args.positionals[0] !== "import")
      throw new UsageError("expected 'import' (see netmon devices --help)");
    const file = args.positionals[1];
    if (!file) throw new UsageError("FILE is required");
    const format = flag(args, "format");
    if (format !== undefined && format !== "csv" && format !== "jsonl")
      throw new UsageError("--format must be csv or jsonl");
    try {
      const res = await withContext((ctx) =>
        importDevicesFile(ctx, cliPath(file), {
          format,
          source: flag(args, "source") ?? "import",
          partition: flag(args, "partition"),
          group: flag(args, "group"),
          onProgress: progressBar(stderrStream()),
        }),
      );
      stdout(`imported ${res.rows} rows: ${res.created} devices created, ${res.updated} updated\n`);
      // Never drop what the file said without saying so (issue 13).
      for (const [field, rows] of Object.entries(res.unknown_fields)) {
        stderr(`warning: unknown field '${field}' in ${rows} row(s) was ignored\n`);
      }
      if (res.metadata_columns.length > 0) {
        stderr(
          `note: columns ${res.metadata_columns.map((c) => `'${c}'`).join(", ")} are not device fields; stored in metadata\n`,
        );
      }
      return 0;
    } catch (err) {
      if (err instanceof ImportValidationError) {
        for (const e of err.lineErrors.slice(0, 50)) {
          stderr(`line ${e.line}: ${e.field ?? "row"}: ${e.message}\n`);
        }
        if (err.lineErrors.length > 50) stderr(`... and ${err.lineErrors.length - 50} more\n`);
        stderr(`error: ${err.message}\n`);
        return 1;
      }
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        stderr(`error: no such file: ${file}\n`);
        return 1;
      }
      throw err;
    }
  },
};
