import type { ParsedArgs } from "./args.ts";

export interface Command {
  name: string;
  /** One line for `netmon --help`. */
  summary: string;
  /** Full usage text for `netmon <name> --help`. */
  usage: string;
  /** Flags that take no value. */
  booleanFlags?: string[];
  /**
   * `runCommand` is the dispatcher itself, passed in rather than imported so the command
   * list and the dispatcher form no import cycle (`serve` hands it to the CLI channel).
   */
  run(args: ParsedArgs, runCommand: (argv: readonly string[]) => Promise<number>): Promise<number>;
}
